// The domain XML is built by a pure function: check what libvirt will read.
#include "hypervisor/domainspec.h"

#include <QTest>
#include <QXmlStreamReader>

using namespace sandcastle;

namespace {

DomainSpec sampleSpec() {
    DomainSpec s;
    s.name = QStringLiteral("sandcastle-sbx_abc");
    s.vcpus = 2;
    s.memoryMiB = 2048;
    s.kernel = QStringLiteral("/img/vmlinuz");
    s.initrd = QStringLiteral("/img/initrd.img");
    s.cmdline = guestKernelCmdline(false);
    s.overlay = QStringLiteral("/data/sbx_abc/disk.qcow2");
    s.base = QStringLiteral("/img/base.qcow2");
    s.consoleLog = QStringLiteral("/data/sbx_abc/console.log");
    s.agentSocket = QStringLiteral("/data/sbx_abc/agent.sock");
    s.agentPortName = QStringLiteral("org.sandcastle.agent.0");
    return s;
}

/// Text of the first element at `path` ("domain/os/kernel"), or of its
/// attribute when `attr` is given. Each path is searched from the top.
QString find(const QString &xml, const QString &path, const QString &attr = {}) {
    const QStringList want = path.split(QLatin1Char('/'));
    QXmlStreamReader r(xml);
    QStringList stack;
    while (!r.atEnd()) {
        r.readNext();
        if (r.isStartElement()) {
            stack << r.name().toString();
            if (stack == want)
                return attr.isEmpty() ? r.readElementText() : r.attributes().value(attr).toString();
        } else if (r.isEndElement()) {
            stack.removeLast();
        }
    }
    return QStringLiteral("<missing>");
}

int count(const QString &xml, const QString &element) {
    QXmlStreamReader r(xml);
    int n = 0;
    while (!r.atEnd()) {
        r.readNext();
        if (r.isStartElement() && r.name() == element)
            ++n;
    }
    return n;
}

} // namespace

class TestDomainXml : public QObject {
    Q_OBJECT
private slots:
    void wellFormedAndPure() {
        const QString a = buildDomainXml(sampleSpec());
        QCOMPARE(buildDomainXml(sampleSpec()), a);
        QXmlStreamReader r(a);
        while (!r.atEnd())
            r.readNext();
        QVERIFY2(!r.hasError(), qPrintable(r.errorString()));
    }

    void machine() {
        const QString x = buildDomainXml(sampleSpec());
        QCOMPARE(find(x, QStringLiteral("domain"), QStringLiteral("type")), QStringLiteral("qemu"));
        QCOMPARE(find(x, QStringLiteral("domain/name")), QStringLiteral("sandcastle-sbx_abc"));
        QCOMPARE(find(x, QStringLiteral("domain/memory")), QStringLiteral("2048"));
        QCOMPARE(find(x, QStringLiteral("domain/memory"), QStringLiteral("unit")),
                 QStringLiteral("MiB"));
        QCOMPARE(find(x, QStringLiteral("domain/vcpu")), QStringLiteral("2"));
        QCOMPARE(find(x, QStringLiteral("domain/on_crash")), QStringLiteral("destroy"));
        QCOMPARE(find(x, QStringLiteral("domain/on_reboot")), QStringLiteral("destroy"));
        QCOMPARE(count(x, QStringLiteral("cpu")), 0); // TCG: QEMU's default model
        QCOMPARE(count(x, QStringLiteral("graphics")), 0);
        QCOMPARE(find(x, QStringLiteral("domain/devices/video/model"), QStringLiteral("type")),
                 QStringLiteral("none"));
        QCOMPARE(count(x, QStringLiteral("interface")), 0);
    }

    void kvmUsesHostCpu() {
        DomainSpec s = sampleSpec();
        s.kvm = true;
        const QString x = buildDomainXml(s);
        QCOMPARE(find(x, QStringLiteral("domain"), QStringLiteral("type")), QStringLiteral("kvm"));
        QCOMPARE(find(x, QStringLiteral("domain/cpu"), QStringLiteral("mode")),
                 QStringLiteral("host-passthrough"));
    }

    void directKernelBoot() {
        const QString x = buildDomainXml(sampleSpec());
        QCOMPARE(find(x, QStringLiteral("domain/os/kernel")), QStringLiteral("/img/vmlinuz"));
        QCOMPARE(find(x, QStringLiteral("domain/os/initrd")), QStringLiteral("/img/initrd.img"));
        QVERIFY(
            find(x, QStringLiteral("domain/os/cmdline")).contains(QStringLiteral("console=ttyS0")));
        QCOMPARE(find(x, QStringLiteral("domain/os/type"), QStringLiteral("machine")),
                 QStringLiteral("q35"));
    }

    void overlayOnBase() {
        const QString x = buildDomainXml(sampleSpec());
        QCOMPARE(find(x, QStringLiteral("domain/devices/disk/source"), QStringLiteral("file")),
                 QStringLiteral("/data/sbx_abc/disk.qcow2"));
        QCOMPARE(find(x, QStringLiteral("domain/devices/disk/driver"), QStringLiteral("type")),
                 QStringLiteral("qcow2"));
        QCOMPARE(find(x, QStringLiteral("domain/devices/disk/backingStore/source"),
                      QStringLiteral("file")),
                 QStringLiteral("/img/base.qcow2"));
        QCOMPARE(find(x, QStringLiteral("domain/devices/disk/target"), QStringLiteral("bus")),
                 QStringLiteral("virtio"));
    }

    void consoleAndAgentChannel() {
        const QString x = buildDomainXml(sampleSpec());
        QCOMPARE(find(x, QStringLiteral("domain/devices/serial"), QStringLiteral("type")),
                 QStringLiteral("file"));
        QCOMPARE(find(x, QStringLiteral("domain/devices/serial/source"), QStringLiteral("path")),
                 QStringLiteral("/data/sbx_abc/console.log"));
        QCOMPARE(count(x, QStringLiteral("channel")), 1);
        QCOMPARE(find(x, QStringLiteral("domain/devices/channel/source"), QStringLiteral("path")),
                 QStringLiteral("/data/sbx_abc/agent.sock"));
        QCOMPARE(find(x, QStringLiteral("domain/devices/channel/target"), QStringLiteral("name")),
                 QStringLiteral("org.sandcastle.agent.0"));
        QCOMPARE(find(x, QStringLiteral("domain/devices/channel/target"), QStringLiteral("type")),
                 QStringLiteral("virtio"));
    }

    void qgaChannelOnlyWhenAsked() {
        DomainSpec s = sampleSpec();
        s.qgaSocket = QStringLiteral("/data/sbx_abc/qga.sock");
        QCOMPARE(count(buildDomainXml(s), QStringLiteral("channel")), 2);
    }

    void networkCardOnlyWithPasst() {
        // No socket: no network device of any kind (network "none").
        const QString none = buildDomainXml(sampleSpec());
        QCOMPARE(count(none, QStringLiteral("interface")), 0);
        QCOMPARE(count(none, QStringLiteral("commandline")), 0);
        DomainSpec s = sampleSpec();
        s.netSocket = QStringLiteral("/data/sbx_abc/net/passt.sock");
        const QString x = buildDomainXml(s);
        QXmlStreamReader r(x);
        QStringList args;
        while (!r.atEnd()) {
            r.readNext();
            if (r.isStartElement() && r.name() == QLatin1String("arg")) {
                QCOMPARE(r.namespaceUri(),
                         QLatin1String("http://libvirt.org/schemas/domain/qemu/1.0"));
                args << r.attributes().value(QStringLiteral("value")).toString();
            }
        }
        QVERIFY(!r.hasError());
        QCOMPARE(args.size(), 4);
        QCOMPARE(args[0], QStringLiteral("-netdev"));
        QCOMPARE(args[1], QStringLiteral("stream,id=net0,server=off,addr.type=unix,addr.path=") +
                              s.netSocket);
        QCOMPARE(args[2], QStringLiteral("-device"));
        QVERIFY(args[3].startsWith(QStringLiteral("virtio-net-pci,netdev=net0,")));
    }

    void hostileNamesAreEscaped() {
        DomainSpec s = sampleSpec();
        s.name = QStringLiteral("a<b>&\"c'</name><evil/>");
        s.overlay = QStringLiteral("/tmp/x' y\"/disk.qcow2");
        const QString x = buildDomainXml(s);
        QCOMPARE(find(x, QStringLiteral("domain/name")), s.name);
        QCOMPARE(find(x, QStringLiteral("domain/devices/disk/source"), QStringLiteral("file")),
                 s.overlay);
        QCOMPARE(count(x, QStringLiteral("evil")), 0);
    }
};

QTEST_GUILESS_MAIN(TestDomainXml)
#include "tst_domainxml.moc"
