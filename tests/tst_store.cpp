// The record on a real SQLite file: migrations, keys hashed at rest,
// metering, idempotency, exec records, settings validation, and faults
// set up through a second connection (triggers that fail, a table that
// cannot be read) or a real full filesystem.
#include "service/settings.h"
#include "store/store.h"

#include <QCryptographicHash>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTest>

#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

using namespace sandcastle;

class TestStore : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir;
    QString path() const { return dir.path() + QStringLiteral("/t.db"); }

    SandboxRecord box(const QString &account, const QString &id, qint64 createdAt, qint64 rate) {
        SandboxRecord r;
        r.id = id;
        r.accountId = account;
        r.size = QStringLiteral("small");
        r.vcpus = 1;
        r.memoryMiB = 1024;
        r.diskGiB = 8;
        r.createdAt = createdAt;
        r.expiresAt = createdAt + 3600000;
        r.timeoutMinutes = 60;
        r.rateMicrosPerHour = rate;
        r.chargedUntil = createdAt;
        return r;
    }

    /// Runs `sql` on the database at `file` through a connection of its own
    /// (the way another process would), to set up a fault.
    static bool rawSql(const QString &file, const QString &sql) {
        bool ok = false;
        {
            QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), "fault");
            db.setDatabaseName(file);
            ok = db.open() && QSqlQuery(db).exec(sql);
            db.close();
        }
        QSqlDatabase::removeDatabase("fault");
        return ok;
    }

private slots:
    void migratesAndReopens() {
        auto s = Store::open(path());
        QVERIFY(s.has_value());
        QCOMPARE((*s)->version(), Store::latestVersion());
        QVERIFY((*s)->setSetting(QStringLiteral("port"), QStringLiteral("9000")).has_value());
        s->reset();
        auto again = Store::open(path());
        QVERIFY(again.has_value());
        QCOMPARE((*again)->settings().value(QStringLiteral("port")), QStringLiteral("9000"));
    }

    void refusesANewerSchema() {
        const QString p = dir.path() + QStringLiteral("/newer.db");
        {
            auto s = Store::open(p);
            QVERIFY(s.has_value());
        }
        {
            QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), "raw");
            db.setDatabaseName(p);
            QVERIFY(db.open());
            QSqlQuery(db).exec(QStringLiteral("PRAGMA user_version=999"));
            db.close();
        }
        QSqlDatabase::removeDatabase("raw");
        auto s = Store::open(p);
        QVERIFY(!s.has_value());
        QVERIFY(s.error().message.contains(QLatin1String("newer")));
    }

    void keysAreHashedAndRevocable() {
        auto s = *Store::open(path());
        auto account = s->createAccount(QStringLiteral("a"), 1'000'000);
        QVERIFY(account.has_value());
        auto key = s->createKey(account->id, QStringLiteral("k"));
        QVERIFY(key.has_value());
        const QString secret = key->second;
        QVERIFY(s->authenticate(secret).has_value());
        QVERIFY(!s->authenticate(secret + QLatin1Char('x')).has_value());
        QVERIFY(!s->authenticate(QString()).has_value());
        QFile f(path());
        QVERIFY(f.open(QIODevice::ReadOnly));
        QFile wal(path() + QStringLiteral("-wal"));
        wal.open(QIODevice::ReadOnly);
        const QByteArray bytes = f.readAll() + wal.readAll();
        QVERIFY(!bytes.contains(secret.toUtf8()));
        QVERIFY(s->revokeKey(key->first.id).has_value());
        QVERIFY(!s->authenticate(secret).has_value());
        QCOMPARE(s->revokeKey(QStringLiteral("key_nope")).error().kind,
                 EngineError::Kind::NotFound);
    }

    void meteringIsExactAndStopsAtZero() {
        auto s = *Store::open(path());
        auto account = *s->createAccount(QStringLiteral("m"), 100'000); // 0.10
        const qint64 t0 = 1'000'000'000'000;
        // 3.6 per hour = 1000 micros a second.
        QVERIFY(s->insertSandbox(
                     box(account.id, QStringLiteral("sbx_aaaaaaaaaaaaaaaaaaaa"), t0, 3'600'000))
                    .has_value());
        for (int i = 1; i <= 30; ++i)
            QVERIFY(s->meter(t0 + i * 1000 + 333).has_value()); // odd steps: no drift
        QCOMPARE(s->sandbox(QStringLiteral("sbx_aaaaaaaaaaaaaaaaaaaa"))->costMicros, 30'333);
        QCOMPARE(s->account(account.id)->balanceMicros, 100'000 - 30'333);
        auto out = s->meter(t0 + 1000 * 1000);
        QVERIFY(out.has_value());
        QCOMPARE(out->size(), 1);
        QCOMPARE(out->first().balanceMicros, 0);
        QCOMPARE(s->account(account.id)->balanceMicros, 0);
        QCOMPARE(s->sandbox(QStringLiteral("sbx_aaaaaaaaaaaaaaaaaaaa"))->costMicros, 100'000);
        qint64 usage = 0;
        for (const LedgerEntry &e : s->ledger(account.id, 100))
            usage += e.kind == QLatin1String("usage") ? e.amountMicros : 0;
        QCOMPARE(usage, -100'000);
        // Nothing is billed past the expiry (the app may have been down).
        auto rich = *s->createAccount(QStringLiteral("r"), 10'000'000);
        SandboxRecord shortLived =
            box(rich.id, QStringLiteral("sbx_cccccccccccccccccccc"), t0, 3'600'000);
        shortLived.expiresAt = t0 + 10'000;
        QVERIFY(s->insertSandbox(shortLived).has_value());
        QVERIFY(s->meter(t0 + 3600 * 1000).has_value());
        QCOMPARE(s->sandbox(shortLived.id)->costMicros, 10'000);
        QCOMPARE(s->account(rich.id)->balanceMicros, 10'000'000 - 10'000);
        QVERIFY(s->setEnded(QStringLiteral("sbx_aaaaaaaaaaaaaaaaaaaa"), SandboxStatus::Expired,
                            QStringLiteral("t"), t0 + 2000 * 1000)
                    .has_value());
        QCOMPARE(s->liveCount(account.id), 0);
    }

    void idempotencyAndExecRecords() {
        auto s = *Store::open(path());
        auto account = *s->createAccount(QStringLiteral("i"), 1);
        const qint64 now = nowMs();
        QVERIFY(
            s->insertSandbox(box(account.id, QStringLiteral("sbx_bbbbbbbbbbbbbbbbbbbb"), now, 0),
                             QStringLiteral("key-1"), QStringLiteral("hash"))
                .has_value());
        auto seen = s->idempotent(account.id, QStringLiteral("key-1"), now);
        QVERIFY(seen.has_value());
        QCOMPARE(seen->first, QStringLiteral("sbx_bbbbbbbbbbbbbbbbbbbb"));
        QVERIFY(!s->idempotent(account.id, QStringLiteral("key-1"), now + 25 * 3600 * 1000ll));
        QVERIFY(!s->idempotent(QStringLiteral("acct_other"), QStringLiteral("key-1"), now));

        ExecRecord e;
        e.sandboxId = QStringLiteral("sbx_bbbbbbbbbbbbbbbbbbbb");
        e.command = QStringLiteral("echo hi");
        e.cwd = QStringLiteral("/home/sandbox");
        e.envNames = {QStringLiteral("A"), QStringLiteral("B")};
        e.startedAt = now;
        auto id = s->beginExec(e);
        QVERIFY(id.has_value());
        auto second = s->beginExec(e);
        e.id = *id;
        e.status = QStringLiteral("finished");
        e.stdoutPreview = QStringLiteral("hi\n");
        QVERIFY(s->finishExec(e).has_value());
        QCOMPARE(*s->interruptExecs({}, QStringLiteral("stopped")), 1);
        auto rows = s->execs(e.sandboxId, 10);
        QCOMPARE(rows.size(), 2);
        QCOMPARE(rows[0].id, *second);
        QCOMPARE(rows[0].status, QStringLiteral("interrupted"));
        QCOMPARE(rows[1].status, QStringLiteral("finished"));
        QCOMPARE(rows[1].envNames, QStringList({"A", "B"}));

        // A 1 MiB command keeps 4 KiB in the record, with its length and hash;
        // the cut never splits a character.
        ExecRecord big = e;
        big.command = QStringLiteral("echo ") + QString(4090, QLatin1Char('x')) +
                      QString(300000, QChar(0x00e9)); // 'é': two bytes each
        const QByteArray whole = big.command.toUtf8();
        auto bigId = s->beginExec(big);
        QVERIFY(bigId.has_value());
        const ExecRecord kept = s->execs(e.sandboxId, 1).value(0);
        QCOMPARE(kept.id, *bigId);
        QVERIFY(kept.command.toUtf8().size() <= kStoredCommandBytes);
        QVERIFY(kept.command.toUtf8().size() >= kStoredCommandBytes - 1);
        QVERIFY(whole.startsWith(kept.command.toUtf8()));
        QCOMPARE(kept.commandBytes, qint64(whole.size()));
        QCOMPARE(kept.commandSha256,
                 QString::fromLatin1(
                     QCryptographicHash::hash(whole, QCryptographicHash::Sha256).toHex()));
        QCOMPARE(rows[1].commandBytes, qint64(7));
    }

    void retentionKeepsTheLedger() {
        auto s = *Store::open(dir.path() + QStringLiteral("/retention.db"));
        auto account = *s->createAccount(QStringLiteral("r"), 10'000'000);
        const qint64 day = 24 * 3600 * 1000ll;
        const qint64 now = nowMs();
        const QString old = QStringLiteral("sbx_oooooooooooooooooooo");
        const QString recent = QStringLiteral("sbx_nnnnnnnnnnnnnnnnnnnn");
        const QString live = QStringLiteral("sbx_llllllllllllllllllll");
        QVERIFY(s->insertSandbox(box(account.id, old, now - 40 * day, 3'600'000),
                                 QStringLiteral("old-key"), QStringLiteral("h"))
                    .has_value());
        QVERIFY(s->insertSandbox(box(account.id, recent, now - 2 * day, 3'600'000)).has_value());
        QVERIFY(s->insertSandbox(box(account.id, live, now - 40 * day, 0)).has_value());
        for (const QString &id : {old, recent, live}) {
            ExecRecord e;
            e.sandboxId = id;
            e.command = QStringLiteral("true");
            e.startedAt = now - 40 * day;
            QVERIFY(s->beginExec(e).has_value());
        }
        QVERIFY(s->meter(now - 39 * day).has_value());
        QVERIFY(s->setEnded(old, SandboxStatus::Destroyed, QStringLiteral("t"), now - 39 * day)
                    .has_value());
        QVERIFY(s->meter(now - day).has_value());
        QVERIFY(s->setEnded(recent, SandboxStatus::Destroyed, QStringLiteral("t"), now - day)
                    .has_value());
        const qint64 balance = s->account(account.id)->balanceMicros;
        const QList<LedgerEntry> ledger = s->ledger(account.id, 100000);
        QVERIFY(balance < 10'000'000);

        auto pruned = s->prune(now - 30 * day, now);
        QVERIFY(pruned.has_value());
        QCOMPARE(pruned->execs, 1);
        QVERIFY(pruned->events >= 1); // "created", "ended", ...
        QCOMPARE(pruned->idempotencyKeys, 1);
        QCOMPARE(s->execs(old, 10).size(), 0);
        QCOMPARE(s->execs(recent, 10).size(), 1);
        QCOMPARE(s->execs(live, 10).size(), 1); // still running: kept whatever its age
        QVERIFY(s->sandbox(old).has_value());   // the row itself stays, with its cost
        QCOMPARE(s->account(account.id)->balanceMicros, balance);
        QCOMPARE(s->ledger(account.id, 100000).size(), ledger.size());
        // A second pass finds nothing more.
        QCOMPARE(s->prune(now - 30 * day, now)->execs, 0);
    }

    void aSandboxFoundDeadIsNotBilledForItsDowntime() {
        const QString file = dir.path() + QStringLiteral("/dead.db");
        auto s = *Store::open(file);
        auto account = *s->createAccount(QStringLiteral("d"), 100'000'000);
        const qint64 t0 = 1'000'000'000'000;
        const QString dead = QStringLiteral("sbx_dddddddddddddddddddd");
        const QString other = QStringLiteral("sbx_eeeeeeeeeeeeeeeeeeee");
        SandboxRecord a = box(account.id, dead, t0, 3'600'000); // 1000 micros a second
        SandboxRecord b = box(account.id, other, t0, 3'600'000);
        a.expiresAt = b.expiresAt = t0 + 24 * 3600 * 1000ll;
        QVERIFY(s->insertSandbox(a).has_value());
        QVERIFY(s->insertSandbox(b).has_value());
        QVERIFY(s->meter(t0 + 60'000).has_value()); // last seen running at one minute
        // The app was down for 30 minutes; at start the VM is found gone.
        const qint64 back = t0 + 31 * 60'000;
        QVERIFY(
            s->setStopping(dead, SandboxStatus::Error, QStringLiteral("gone"), false).has_value());
        // Another stop finishes first, and the tick meters everything.
        QVERIFY(
            s->setStopping(other, SandboxStatus::Destroyed, QStringLiteral("asked")).has_value());
        QVERIFY(s->setEnded(other, SandboxStatus::Destroyed, QStringLiteral("asked"), back)
                    .has_value());
        QVERIFY(s->meter(back + 1000).has_value());
        QVERIFY(s->setEnded(dead, SandboxStatus::Error, QStringLiteral("gone"), back + 2000)
                    .has_value());
        QCOMPARE(s->sandbox(dead)->costMicros, 60'000);       // what was seen running
        QCOMPARE(s->sandbox(other)->costMicros, 31 * 60'000); // billed to its end
        QCOMPARE(s->account(account.id)->balanceMicros, 100'000'000 - 32 * 60'000);
    }

    void recordUpdatesAreWholeOrNothing() {
        const QString file = dir.path() + QStringLiteral("/atomic.db");
        auto s = *Store::open(file);
        auto account = *s->createAccount(QStringLiteral("a"), 100'000'000);
        const qint64 t0 = nowMs();
        const QString id = QStringLiteral("sbx_ffffffffffffffffffff");
        QVERIFY(s->insertSandbox(box(account.id, id, t0, 3'600'000)).has_value());
        QVERIFY(s->setRunning(id, 5).has_value());
        // Not creating any more: the second call says so instead of "done".
        auto again = s->setRunning(id, 5);
        QVERIFY(!again.has_value());
        QCOMPARE(again.error().kind, EngineError::Kind::Conflict);
        QVERIFY(s->setStopping(id, SandboxStatus::Destroyed, QStringLiteral("t")).has_value());

        // The event of an end cannot be written: the end is not either.
        QVERIFY(rawSql(file, QStringLiteral("CREATE TRIGGER no_events BEFORE INSERT ON events"
                                            " BEGIN SELECT RAISE(ABORT, 'no events'); END")));
        const qint64 balance = s->account(account.id)->balanceMicros;
        auto ended = s->setEnded(id, SandboxStatus::Destroyed, QStringLiteral("t"), t0 + 60'000);
        QVERIFY(!ended.has_value());
        QCOMPARE(s->sandbox(id)->status, SandboxStatus::Stopping);
        QCOMPARE(s->sandbox(id)->costMicros, 0);
        QCOMPARE(s->account(account.id)->balanceMicros, balance);
        QVERIFY(!s->addEvent(id, QStringLiteral("x")).has_value());
        QVERIFY(rawSql(file, QStringLiteral("DROP TRIGGER no_events")));
        QVERIFY(s->setEnded(id, SandboxStatus::Destroyed, QStringLiteral("t"), t0 + 60'000)
                    .has_value());
        QCOMPARE(s->sandbox(id)->costMicros, 60'000);

        // An account whose first credit cannot be booked is not made.
        QVERIFY(rawSql(file, QStringLiteral("CREATE TRIGGER no_ledger BEFORE INSERT ON ledger"
                                            " BEGIN SELECT RAISE(ABORT, 'no ledger'); END")));
        const qsizetype accounts = s->accounts().size();
        QVERIFY(!s->createAccount(QStringLiteral("half"), 1'000'000).has_value());
        QCOMPARE(s->accounts().size(), accounts);
    }

    void theFirstAccountComesWithItsKey() {
        const QString file = dir.path() + QStringLiteral("/first.db");
        auto s = *Store::open(file);
        QVERIFY(rawSql(file, QStringLiteral("CREATE TRIGGER no_keys BEFORE INSERT ON api_keys"
                                            " BEGIN SELECT RAISE(ABORT, 'no keys'); END")));
        QVERIFY(!s->ensureFirstAccount(QStringLiteral("default"), 10'000'000).has_value());
        QCOMPARE(s->accounts().size(), 0); // no account without its key
        QVERIFY(rawSql(file, QStringLiteral("DROP TRIGGER no_keys")));
        auto first = s->ensureFirstAccount(QStringLiteral("default"), 10'000'000);
        QVERIFY(first.has_value() && first->has_value());
        QVERIFY(s->authenticate((*first)->second).has_value());
        QCOMPARE(s->account((*first)->first.accountId)->balanceMicros, 10'000'000);
        // A second start makes nothing.
        auto second = s->ensureFirstAccount(QStringLiteral("default"), 10'000'000);
        QVERIFY(second.has_value() && !second->has_value());
        QCOMPARE(s->accounts().size(), 1);
        // A record that cannot be read is an error, not "no accounts".
        QVERIFY(rawSql(file, QStringLiteral("ALTER TABLE accounts RENAME TO hidden")));
        QVERIFY(!s->ensureFirstAccount(QStringLiteral("default"), 1).has_value());
        QVERIFY(rawSql(file, QStringLiteral("ALTER TABLE hidden RENAME TO accounts")));
    }

    void aFailedReadIsNotAnEmptyRecord() {
        const QString file = dir.path() + QStringLiteral("/unreadable.db");
        auto s = *Store::open(file);
        auto account = *s->createAccount(QStringLiteral("u"), 1'000'000);
        QVERIFY(s->insertSandbox(
                     box(account.id, QStringLiteral("sbx_gggggggggggggggggggg"), nowMs(), 0))
                    .has_value());
        QCOMPARE(s->liveSandboxes()->size(), 1);
        QCOMPARE(*s->liveCount({}), 1);
        // The reconciler destroys VMs the record does not know: a read that
        // fails must not look like "none".
        QVERIFY(rawSql(file, QStringLiteral("ALTER TABLE sandboxes RENAME TO hidden")));
        QVERIFY(!s->liveSandboxes().has_value());
        QVERIFY(!s->liveCount({}).has_value());
        QVERIFY(rawSql(file, QStringLiteral("ALTER TABLE hidden RENAME TO sandboxes")));
    }

    void aFullDiskIsToldBySQLitesCode() {
        const QString file = dir.path() + QStringLiteral("/full.db");
        auto s = *Store::open(file);
        // An error that merely says "full" is not a full disk.
        QVERIFY(rawSql(file, QStringLiteral("CREATE TRIGGER wordy BEFORE INSERT ON accounts"
                                            " BEGIN SELECT RAISE(ABORT, 'the table is full of"
                                            " surprises'); END")));
        auto wordy = s->createAccount(QStringLiteral("w"), 0);
        QVERIFY(!wordy.has_value());
        QCOMPARE(wordy.error().kind, EngineError::Kind::Internal);
        QVERIFY(rawSql(file, QStringLiteral("DROP TRIGGER wordy")));
        // A real one: a small tmpfs, in a mount namespace of this process.
        if (geteuid() != 0)
            QSKIP("a tmpfs of our own needs root (CI runs as root)");
        QTemporaryDir small;
        QVERIFY(unshare(CLONE_NEWNS) == 0);
        QVERIFY(mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0);
        QVERIFY(mount("tmpfs", small.path().toLocal8Bit().constData(), "tmpfs", 0, "size=1m") == 0);
        auto tight = *Store::open(small.path() + QStringLiteral("/t.db"));
        auto acct = *tight->createAccount(QStringLiteral("t"), 0);
        {
            QFile filler(small.path() + QStringLiteral("/filler"));
            QVERIFY(filler.open(QIODevice::WriteOnly));
            const QByteArray block(4096, 'x');
            while (filler.write(block) == block.size() && filler.flush()) {
            }
        }
        Result<qint64> last = 0;
        for (int i = 0; i < 2000 && last; ++i)
            last = tight->addCredit(acct.id, 1, QString(1000, QLatin1Char('n')));
        QVERIFY(!last.has_value());
        QCOMPARE(last.error().kind, EngineError::Kind::NoSpace);
        QVERIFY(last.error().message.contains(QLatin1String("full")));
        tight.reset();
        QVERIFY(umount2(small.path().toLocal8Bit().constData(), MNT_DETACH) == 0);
    }

    void settingsRefuseBadValues() {
        Settings s;
        QVERIFY(s.set(QStringLiteral("max_live_sandboxes"), QStringLiteral("5")).has_value());
        QCOMPARE(s.maxLiveSandboxes, 5);
        QVERIFY(!s.set(QStringLiteral("max_live_sandboxes"), QStringLiteral("0")));
        QVERIFY(!s.set(QStringLiteral("port"), QStringLiteral("70000")));
        QVERIFY(!s.set(QStringLiteral("default_size"), QStringLiteral("xl")));
        QVERIFY(!s.set(QStringLiteral("rate.huge"), QStringLiteral("1")));
        QVERIFY(!s.set(QStringLiteral("rate.small"), QStringLiteral("-1")));
        QVERIFY(!s.set(QStringLiteral("allowed_origins"), QStringLiteral("javascript:alert(1)")));
        QVERIFY(!s.set(QStringLiteral("nonsense"), QStringLiteral("1")));
        QCOMPARE(s.maxLiveSandboxes, 5);
        QCOMPARE(*parseMoney(QStringLiteral("0.05")), 50'000);
        QCOMPARE(*parseMoney(QStringLiteral("12")), 12'000'000);
        QVERIFY(!parseMoney(QStringLiteral("0.0000001")));
        QCOMPARE(formatMoney(50'000), QStringLiteral("0.05"));
        QCOMPARE(formatMoney(12'000'000), QStringLiteral("12.00"));
    }

    void libvirtUriRunsNoProgram() {
        Settings s;
        for (const char *ok :
             {"", "qemu:///system", "qemu:///session", "qemu:///embed?root=/var/lib/x",
              "qemu+ssh://user@host/system", "qemu+tls://host/system"}) {
            auto r = s.set(QStringLiteral("libvirt_uri"), QString::fromLatin1(ok));
            QVERIFY2(r.has_value(), ok);
            QCOMPARE(s.libvirtUri, QString::fromLatin1(ok));
        }
        // Transports that run a program, or reach another socket, as root.
        for (const char *bad :
             {"qemu+ext:///system?command=/tmp/evil", "qemu+ssh://h/system?command=/x",
              "qemu+unix:///system?socket=/tmp/s", "qemu://host/system", "xen:///system",
              "test:///default", "not a uri"}) {
            auto r = s.set(QStringLiteral("libvirt_uri"), QString::fromLatin1(bad));
            QVERIFY2(!r.has_value(), bad);
        }
        QCOMPARE(s.libvirtUri, QStringLiteral("qemu+tls://host/system"));
    }

    void userNamespacesAreOffByDefault() {
        Settings s;
        QCOMPARE(s.value(QStringLiteral("sandbox_user_namespaces")), QStringLiteral("off"));
        QVERIFY(s.set(QStringLiteral("sandbox_user_namespaces"), QStringLiteral("on")).has_value());
        QVERIFY(s.sandboxUserNamespaces);
        QVERIFY(!s.set(QStringLiteral("sandbox_user_namespaces"), QStringLiteral("yes")));
        QVERIFY(s.sandboxUserNamespaces);
    }
};

QTEST_GUILESS_MAIN(TestStore)
#include "tst_store.moc"
