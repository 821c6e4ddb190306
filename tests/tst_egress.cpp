// The host filter's ruleset and the resolver list are pure functions: check
// what nft will read (and let nft itself check the syntax, without loading
// it), and what is taken from a resolv.conf. And the engine refuses a data
// dir that passt's and QEMU's users cannot reach, naming the culprit.
#include "network/egress.h"
#include "sandbox/engine.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <unistd.h>

using namespace sandcastle;

class TestEgress : public QObject {
    Q_OBJECT
private slots:
    void rulesetNamesTheUserAndEveryRange() {
        const QString rules = egress::hostRuleset(995, {QStringLiteral("192.168.1.1")});
        QVERIFY(rules.contains(QStringLiteral("meta skuid 995 jump sandbox")));
        QVERIFY(rules.contains(QStringLiteral("add element inet sandcastle dns4 { 192.168.1.1 }")));
        QVERIFY(rules.contains(QStringLiteral("fib daddr type local")));
        for (const QString &range : egress::blockedRanges4() + egress::blockedRanges6())
            QVERIFY2(rules.contains(range), qPrintable(range));
        QVERIFY(rules.contains(QStringLiteral("tcp dport { 25, 465, 587 }")));
        QVERIFY(egress::blockedRanges4().contains(QStringLiteral("169.254.0.0/16")));
        // DNS is let through before anything is refused.
        QVERIFY(rules.indexOf(QStringLiteral("@dns4 udp dport 53")) <
                rules.indexOf(QStringLiteral("fib daddr")));
        QVERIFY(!egress::hostRuleset(995, {}).contains(QStringLiteral("add element")));
    }

    void nftAcceptsTheRuleset() {
        if (geteuid() != 0)
            QSKIP("nft --check needs root");
        QProcess nft;
        nft.start(QStringLiteral("nft"),
                  {QStringLiteral("--check"), QStringLiteral("-f"), QStringLiteral("-")});
        QVERIFY(nft.waitForStarted());
        nft.write(egress::hostRuleset(995, {QStringLiteral("10.0.0.53")}).toUtf8());
        nft.closeWriteChannel();
        QVERIFY(nft.waitForFinished());
        QCOMPARE(nft.readAllStandardError(), QByteArray());
        QCOMPARE(nft.exitCode(), 0);
    }

    void resolversComeFromResolvConf() {
        QTemporaryDir dir;
        QFile f(dir.filePath(QStringLiteral("resolv.conf")));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("# comment\nsearch example.org\nnameserver 127.0.0.53\n"
                "nameserver 192.168.1.1\n  nameserver\t9.9.9.9 \nnameserver ::1\n"
                "nameserver 2001:db8::1\nnameserver 1.2.3.4; rm -rf /\nnameserver not-an-ip\n");
        f.close();
        // Loopback (a stub resolver), IPv6 and anything malformed are left out.
        QCOMPARE(egress::nameServers(f.fileName()),
                 QStringList({QStringLiteral("192.168.1.1"), QStringLiteral("9.9.9.9")}));
        QCOMPARE(egress::nameServers(dir.filePath(QStringLiteral("missing"))), QStringList());
    }

    void anUnreachableDataDirIsNamed() {
        if (geteuid() != 0)
            QSKIP("QEMU and passt run as other users only when Sandcastle is root");
        QTemporaryDir dir; // mode 0700: nobody else may enter
        EngineConfig config = EngineConfig::defaults();
        config.dataDir = dir.filePath(QStringLiteral("inner/data"));
        Engine engine(config);
        auto opened = engine.open();
        QVERIFY(!opened);
        QVERIFY2(opened.error().message.contains(dir.path() + QStringLiteral(", which other")),
                 qPrintable(opened.error().message));
        // And a create says the same, at once.
        auto created = engine.create({}).result();
        QVERIFY(!created);
        QCOMPARE(created.error().message, opened.error().message);
    }
};

QTEST_GUILESS_MAIN(TestEgress)
#include "tst_egress.moc"
