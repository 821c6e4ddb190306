// The sandbox service: the engine's VMs under the record's rules. Every
// operation is done for an account; every state change is written to the
// store before it is acted on. It enforces lifetimes (expiry, extend), the
// per-account cap, prepaid credit metered per second, idempotent creates,
// and reconciles the record with what libvirt runs. The REST and MCP
// layers and the GUI sit on top of this and nothing below it.
#pragma once

#include "../async.h"
#include "../sandbox/engine.h"
#include "../store/store.h"
#include "settings.h"

#include <QFuture>
#include <QHash>
#include <QObject>
#include <QSet>
#include <QTimer>

namespace sandcastle {

struct CreateRequest {
    QString size;           // empty: the default size
    QString name;           // may be empty
    int timeoutMinutes = 0; // 0: the default lifetime
    bool internet = true;   // false: network "none", no network card
    QString idempotencyKey; // empty: none
    QString requestHash;    // identifies the request body for the key
};

/// Where a sandbox stands for its account, ready to show.
struct SandboxView {
    SandboxRecord record;
    bool replayed = false; // an Idempotency-Key returned an earlier create
};

class SandboxService : public QObject {
    Q_OBJECT
public:
    SandboxService(Engine *engine, Store *store, Settings settings, QObject *parent = nullptr);

    /// Reconciles the record with libvirt after a start (the app may have
    /// been killed): takes over sandboxes that still run, ends the rest,
    /// destroys VMs the record does not know; then starts the timers.
    /// The future finishes when the service is ready for requests.
    QFuture<Result<void>> start();

    QFuture<Result<SandboxView>> create(const QString &accountId, const CreateRequest &request);
    Result<SandboxRecord> get(const QString &accountId, const QString &id) const;
    Result<QList<SandboxRecord>> list(const QString &accountId, int limit,
                                      const QString &startingAfter,
                                      std::optional<SandboxStatus> status) const;
    QFuture<Result<ExecResult>> exec(const QString &accountId, const QString &id,
                                     const ExecRequest &request);
    Result<QList<ExecRecord>> execs(const QString &accountId, const QString &id, int limit,
                                    qint64 beforeId) const;
    QFuture<Result<void>> writeFile(const QString &accountId, const QString &id,
                                    const QString &path, const QByteArray &data);
    QFuture<Result<QByteArray>> readFile(const QString &accountId, const QString &id,
                                         const QString &path);
    Result<SandboxRecord> extend(const QString &accountId, const QString &id, int minutes);
    /// Destroys the VM; a sandbox that already ended is returned as it is.
    QFuture<Result<SandboxRecord>> destroy(const QString &accountId, const QString &id);

    const Settings &settings() const { return settings_; }
    Store *store() const { return store_; }
    Engine *engine() const { return engine_; }

    /// One housekeeping pass now (metering, expiry); tests and the timer.
    void tick();
    /// Applies the retention setting to the record.
    void prune(qint64 now);
    /// One reconciliation pass now (skipped while one runs).
    /// Finishes when the pass has (at once when one is under way).
    QFuture<Result<void>> reconcile();

signals:
    /// Status or lifetime of a sandbox changed (not its cost by the second).
    void sandboxChanged(const QString &id);
    /// Once a second, after metering: the live sandboxes' cost and time
    /// left moved on. One signal for all, so a view reads them once.
    void liveTicked();
    void execStarted(const QString &sandboxId, qint64 execId);
    void execFinished(const QString &sandboxId, qint64 execId);
    void creditChanged(const QString &accountId);

private:
    Result<SandboxRecord> owned(const QString &accountId, const QString &id) const;
    /// The record of `id`; an error when it cannot be read.
    Result<SandboxRecord> record(const QString &id) const;
    Result<SandboxRecord> runningBox(const QString &accountId, const QString &id) const;
    /// Records that the sandbox is stopping (ending as `ending`), destroys
    /// its VM, then records the end. Idempotent while one is in flight.
    /// `billToEnd`: bill up to now; otherwise only up to the last metering
    /// (a VM found dead after an unknown time).
    QFuture<Result<void>> stop(const QString &id, SandboxStatus ending, const QString &reason,
                               bool billToEnd = true);
    void onLost(const QString &id, const QString &reason);
    /// Compares the domains libvirt lists with the record; `atStart`
    /// additionally takes over running VMs and sweeps stray folders.
    QFuture<Result<void>> reconcileWith(const QList<DomainStatus> &domains, bool atStart);

    Engine *engine_;
    Store *store_;
    Settings settings_;
    QTimer ticker_;
    QTimer reconciler_;
    bool reconciling_ = false;
    qint64 prunedAt_ = 0;
    QFuture<Result<void>> pass_; // the reconciliation under way, if any
    QSet<QString> unsure_;       // sandboxes whose domain's state libvirt could not tell
    // Work in flight, by sandbox id; every caller waits on its own future.
    QHash<QString, std::shared_ptr<FanOut<Result<SandboxView>>>> creating_;
    QHash<QString, std::shared_ptr<FanOut<Result<void>>>> stopping_;
};

} // namespace sandcastle
