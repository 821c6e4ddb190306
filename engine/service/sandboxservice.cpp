#include "sandboxservice.h"

#include "../async.h"
#include "../hostresources.h"

#include <QDateTime>
#include <QPromise>
#include <QtDebug>

namespace sandcastle {

using Kind = EngineError::Kind;

namespace {

constexpr qint64 kMaxLifetimeMs = 24 * 3600 * 1000ll;

QString when(qint64 ms) {
    return QDateTime::fromMSecsSinceEpoch(ms, Qt::UTC).toString(Qt::ISODate);
}

/// Why a sandbox that is not running cannot take a command.
EngineError notRunning(const SandboxRecord &r) {
    QString message = QStringLiteral("sandbox %1 is %2").arg(r.id, statusName(r.status));
    if (!r.statusReason.isEmpty())
        message += QStringLiteral(" (%1)").arg(r.statusReason);
    if (r.status == SandboxStatus::Creating)
        message += QStringLiteral(": retry when its status is running");
    else
        message += QStringLiteral(": create a new sandbox");
    return {Kind::Conflict, message};
}

QByteArray redacted(QByteArray data, const QList<QPair<QByteArray, QByteArray>> &secrets) {
    for (const auto &[value, mask] : secrets)
        data.replace(value, mask);
    return data;
}

/// Text safe to keep as a preview: the last `bytes` of `data`.
QString previewOf(const QByteArray &data, int bytes = 2048) {
    QByteArray tail = data.right(bytes);
    // Do not start in the middle of a UTF-8 sequence.
    int skip = 0;
    while (skip < tail.size() && skip < 3 && (quint8(tail[skip]) & 0xC0) == 0x80)
        ++skip;
    return QString::fromUtf8(tail.mid(skip));
}

} // namespace

SandboxService::SandboxService(Engine *engine, Store *store, Settings settings, QObject *parent)
    : QObject(parent)
    , engine_(engine)
    , store_(store)
    , settings_(std::move(settings)) {
    connect(engine_, &Engine::sandboxLost, this, &SandboxService::onLost);
    connect(engine_, &Engine::createProgress, this, [this](const QString &id, const QString &what) {
        if (auto changed = store_->setCreatingReason(id, what); changed && *changed)
            emit sandboxChanged(id);
    });
    ticker_.setInterval(1000);
    connect(&ticker_, &QTimer::timeout, this, &SandboxService::tick);
    reconciler_.setInterval(settings_.reconcileIntervalMs);
    connect(&reconciler_, &QTimer::timeout, this, [this] { reconcile(); });
}

QFuture<Result<void>> SandboxService::start() {
    if (auto r = store_->interruptExecs({}, QStringLiteral("Sandcastle stopped while it ran"));
        r && *r > 0)
        qInfo().noquote() << "marked" << *r << "exec(s) interrupted by the last stop";
    auto promise = std::make_shared<QPromise<Result<void>>>();
    promise->start();
    reconciling_ = true;
    // Ready either way: without libvirt the record still serves reads.
    auto ready = [this, promise](Result<void> r) {
        reconciling_ = false;
        tick(); // expiry of what ran out while the app was down
        ticker_.start();
        reconciler_.start();
        promise->addResult(std::move(r));
        promise->finish();
    };
    engine_->listDomains().then(this, [this, ready](Result<QList<DomainStatus>> domains) {
        if (!domains)
            ready(std::unexpected(domains.error()));
        else
            reconcileWith(*domains, true).then(this, ready);
    });
    return promise->future();
}

Result<SandboxRecord> SandboxService::record(const QString &id) const {
    if (auto r = store_->sandbox(id))
        return *r;
    return fail(Kind::Internal,
                QStringLiteral("the record of sandbox %1 cannot be read").arg(id.left(64)));
}

Result<SandboxRecord> SandboxService::owned(const QString &accountId, const QString &id) const {
    auto r = Engine::isValidId(id) ? store_->sandbox(id) : std::nullopt;
    // Someone else's sandbox does not exist, as far as this account knows.
    if (!r || r->accountId != accountId)
        return fail(Kind::NotFound,
                    QStringLiteral("no sandbox '%1' in this account: check the id (GET "
                                   "/v1/sandboxes lists them)")
                        .arg(id.left(64)));
    return *r;
}

Result<SandboxRecord> SandboxService::get(const QString &accountId, const QString &id) const {
    return owned(accountId, id);
}

Result<QList<SandboxRecord>> SandboxService::list(const QString &accountId, int limit,
                                                  const QString &startingAfter,
                                                  std::optional<SandboxStatus> status) const {
    return store_->listSandboxes(accountId, limit, startingAfter, status);
}

Result<SandboxRecord> SandboxService::runningBox(const QString &accountId,
                                                 const QString &id) const {
    auto r = owned(accountId, id);
    if (r && r->status != SandboxStatus::Running)
        return std::unexpected(notRunning(*r));
    return r;
}

QFuture<Result<SandboxView>> SandboxService::create(const QString &accountId,
                                                    const CreateRequest &request) {
    const qint64 now = nowMs();
    if (!request.idempotencyKey.isEmpty()) {
        if (auto seen = store_->idempotent(accountId, request.idempotencyKey, now)) {
            if (seen->second != request.requestHash)
                return failedFuture<SandboxView>(
                    {Kind::Conflict,
                     QStringLiteral("this Idempotency-Key was used within 24 hours for a "
                                    "different request: use a new key for a new sandbox")});
            if (creating_.contains(seen->first)) // the first request is still booting it
                return creating_.value(seen->first)->wait().then([](Result<SandboxView> v) {
                    if (v)
                        v->replayed = true;
                    return v;
                });
            // A create that failed before its VM ever ran does not hold the
            // key: retrying after a 503 is what the key is for.
            auto box = store_->sandbox(seen->first);
            if (box && !(box->status == SandboxStatus::Error && box->bootMs == 0))
                return readyFuture<Result<SandboxView>>(SandboxView{*box, true});
        }
    }
    const QString sizeName = request.size.isEmpty() ? settings_.defaultSize : request.size;
    const auto size = findSize(sizeName);
    if (!size)
        return failedFuture<SandboxView>(
            {Kind::InvalidArgument,
             QStringLiteral("unknown size '%1': use small, medium or large (GET /v1/sizes)")
                 .arg(sizeName.left(40))});
    const int minutes =
        request.timeoutMinutes > 0 ? request.timeoutMinutes : settings_.defaultTimeoutMinutes;
    if (minutes > 1440)
        return failedFuture<SandboxView>(
            {Kind::InvalidArgument, QStringLiteral("timeout_minutes is at most 1440 (24 hours)")});
    auto account = store_->account(accountId);
    if (!account)
        return failedFuture<SandboxView>({Kind::NotFound, QStringLiteral("no such account")});
    if (account->balanceMicros <= 0)
        return failedFuture<SandboxView>(
            {Kind::NoCredit,
             QStringLiteral("the account's credit is used up (balance %1): add credit with "
                            "`sandcastle credit add AMOUNT`")
                 .arg(formatMoney(account->balanceMicros))});
    const auto live = store_->liveCount(accountId);
    if (!live)
        return failedFuture<SandboxView>(live.error());
    if (*live >= settings_.maxLiveSandboxes)
        return failedFuture<SandboxView>(
            {Kind::QuotaExceeded,
             QStringLiteral("the account already has %1 live sandboxes (the cap is %2): "
                            "destroy one (DELETE /v1/sandboxes/{id}) or wait for one to expire")
                 .arg(*live)
                 .arg(settings_.maxLiveSandboxes)});
    // Then the host's, across accounts (the account's own cap answers first:
    // its 429 says what the account itself can do).
    const int hostLimit = settings_.maxHostSandboxes > 0 ? settings_.maxHostSandboxes
                                                         : defaultHostSandboxLimit(hostMemory());
    const auto onHost = store_->liveCount({});
    if (!onHost)
        return failedFuture<SandboxView>(onHost.error());
    if (*onHost >= hostLimit)
        return failedFuture<SandboxView>(
            {Kind::Unavailable,
             QStringLiteral("this host already runs %1 live sandboxes, its limit (setting "
                            "max_host_sandboxes): retry when one ends")
                 .arg(*onHost)});

    SandboxRecord rec;
    rec.id = Engine::newId();
    rec.accountId = accountId;
    rec.name = request.name;
    rec.size = size->name;
    rec.vcpus = size->vcpus;
    rec.memoryMiB = size->memoryMiB;
    rec.diskGiB = size->diskGiB;
    rec.network = request.internet ? QStringLiteral("internet") : QStringLiteral("none");
    rec.status = SandboxStatus::Creating;
    rec.createdAt = now;
    rec.expiresAt = now + minutes * 60000ll;
    rec.timeoutMinutes = minutes;
    rec.rateMicrosPerHour = settings_.ratesMicrosPerHour.value(size->name);
    rec.chargedUntil = now;
    if (auto ok = store_->insertSandbox(rec, request.idempotencyKey, request.requestHash); !ok)
        return failedFuture<SandboxView>(ok.error());
    emit sandboxChanged(rec.id);

    auto waiters = std::make_shared<FanOut<Result<SandboxView>>>();
    creating_.insert(rec.id, waiters);
    QFuture<Result<SandboxView>> mine = waiters->wait();
    const QString id = rec.id;
    engine_->create({rec.size, rec.name, rec.id, request.internet})
        .then(this, [this, id, waiters](Result<SandboxInfo> info) {
            auto finish = [&](Result<SandboxView> v) {
                creating_.remove(id);
                waiters->finish(v);
            };
            auto rec = store_->sandbox(id);
            if (info && rec && rec->status == SandboxStatus::Creating) {
                auto ran = store_->setRunning(id, info->bootMs);
                auto now = ran ? record(id) : std::unexpected(ran.error());
                if (!now) {
                    // A VM the record cannot show is a VM nobody can reach
                    // or bill: it goes (the reconciler retries if this fails).
                    qWarning().noquote() << "sandbox" << id
                                         << "booted but cannot be recorded:" << now.error().message;
                    stop(id, SandboxStatus::Error,
                         QStringLiteral("the record could not be written: %1")
                             .arg(now.error().message));
                    emit sandboxChanged(id);
                    finish(std::unexpected(now.error()));
                    return;
                }
                emit sandboxChanged(id);
                finish(SandboxView{*now, false});
                return;
            }
            if (rec && rec->status == SandboxStatus::Creating) {
                // The boot failed; the engine has already cleaned up.
                if (auto ok = store_->setEnded(
                        id, SandboxStatus::Error,
                        QStringLiteral("the VM did not start: %1").arg(info.error().message),
                        nowMs());
                    !ok)
                    qWarning().noquote() << "could not record the failed create of" << id << ":"
                                         << ok.error().message;
                emit sandboxChanged(id);
                finish(std::unexpected(info.error()));
                return;
            }
            // Stopped (DELETE, expiry, credit) while it booted.
            finish(std::unexpected(rec ? notRunning(*rec)
                                       : EngineError{Kind::Internal, QStringLiteral("lost")}));
        });
    return mine;
}

QFuture<Result<ExecResult>> SandboxService::exec(const QString &accountId, const QString &id,
                                                 const ExecRequest &request) {
    auto box = runningBox(accountId, id);
    if (!box)
        return failedFuture<ExecResult>(box.error());
    if (auto ok = Engine::validate(request); !ok)
        return failedFuture<ExecResult>(ok.error());
    ExecRecord rec;
    rec.sandboxId = id;
    rec.command = request.command;
    rec.cwd = request.cwd.isEmpty() ? QStringLiteral("/home/sandbox") : request.cwd;
    for (const auto &[name, value] : request.env)
        rec.envNames << name;
    rec.timeoutMs = request.timeoutMs;
    rec.startedAt = nowMs();
    // Env values are secrets: a command that prints one must not put it in
    // the record's output preview either. Kept in memory for this exec only.
    QList<QPair<QByteArray, QByteArray>> secrets;
    for (const auto &[name, value] : request.env) {
        if (value.size() >= 4)
            secrets.append({value.toUtf8(), "[env:" + name.toUtf8() + "]"});
    }
    // Longest first: a value inside another must not break the longer one.
    std::sort(secrets.begin(), secrets.end(),
              [](const auto &a, const auto &b) { return a.first.size() > b.first.size(); });
    auto begun = store_->beginExec(rec);
    if (!begun)
        return failedFuture<ExecResult>(begun.error());
    rec.id = *begun;
    emit execStarted(id, rec.id);
    // The record is completed here, whether or not the client still waits.
    return engine_->exec(id, request)
        .then(this, [this, rec, secrets](Result<ExecResult> r) mutable {
            rec.finishedAt = nowMs();
            if (r) {
                rec.status = QStringLiteral("finished");
                rec.exitCode = r->exitCode;
                rec.durationMs = r->durationMs;
                rec.stdoutBytes = r->stdoutBytes;
                rec.stderrBytes = r->stderrBytes;
                rec.truncated = r->truncated;
                rec.stdoutPreview = previewOf(redacted(r->stdoutData, secrets));
                rec.stderrPreview = previewOf(redacted(r->stderrData, secrets));
            } else {
                auto box = store_->sandbox(rec.sandboxId);
                const bool gone = box && box->status != SandboxStatus::Running;
                rec.status = gone ? QStringLiteral("interrupted") : QStringLiteral("failed");
                rec.durationMs = rec.finishedAt - rec.startedAt;
                if (gone)
                    r = std::unexpected(
                        EngineError{Kind::Conflict, QStringLiteral("the sandbox ended while the "
                                                                   "command ran: %1")
                                                        .arg(notRunning(*box).message)});
                rec.error = r.error().message;
            }
            if (auto ok = store_->finishExec(rec); !ok)
                qWarning().noquote() << "could not record exec" << rec.id << ok.error().message;
            emit execFinished(rec.sandboxId, rec.id);
            return r;
        });
}

Result<QList<ExecRecord>> SandboxService::execs(const QString &accountId, const QString &id,
                                                int limit, qint64 beforeId) const {
    auto box = owned(accountId, id);
    if (!box)
        return std::unexpected(box.error());
    return store_->execs(id, limit, beforeId);
}

QFuture<Result<void>> SandboxService::writeFile(const QString &accountId, const QString &id,
                                                const QString &path, const QByteArray &data) {
    auto box = runningBox(accountId, id);
    if (!box)
        return failedFuture<void>(box.error());
    return engine_->writeFile(id, path, data);
}

QFuture<Result<QByteArray>> SandboxService::readFile(const QString &accountId, const QString &id,
                                                     const QString &path) {
    auto box = runningBox(accountId, id);
    if (!box)
        return failedFuture<QByteArray>(box.error());
    return engine_->readFile(id, path);
}

Result<SandboxRecord> SandboxService::extend(const QString &accountId, const QString &id,
                                             int minutes) {
    auto box = owned(accountId, id);
    if (!box)
        return box;
    if (box->status != SandboxStatus::Running && box->status != SandboxStatus::Creating)
        return std::unexpected(notRunning(*box));
    const qint64 expires = box->expiresAt + minutes * 60000ll;
    if (minutes < 1 || expires - box->createdAt > kMaxLifetimeMs) {
        const qint64 room = (box->createdAt + kMaxLifetimeMs - box->expiresAt) / 60000;
        return fail(Kind::InvalidArgument,
                    QStringLiteral("a sandbox lives at most 24 hours from its creation; this one "
                                   "can be extended by at most %1 more minutes")
                        .arg(room));
    }
    const int total = int((expires - box->createdAt + 59999) / 60000);
    if (auto ok = store_->setExpiresAt(id, expires, total); !ok)
        return std::unexpected(ok.error());
    emit sandboxChanged(id);
    return record(id);
}

QFuture<Result<SandboxRecord>> SandboxService::destroy(const QString &accountId,
                                                       const QString &id) {
    auto box = owned(accountId, id);
    if (!box)
        return failedFuture<SandboxRecord>(box.error());
    if (!isLive(box->status))
        return readyFuture<Result<SandboxRecord>>(*box);
    const QString reason = box->status == SandboxStatus::Stopping
                               ? box->statusReason
                               : QStringLiteral("destroyed on request");
    const SandboxStatus ending =
        box->status == SandboxStatus::Stopping ? box->endingStatus : SandboxStatus::Destroyed;
    return stop(id, ending, reason).then(this, [this, id](Result<void> r) -> Result<SandboxRecord> {
        if (!r)
            return std::unexpected(r.error());
        return record(id);
    });
}

QFuture<Result<void>> SandboxService::stop(const QString &id, SandboxStatus ending,
                                           const QString &reason, bool billToEnd) {
    if (stopping_.contains(id))
        return stopping_.value(id)->wait();
    if (auto box = store_->sandbox(id); !box || !isLive(box->status))
        return readyFuture<Result<void>>({}); // ended meanwhile (a late attach failure)
    if (auto ok = store_->setStopping(id, ending, reason, billToEnd); !ok)
        return failedFuture<void>(ok.error());
    emit sandboxChanged(id);
    auto waiters = std::make_shared<FanOut<Result<void>>>();
    stopping_.insert(id, waiters);
    QFuture<Result<void>> mine = waiters->wait();
    engine_->destroy(id).then(this, [this, id, ending, reason, waiters](Result<void> r) {
        if (r) {
            if (auto n = store_->interruptExecs(
                    id, QStringLiteral("the sandbox was %1 while it ran").arg(statusName(ending)));
                !n)
                qWarning().noquote()
                    << "could not mark" << id << "'s commands interrupted:" << n.error().message;
            // Left as stopping when this fails: the reconciler retries.
            if (auto ok = store_->setEnded(id, ending, reason, nowMs()); !ok)
                r = std::unexpected(ok.error());
        } else {
            // Left as stopping: the reconciler retries.
            qWarning().noquote() << "destroying" << id << "failed:" << r.error().message;
        }
        stopping_.remove(id);
        emit sandboxChanged(id);
        if (auto box = store_->sandbox(id))
            emit creditChanged(box->accountId);
        waiters->finish(r);
    });
    return mine;
}

void SandboxService::onLost(const QString &id, const QString &reason) {
    auto box = store_->sandbox(id);
    if (!box || box->status != SandboxStatus::Running)
        return;
    qWarning().noquote() << "sandbox" << id << "lost:" << reason;
    stop(id, SandboxStatus::Error, QStringLiteral("the VM stopped unexpectedly: %1").arg(reason));
}

void SandboxService::tick() {
    engine_->capConsoleLogs();
    const qint64 now = nowMs();
    if (now - prunedAt_ >= 3600 * 1000) { // at start, then hourly
        prunedAt_ = now;
        prune(now);
    }
    auto charged = store_->meter(now);
    if (!charged) {
        qWarning().noquote() << "metering failed:" << charged.error().message;
        return;
    }
    QSet<QString> broke;
    for (const ChargeOutcome &c : *charged) {
        emit creditChanged(c.accountId);
        if (c.balanceMicros <= 0)
            broke.insert(c.accountId);
    }
    const auto live = store_->liveSandboxes();
    if (!live) {
        qWarning().noquote() << "expiry check skipped:" << live.error().message;
        return;
    }
    for (const SandboxRecord &box : *live) {
        if (box.status == SandboxStatus::Stopping || stopping_.contains(box.id))
            continue;
        if (broke.contains(box.accountId))
            stop(box.id, SandboxStatus::Destroyed,
                 QStringLiteral("credit used up: the account's prepaid credit reached zero"));
        else if (box.expiresAt <= now)
            stop(box.id, SandboxStatus::Expired,
                 QStringLiteral("expired at %1 (timeout %2 minutes)")
                     .arg(when(box.expiresAt))
                     .arg(box.timeoutMinutes));
    }
    emit liveTicked();
}

void SandboxService::prune(qint64 now) {
    const int days = settings().retentionDays;
    if (days <= 0)
        return;
    auto pruned = store_->prune(now - qint64(days) * 24 * 3600 * 1000, now);
    if (!pruned)
        qWarning().noquote() << "pruning the record failed:" << pruned.error().message;
    else if (pruned->execs + pruned->events > 0)
        qInfo().noquote() << QStringLiteral("retention: removed %1 command(s) and %2 event(s) "
                                            "of sandboxes that ended over %3 days ago")
                                 .arg(pruned->execs)
                                 .arg(pruned->events)
                                 .arg(days);
}

QFuture<Result<void>> SandboxService::reconcile() {
    // A caller waits for the pass under way, not for nothing.
    if (reconciling_)
        return pass_.isValid()
                   ? pass_
                   : failedFuture<void>(Kind::Conflict,
                                        QStringLiteral("the start-up pass is under way"));
    reconciling_ = true;
    // The host filter first: a firewall reload may have removed it, or it
    // could not be loaded yet. The engine logs a failure once, not every
    // few seconds while it lasts.
    engine_->checkNetwork();
    pass_ = engine_->listDomains()
                .then(this,
                      [this](Result<QList<DomainStatus>> domains) -> QFuture<Result<void>> {
                          if (!domains) {
                              // An error says nothing about any VM: nothing ends.
                              qWarning().noquote()
                                  << "reconcile: cannot list domains:" << domains.error().message;
                              return failedFuture<void>(domains.error());
                          }
                          return reconcileWith(*domains, false);
                      })
                .unwrap()
                .then(this, [this](Result<void> r) {
                    reconciling_ = false;
                    pass_ = {};
                    return r;
                });
    return pass_;
}

QFuture<Result<void>> SandboxService::reconcileWith(const QList<DomainStatus> &domains,
                                                    bool atStart) {
    QHash<QString, DomainState> running; // sandbox id -> state of its domain
    for (const DomainStatus &d : domains) {
        const QString id = Engine::idForDomain(d.name);
        if (!id.isEmpty())
            running.insert(id, d.state);
    }
    // Without the record, nothing is known to be a stray: do nothing.
    const auto live = store_->liveSandboxes();
    if (!live) {
        qWarning().noquote() << "reconcile skipped: the record cannot be read:"
                             << live.error().message;
        return failedFuture<void>(live.error());
    }
    QList<QFuture<Result<void>>> work;
    QSet<QString> known;
    for (const SandboxRecord &box : *live) {
        known.insert(box.id);
        if (creating_.contains(box.id) || stopping_.contains(box.id))
            continue; // in flight in this process
        // Only a definite answer ends a sandbox: its domain is gone from a
        // list libvirt gave, or shut off. A state libvirt could not tell
        // (a transient error) or a shutdown under way is looked at again
        // next round.
        const bool listed = running.contains(box.id);
        const DomainState state = running.value(box.id, DomainState::Unknown);
        if (box.status == SandboxStatus::Running && listed && state != DomainState::Running &&
            state != DomainState::Stopped) {
            if (!unsure_.contains(box.id))
                qWarning().noquote()
                    << "reconcile: the state of" << box.id << "is" << domainStateName(state)
                    << "for now; it is checked again at the next round";
            unsure_.insert(box.id);
            continue;
        }
        unsure_.remove(box.id);
        const bool up = state == DomainState::Running;
        switch (box.status) {
        case SandboxStatus::Creating:
            work << stop(box.id, SandboxStatus::Error,
                         QStringLiteral("Sandcastle stopped while the sandbox was being created"));
            break;
        case SandboxStatus::Stopping:
            work << stop(box.id, box.endingStatus, box.statusReason);
            break;
        case SandboxStatus::Running:
            if (!up) {
                work << stop(box.id, SandboxStatus::Error,
                             running.contains(box.id)
                                 ? QStringLiteral("the VM stopped unexpectedly (%1)")
                                       .arg(domainStateName(running.value(box.id)))
                                 : QStringLiteral("the VM was gone (killed from outside, or the "
                                                  "host restarted)"),
                             false); // when it died is unknown: bill what was seen running
            } else if (!engine_->sandbox(box.id)) {
                // Still running from before a restart: take it over.
                const QString id = box.id;
                work << engine_
                            ->attach(id, box.size, box.name,
                                     box.network == QLatin1String("internet"))
                            .then(this, [this, id](Result<SandboxInfo> r) -> Result<void> {
                                if (r) {
                                    (void)store_->addEvent(id, QStringLiteral("attached"));
                                    qInfo().noquote() << "took over running sandbox" << id;
                                    return {};
                                }
                                stop(id, SandboxStatus::Error,
                                     QStringLiteral("its agent did not answer after a restart: %1")
                                         .arg(r.error().message));
                                return {};
                            });
            }
            break;
        default:
            break;
        }
    }
    for (auto it = running.begin(); it != running.end(); ++it) {
        if (known.contains(it.key()))
            continue;
        qWarning().noquote() << "destroying VM" << it.key() << "which the record does not know";
        work << engine_->destroy(it.key());
    }
    if (atStart) {
        for (const QString &id : engine_->sandboxFolders()) {
            if (!known.contains(id) && !running.contains(id))
                engine_->destroy(id); // removes the stray folder too
        }
    }
    if (work.isEmpty())
        return readyFuture<Result<void>>({});
    return QtFuture::whenAll(work.begin(), work.end())
        .then(this, [](const QList<QFuture<Result<void>>> &) -> Result<void> { return {}; });
}

} // namespace sandcastle
