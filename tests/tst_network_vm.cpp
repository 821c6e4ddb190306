// The egress policy, through the real API and real VMs, against a test
// host in a network namespace (tests/support/testhost.sh): what must work
// from a sandbox does (DNS, HTTP, git clone, pip install), and every way
// out that must not work fails: the host's API through every address the
// guest can name, private, carrier-NAT and link-local ranges (the metadata
// address), SMTP ports. Each blocked destination is first shown reachable
// from the host itself, so a failure in the guest is the policy's doing.
// Each layer is also tried alone: the host filter as passt's user, the
// guest's rules with the host filter taken away. The host filter is
// tampered with under a running service (an accept rule, a DNS set
// element), and made impossible to load at start (an `nft` that fails):
// then no passt runs, a sandbox's from the last run included.
#include "support/service.h"

#include <QStandardPaths>
#include <QTemporaryDir>

using namespace testing;

namespace {

const QString kTestHost = QStringLiteral("198.51.100.2");
const QStringList kPrivate = {QStringLiteral("10.99.0.2"), QStringLiteral("172.31.99.2"),
                              QStringLiteral("192.168.99.2"), QStringLiteral("100.100.99.2"),
                              QStringLiteral("169.254.169.254")};

/// Runs a host command (`input` on its stdin); returns its exit code
/// (stdout into `out`), -1 when it crashed or did not end in a minute.
int host(const QString &program, const QStringList &args, QString *out = nullptr,
         const QByteArray &input = {}) {
    QProcess p;
    p.setProcessChannelMode(QProcess::ForwardedErrorChannel);
    p.start(program, args);
    p.write(input);
    p.closeWriteChannel();
    if (!p.waitForFinished(60000)) {
        p.kill();
        p.waitForFinished();
        return -1;
    }
    if (out)
        *out = QString::fromUtf8(p.readAllStandardOutput());
    return p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
}

/// Runs a host command as passt's user when `asNetUser`, so that the host
/// filter applies to it; returns its exit code (stdout into `out`).
int hostAs(bool asNetUser, const QString &program, const QStringList &args,
           QString *out = nullptr) {
    if (!asNetUser)
        return host(program, args, out);
    return host(QStringLiteral("setpriv"),
                QStringList{QStringLiteral("--reuid"), QStringLiteral("sandcastle-net"),
                            QStringLiteral("--regid"), QStringLiteral("sandcastle-net"),
                            QStringLiteral("--clear-groups"), program} +
                    args,
                out);
}

/// The HTTP status curl got from `url` on the host ("000": no connection).
QString hostCurl(const QString &url, bool asNetUser = false) {
    QString out;
    hostAs(asNetUser, QStringLiteral("curl"),
           {QStringLiteral("-s"), QStringLiteral("-o"), QStringLiteral("/dev/null"),
            QStringLiteral("-w"), QStringLiteral("%{http_code}"), QStringLiteral("--max-time"),
            QStringLiteral("3"), url},
           &out);
    return out;
}

/// Whether a TCP connection to address:port opens, from the host.
bool hostConnects(const QString &address, int port, bool asNetUser = false) {
    const QString script = QStringLiteral("exec 3<>/dev/tcp/%1/%2").arg(address).arg(port);
    return hostAs(asNetUser, QStringLiteral("timeout"),
                  {QStringLiteral("3"), QStringLiteral("bash"), QStringLiteral("-c"), script}) == 0;
}

/// `nft VERB table inet sandcastle` (list, delete, flush): the host filter.
int hostFilter(const QString &verb, QString *out = nullptr) {
    return host(
        QStringLiteral("nft"),
        {verb, QStringLiteral("table"), QStringLiteral("inet"), QStringLiteral("sandcastle")}, out);
}

bool hostFilterLoaded() {
    return hostFilter(QStringLiteral("list")) == 0;
}

} // namespace

class TestNetworkVm : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir{QStringLiteral("/tmp/sc-net-XXXXXX")};
    const QString ns = QStringLiteral("sct%1").arg(QCoreApplication::applicationPid() % 100000);
    std::unique_ptr<Service> service;
    std::unique_ptr<Http> http;
    QString online;  // network "internet"
    QString offline; // network "none"
    int apiPort = 0;

    Reply exec(const QString &id, const QString &command, int timeoutMs = 120000) {
        return http->call("POST", QStringLiteral("/sandboxes/%1/exec").arg(id),
                          QJsonObject{{"command", command}, {"timeout_ms", timeoutMs}});
    }
    QString out(const Reply &r) { return r.json.value("stdout").toString(); }
    int code(const Reply &r) { return r.json.value("exit_code").toInt(-1); }

    /// The HTTP status the guest's curl got ("000": no connection). A
    /// failed exec is neither, so no check can pass by accident.
    QString guestCurl(const QString &id, const QString &url) {
        Reply r = exec(id, QStringLiteral("curl -s -o /dev/null -w '%{http_code}' "
                                          "--connect-timeout 3 --max-time 5 %1")
                               .arg(url));
        return r.status == 200 ? out(r) : QStringLiteral("exec failed: %1").arg(r.status);
    }
    /// "open" or "closed": whether a TCP connection from the guest opens.
    QString guestConnect(const QString &id, const QString &address, int port) {
        Reply r = exec(
            id,
            QStringLiteral("timeout 5 bash -c 'exec 3<>/dev/tcp/%1/%2'").arg(address).arg(port));
        if (r.status != 200)
            return QStringLiteral("exec failed: %1").arg(r.status);
        return code(r) == 0 ? QStringLiteral("open") : QStringLiteral("closed");
    }
    /// Whether a DNS server at `address` answers a UDP query for the test
    /// host's name: from the guest (`id`) or, with no id, from the host.
    bool dnsAnswers(const QString &address, const QString &id = {}) {
        const QString script =
            QStringLiteral(
                "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                "s.settimeout(3); s.sendto(bytes.fromhex('123401000001000000000000036769740a"
                "73616e64636173746c65047465737400 00010001'.replace(' ', '')), ('%1', 53)); "
                "print(bytes([198, 51, 100, 2]) in s.recv(512))")
                .arg(address);
        if (id.isEmpty()) {
            QString text;
            host(QStringLiteral("python3"), {QStringLiteral("-c"), script}, &text);
            return text.trimmed() == QLatin1String("True");
        }
        return out(exec(id, QStringLiteral("python3 -c \"%1\" 2>/dev/null").arg(script)))
                   .trimmed() == QLatin1String("True");
    }
    /// How many passt processes serve sandbox `id` (QEMU's command line
    /// names the same socket).
    int passtsFor(const QString &id) {
        QString pids;
        host(QStringLiteral("pgrep"),
             {QStringLiteral("-f"), dir.path() + "/sandboxes/" + id + "/net/passt.sock"}, &pids);
        int passts = 0;
        for (const QString &pid : pids.split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
            QFile comm(QStringLiteral("/proc/%1/comm").arg(pid));
            // Debian's passt runs as passt.avx2 where the CPU has AVX2.
            passts += comm.open(QIODevice::ReadOnly) && comm.readAll().startsWith("passt");
        }
        return passts;
    }
    /// How many times the service's log says `text`.
    int logged(const QString &text) { return int(service->log().count(text)); }

    /// Every IPv4 address of the host but loopback.
    QStringList hostAddresses() {
        QString text;
        host(QStringLiteral("ip"),
             {QStringLiteral("-4"), QStringLiteral("-o"), QStringLiteral("addr"),
              QStringLiteral("show")},
             &text);
        QStringList out;
        static const QRegularExpression re(QStringLiteral("inet (\\d+\\.\\d+\\.\\d+\\.\\d+)/"));
        for (auto it = re.globalMatch(text); it.hasNext();) {
            const QString a = it.next().captured(1);
            if (!a.startsWith(QLatin1String("127.")))
                out << a;
        }
        return out;
    }

private slots:
    void initTestCase() {
        QVERIFY(dir.isValid());
        QCOMPARE(
            host(QStringLiteral("bash"), {QStringLiteral(SOURCE_DIR "/tests/support/testhost.sh"),
                                          QStringLiteral("up"), ns, dir.path() + "/host"}),
            0);
        // The sandboxes' resolver is the test host's; the API listens on
        // every host address, so only the policy keeps the guest from it.
        int rc = -1;
        admin(dir.path(),
              {QStringLiteral("config"), QStringLiteral("set"), QStringLiteral("sandbox_dns"),
               kTestHost},
              &rc);
        QCOMPARE(rc, 0);
        // The reconciler would load the host filter again within seconds of
        // guestRulesAloneBlock removing it; hostFilterComesBack turns it on.
        admin(dir.path(),
              {QStringLiteral("config"), QStringLiteral("set"),
               QStringLiteral("reconcile_interval_ms"), QStringLiteral("600000")},
              &rc);
        QCOMPARE(rc, 0);
        service = std::make_unique<Service>(dir.path());
        apiPort = freePort();
        service->setPort(apiPort);
        service->setListen(QStringLiteral("0.0.0.0"));
        QVERIFY(service->start());
        http = std::make_unique<Http>(service->base(), service->key());
        Reply a = http->call("POST", QStringLiteral("/sandboxes"), QByteArray("{}"));
        Reply b =
            http->call("POST", QStringLiteral("/sandboxes"), QByteArray(R"({"network":"none"})"));
        QCOMPARE(a.status, 201);
        QCOMPARE(b.status, 201);
        QCOMPARE(a.json.value("network").toString(), QStringLiteral("internet"));
        QCOMPARE(b.json.value("network").toString(), QStringLiteral("none"));
        online = a.json.value("id").toString();
        offline = b.json.value("id").toString();
        // The offline sandbox is the busy neighbour: it counts while the
        // other one attacks (checked at the end).
        QCOMPARE(code(exec(offline, QStringLiteral("nohup sh -c 'while :; do date +%s >> "
                                                   "/workspace/ticks; sleep 0.5; done' "
                                                   ">/dev/null 2>&1 &"))),
                 0);
    }

    void dnsAndHttpWork() {
        Reply r = exec(online, QStringLiteral("getent hosts git.sandcastle.test && "
                                              "curl -sS http://git.sandcastle.test/hello.txt"));
        QCOMPARE(code(r), 0);
        QCOMPARE(out(r), QStringLiteral("198.51.100.2    git.sandcastle.test\n"
                                        "hello from the test host\n"));
    }

    void httpsWorks() {
        // The test host's certificate is self-signed: the guest is told to
        // trust it, as a company CA would be.
        QFile cert(dir.path() + "/host/cert.pem");
        QVERIFY(cert.open(QIODevice::ReadOnly));
        QCOMPARE(
            http->call("PUT",
                       QStringLiteral("/sandboxes/%1/files?path=/workspace/ca.pem").arg(online),
                       cert.readAll())
                .status,
            200);
        Reply r = exec(online, QStringLiteral("curl -sS --cacert /workspace/ca.pem "
                                              "https://web.sandcastle.test/hello.txt"));
        QCOMPARE(code(r), 0);
        QCOMPARE(out(r), QStringLiteral("hello from the test host\n"));
        // And a certificate it was not told to trust is refused.
        QCOMPARE(
            code(exec(online, QStringLiteral("curl -sS https://web.sandcastle.test/hello.txt"))),
            60);
    }

    void gitCloneWorks() {
        Reply r = exec(online, QStringLiteral("cd /workspace && git clone -q "
                                              "http://git.sandcastle.test/repo.git && "
                                              "git -c http.sslCAInfo=/workspace/ca.pem clone -q "
                                              "https://git.sandcastle.test/repo.git repo2 && "
                                              "python3 repo/main.py && python3 repo2/main.py"));
        QCOMPARE(code(r), 0);
        QCOMPARE(out(r), QStringLiteral("cloned\ncloned\n"));
    }

    void pipAndNpmInstallWork() {
        Reply r = exec(online,
                       QStringLiteral("pip install -q --user --break-system-packages "
                                      "--index-url http://pypi.sandcastle.test/simple/ "
                                      "--trusted-host pypi.sandcastle.test sc-hello && "
                                      "python3 -c 'import sc_hello; print(sc_hello.GREETING)'"),
                       300000);
        QCOMPARE(code(r), 0);
        QCOMPARE(out(r), QStringLiteral("hello from the package index\n"));
        r = exec(online,
                 QStringLiteral("mkdir -p /workspace/app && cd /workspace/app && "
                                "echo '{}' > package.json && "
                                "npm install --no-audit --no-fund --no-update-notifier "
                                "--loglevel=error "
                                "http://npm.sandcastle.test/sc-hello-npm-1.0.0.tgz && "
                                "node -e 'console.log(require(\"sc-hello-npm\"))'"),
                 300000);
        QCOMPARE(code(r), 0);
        QVERIFY2(out(r).endsWith(QStringLiteral("hello from the npm tarball\n")),
                 qPrintable(out(r) + r.json.value("stderr").toString()));
    }

    void hostApiIsUnreachable() {
        // 10.0.2.2 is the guest's gateway: passt would map it to the
        // host's loopback without --no-map-gw.
        QStringList addresses = hostAddresses();
        QVERIFY(addresses.contains(QStringLiteral("198.51.100.1")));
        for (const QString &a : addresses)
            QVERIFY2(hostCurl(QStringLiteral("http://%1:%2/v1/sizes").arg(a).arg(apiPort)) != "000",
                     qPrintable(a + " does not answer from the host"));
        addresses << QStringLiteral("10.0.2.2") << QStringLiteral("10.0.2.3")
                  << QStringLiteral("127.0.0.1");
        for (const QString &a : addresses)
            QVERIFY2(
                guestCurl(online, QStringLiteral("http://%1:%2/v1/sizes").arg(a).arg(apiPort)) ==
                    "000",
                qPrintable(a + " reached the API from the guest"));
    }

    void privateRangesAndMetadataAreBlocked() {
        for (const QString &a : kPrivate) {
            const QString url = QStringLiteral("http://%1/hello.txt").arg(a);
            QCOMPARE(hostCurl(url), QStringLiteral("200"));
            QVERIFY2(guestCurl(online, url) == "000", qPrintable(a));
        }
        // DNS is let through to the sandboxes' resolver only: a DNS server
        // on a private address answers the host, not the guest.
        QVERIFY(dnsAnswers(QStringLiteral("10.99.0.2")));
        QVERIFY(!dnsAnswers(QStringLiteral("10.99.0.2"), online));
        QCOMPARE(guestConnect(online, QStringLiteral("10.99.0.2"), 53), QStringLiteral("closed"));
        QVERIFY(dnsAnswers(kTestHost, online));
        // The same server at its public-looking address answers.
        QCOMPARE(guestCurl(online, QStringLiteral("http://%1/hello.txt").arg(kTestHost)),
                 QStringLiteral("200"));
    }

    void smtpPortsAreBlocked() {
        for (int port : {25, 465, 587}) {
            QVERIFY(hostConnects(kTestHost, port));
            QCOMPARE(guestConnect(online, kTestHost, port), QStringLiteral("closed"));
        }
        QCOMPARE(guestConnect(online, kTestHost, 80), QStringLiteral("open"));
    }

    void hostFilterAloneBlocks() {
        // What passt's user may do on the host, whatever the guest's rules.
        QCOMPARE(hostCurl(QStringLiteral("http://%1/hello.txt").arg(kTestHost), true),
                 QStringLiteral("200"));
        for (const QString &a : kPrivate)
            QCOMPARE(hostCurl(QStringLiteral("http://%1/hello.txt").arg(a), true),
                     QStringLiteral("000"));
        const QStringList local = hostAddresses() << QStringLiteral("127.0.0.1");
        for (const QString &a : local)
            QCOMPARE(hostCurl(QStringLiteral("http://%1:%2/v1/sizes").arg(a).arg(apiPort), true),
                     QStringLiteral("000"));
        for (int port : {25, 465, 587})
            QVERIFY(!hostConnects(kTestHost, port, true));
    }

    void guestRulesAloneBlock() {
        // Take the host filter away for a moment: the guest's own rules
        // still hold. Another Sandcastle on this machine (a parallel test)
        // may load the table again meanwhile: then the round is repeated.
        QString saved;
        QCOMPARE(hostFilter(QStringLiteral("list"), &saved), 0);
        bool privateBlocked = true, smtpBlocked = true, alone = false;
        QString apiFromGuest;
        for (int round = 0; round < 3 && !alone; ++round) {
            hostFilter(QStringLiteral("delete"));
            for (const QString &a : kPrivate)
                privateBlocked &=
                    guestCurl(online, QStringLiteral("http://%1/hello.txt").arg(a)) == "000";
            for (int port : {25, 465, 587})
                smtpBlocked &= guestConnect(online, kTestHost, port) == "closed";
            apiFromGuest =
                guestCurl(online, QStringLiteral("http://198.51.100.1:%1/v1/sizes").arg(apiPort));
            alone = !hostFilterLoaded();
        }
        QCOMPARE(host(QStringLiteral("nft"), {QStringLiteral("-f"), QStringLiteral("-")}, nullptr,
                      saved.toUtf8()),
                 0);
        QVERIFY(hostFilterLoaded());
        QVERIFY2(alone, "the host filter came back during every round");
        QVERIFY(privateBlocked);
        QVERIFY(smtpBlocked);
        // The host's address on a public-looking range is the one thing
        // only the host filter knows to block.
        QVERIFY2(apiFromGuest != "000", "expected only the host layer to stop this");
    }

    void guestCannotChangeItsNetwork() {
        for (const QString &command :
             {QStringLiteral("nft flush ruleset"), QStringLiteral("ip link set eth0 down"),
              QStringLiteral("ip addr add 10.99.0.9/24 dev eth0"),
              QStringLiteral("ip route add 10.99.0.0/24 dev eth0"),
              QStringLiteral("echo nameserver 1.1.1.1 >> /etc/resolv.conf")}) {
            Reply r = exec(online, command);
            QVERIFY2(code(r) != 0, qPrintable(command));
        }
        QCOMPARE(guestCurl(online, QStringLiteral("http://%1/hello.txt").arg(kTestHost)),
                 QStringLiteral("200"));
    }

    void neighbourKeptWorking() {
        const int before = out(exec(offline, QStringLiteral("wc -l < /workspace/ticks"))).toInt();
        QVERIFY(before > 10);
        QVERIFY(QTest::qWaitFor(
            [&] {
                return out(exec(offline, QStringLiteral("wc -l < /workspace/ticks"))).toInt() >
                       before;
            },
            30000));
        QCOMPARE(out(exec(online, QStringLiteral("echo alive"))), QStringLiteral("alive\n"));
    }

    void networkNoneHasNoNetwork() {
        Reply r = exec(offline, QStringLiteral("ls /sys/class/net"));
        QCOMPARE(out(r), QStringLiteral("lo\n"));
        QCOMPARE(guestCurl(offline, QStringLiteral("http://%1/hello.txt").arg(kTestHost)),
                 QStringLiteral("000"));
        Reply bad =
            http->call("POST", QStringLiteral("/sandboxes"), QByteArray(R"({"network":"wifi"})"));
        QCOMPARE(bad.status, 400);
        QVERIFY(bad.json.value("error").toObject().value("message").toString().contains(
            QStringLiteral("internet")));
    }

    void hostFilterComesBack() {
        // A create never starts a passt without the filter...
        QCOMPARE(hostFilter(QStringLiteral("delete")), 0);
        Reply third = http->call("POST", QStringLiteral("/sandboxes"), QByteArray("{}"));
        QCOMPARE(third.status, 201);
        QVERIFY(hostFilterLoaded());
        QCOMPARE(http->call("DELETE", "/sandboxes/" + third.json.value("id").toString()).status,
                 200);
        // ...and the reconciler puts it back when a firewall reload or
        // `nft flush ruleset` takes it away. (A restart on the way: the
        // running sandboxes keep their network through it.)
        service->terminate();
        int rc = -1;
        admin(dir.path(),
              {QStringLiteral("config"), QStringLiteral("set"),
               QStringLiteral("reconcile_interval_ms"), QStringLiteral("1000")},
              &rc);
        QCOMPARE(rc, 0);
        QVERIFY(service->start());
        QCOMPARE(hostFilter(QStringLiteral("flush")), 0);
        QTRY_COMPARE_WITH_TIMEOUT(hostCurl(QStringLiteral("http://10.99.0.2/hello.txt"), true),
                                  QStringLiteral("000"), 20000);
        QCOMPARE(guestCurl(online, QStringLiteral("http://%1/hello.txt").arg(kTestHost)),
                 QStringLiteral("200"));
        QCOMPARE(guestCurl(online, QStringLiteral("http://10.99.0.2/hello.txt")),
                 QStringLiteral("000"));
    }

    void tamperedHostFilterIsLoadedAgain() {
        // The reconciler (every second since hostFilterComesBack) compares
        // the whole table with what it loaded, not a few rules in it. An
        // accept rule in front of the rejects leaves all of those in place.
        const QString reload = QStringLiteral("host filter: loading it again");
        int before = logged(reload);
        QCOMPARE(
            host(QStringLiteral("nft"),
                 {QStringLiteral("insert"), QStringLiteral("rule"), QStringLiteral("inet"),
                  QStringLiteral("sandcastle"), QStringLiteral("sandbox"), QStringLiteral("ip"),
                  QStringLiteral("daddr"), QStringLiteral("10.99.0.2"), QStringLiteral("accept")}),
            0);
        QTRY_VERIFY_WITH_TIMEOUT(logged(reload) > before, 30000);
        QVERIFY2(logged(QStringLiteral("(added: ")) > 0, qPrintable(service->log().right(2000)));
        QString listed;
        QTRY_VERIFY_WITH_TIMEOUT(hostFilter(QStringLiteral("list"), &listed) == 0 &&
                                     !listed.contains(QStringLiteral("10.99.0.2")),
                                 10000);
        QCOMPARE(hostCurl(QStringLiteral("http://10.99.0.2/hello.txt"), true),
                 QStringLiteral("000"));
        // An address added to the DNS set opens port 53 on a private
        // address: the set is rebuilt from the services' resolvers.
        before = logged(reload);
        QCOMPARE(
            host(QStringLiteral("nft"), {QStringLiteral("add"), QStringLiteral("element"),
                                         QStringLiteral("inet"), QStringLiteral("sandcastle"),
                                         QStringLiteral("dns4"), QStringLiteral("{ 10.99.0.2 }")}),
            0);
        QTRY_VERIFY_WITH_TIMEOUT(logged(reload) > before, 30000);
        QTRY_VERIFY_WITH_TIMEOUT(hostFilter(QStringLiteral("list"), &listed) == 0 &&
                                     !listed.contains(QStringLiteral("10.99.0.2")) &&
                                     listed.contains(kTestHost),
                                 10000);
        // A load replaces the table in one transaction: the running
        // sandbox keeps its network through both.
        QCOMPARE(guestCurl(online, QStringLiteral("http://%1/hello.txt").arg(kTestHost)),
                 QStringLiteral("200"));
        QCOMPARE(guestCurl(online, QStringLiteral("http://10.99.0.2/hello.txt")),
                 QStringLiteral("000"));
    }

    void passtRunsUnprivilegedAndEndsWithItsVm() {
        QString pids;
        host(QStringLiteral("pgrep"), {QStringLiteral("-f"), dir.path() + "/sandboxes/" + online},
             &pids);
        int passts = 0;
        for (const QString &pid : pids.split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
            QFile status(QStringLiteral("/proc/%1/status").arg(pid));
            if (!status.open(QIODevice::ReadOnly))
                continue;
            const QString text = QString::fromUtf8(status.readAll());
            // QEMU and passt: neither runs as root, both under seccomp.
            QVERIFY2(!text.contains(QRegularExpression(QStringLiteral("\nUid:\\s+0\\s"))),
                     qPrintable(text.left(200)));
            QVERIFY(text.contains(QRegularExpression(QStringLiteral("\nSeccomp:\\s+2"))));
            passts += text.startsWith(QLatin1String("Name:\tpasst"));
        }
        QCOMPARE(passts, 1);
        QCOMPARE(http->call("DELETE", QStringLiteral("/sandboxes/") + online).status, 200);
        QTRY_COMPARE_WITH_TIMEOUT(host(QStringLiteral("pgrep"),
                                       {QStringLiteral("-f"), dir.path() + "/sandboxes/" + online}),
                                  1, 30000); // pgrep: 1 when nothing matches
        online.clear();
    }

    void noPasstRunsWhileTheFilterCannotLoad() {
        // A sandbox with internet runs on from this run into the next.
        Reply created = http->call("POST", QStringLiteral("/sandboxes"), QByteArray("{}"));
        QCOMPARE(created.status, 201);
        const QString adopted = created.json.value("id").toString();
        QCOMPARE(guestCurl(adopted, QStringLiteral("http://%1/hello.txt").arg(kTestHost)),
                 QStringLiteral("200"));
        QCOMPARE(passtsFor(adopted), 1);
        service->terminate();
        // The next run finds no filter (a reboot took it) and cannot load
        // one: its `nft` fails, as one without its kernel modules would.
        const QString realNft = QStandardPaths::findExecutable(QStringLiteral("nft"));
        QVERIFY(!realNft.isEmpty());
        const QString bin = dir.path() + QStringLiteral("/fakebin");
        const QString broken = dir.path() + QStringLiteral("/nft-broken");
        QVERIFY(QDir().mkpath(bin));
        QFile fake(bin + QStringLiteral("/nft"));
        QVERIFY(fake.open(QIODevice::WriteOnly));
        fake.write(QStringLiteral("#!/bin/sh\n"
                                  "if [ -e '%1' ]; then echo 'nft: netlink: Error: cannot load "
                                  "(broken by the test)' >&2; exit 1; fi\n"
                                  "exec '%2' \"$@\"\n")
                       .arg(broken, realNft)
                       .toUtf8());
        fake.close();
        QVERIFY(fake.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
        QVERIFY(QFile(broken).open(QIODevice::WriteOnly));
        hostFilter(QStringLiteral("delete"));
        const QByteArray path = qgetenv("PATH");
        qputenv("PATH", bin.toUtf8() + ':' + path); // the service's, not this test's
        const bool started = service->start();
        qputenv("PATH", path);
        QVERIFY(started);
        // Its passt is stopped at once: it would send unfiltered.
        QTRY_COMPARE_WITH_TIMEOUT(passtsFor(adopted), 0, 30000);
        QTRY_COMPARE_WITH_TIMEOUT(exec(adopted, QStringLiteral("true")).status, 200, 60000);
        QCOMPARE(guestCurl(adopted, QStringLiteral("http://%1/hello.txt").arg(kTestHost)),
                 QStringLiteral("000"));
        QCOMPARE(guestCurl(adopted, QStringLiteral("http://198.51.100.1:%1/v1/sizes").arg(apiPort)),
                 QStringLiteral("000"));
        // No new one either.
        Reply refused = http->call("POST", QStringLiteral("/sandboxes"), QByteArray("{}"));
        QCOMPARE(refused.status, 503);
        QVERIFY2(refused.json.value("error").toObject().value("message").toString().contains(
                     QStringLiteral("broken by the test")),
                 refused.body.constData());
        // The reconciler keeps trying; once nft works the filter is loaded
        // and creates with internet work again.
        QVERIFY(QFile::remove(broken));
        QTRY_VERIFY_WITH_TIMEOUT(
            logged(QStringLiteral("host filter: loaded; sandboxes can have internet")) > 0, 30000);
        QVERIFY(hostFilterLoaded());
        Reply again = http->call("POST", QStringLiteral("/sandboxes"), QByteArray("{}"));
        QCOMPARE(again.status, 201);
        const QString fresh = again.json.value("id").toString();
        QCOMPARE(guestCurl(fresh, QStringLiteral("http://%1/hello.txt").arg(kTestHost)),
                 QStringLiteral("200"));
        QCOMPARE(guestCurl(fresh, QStringLiteral("http://10.99.0.2/hello.txt")),
                 QStringLiteral("000"));
        QCOMPARE(passtsFor(adopted), 0); // what was cut stays cut
        for (const QString &id : {adopted, fresh})
            QCOMPARE(http->call("DELETE", QStringLiteral("/sandboxes/") + id).status, 200);
    }

    void cleanupTestCase() {
        if (service)
            service->destroyLiveAndTerminate();
        host(QStringLiteral("bash"),
             {QStringLiteral(SOURCE_DIR "/tests/support/testhost.sh"), QStringLiteral("down"), ns});
        QTRY_COMPARE_WITH_TIMEOUT(qemuProcessesWith(dir.path()), 0, 60000);
    }
};

QTEST_GUILESS_MAIN(TestNetworkVm)
#include "tst_network_vm.moc"
