#include "domainspec.h"

#include <QXmlStreamWriter>

namespace sandcastle {

namespace {

void element(QXmlStreamWriter &w, const QString &name, const QString &text) {
    w.writeTextElement(name, text);
}

void emptyWith(QXmlStreamWriter &w, const QString &name,
               std::initializer_list<std::pair<QString, QString>> attrs) {
    w.writeStartElement(name);
    for (const auto &[k, v] : attrs)
        w.writeAttribute(k, v);
    w.writeEndElement();
}

void channel(QXmlStreamWriter &w, const QString &socket, const QString &portName) {
    w.writeStartElement(QStringLiteral("channel"));
    w.writeAttribute(QStringLiteral("type"), QStringLiteral("unix"));
    emptyWith(w, QStringLiteral("source"),
              {{QStringLiteral("mode"), QStringLiteral("bind")}, {QStringLiteral("path"), socket}});
    emptyWith(
        w, QStringLiteral("target"),
        {{QStringLiteral("type"), QStringLiteral("virtio")}, {QStringLiteral("name"), portName}});
    w.writeEndElement();
}

const QString kQemuNs = QStringLiteral("http://libvirt.org/schemas/domain/qemu/1.0");

/// The network card, attached to passt's socket. Debian's libvirt 9.0
/// has no passt backend, so the card is passed to QEMU directly, at a
/// fixed root-bus slot libvirt does not hand out (it fills from 0x01).
void passtNic(QXmlStreamWriter &w, const QString &socket) {
    w.writeStartElement(kQemuNs, QStringLiteral("commandline"));
    for (const QString &arg :
         {QStringLiteral("-netdev"),
          QStringLiteral("stream,id=net0,server=off,addr.type=unix,addr.path=") + socket,
          QStringLiteral("-device"),
          QStringLiteral("virtio-net-pci,netdev=net0,mac=52:54:00:5a:0c:01,bus=pcie.0,"
                         "addr=0x18,romfile=")}) {
        w.writeStartElement(kQemuNs, QStringLiteral("arg"));
        w.writeAttribute(QStringLiteral("value"), arg);
        w.writeEndElement();
    }
    w.writeEndElement();
}

} // namespace

QString guestKernelCmdline(bool kvm) {
    // quiet: every console byte is a trapped I/O write under emulation.
    // No legacy keyboard/mouse probing and one UART: each probe costs
    // hundreds of milliseconds when emulated.
    QString cmdline = QStringLiteral("console=ttyS0 quiet loglevel=3 panic=-1 8250.nr_uarts=1 "
                                     "i8042.noaux i8042.nomux i8042.nopnp i8042.dumbkbd "
                                     "random.trust_cpu=on");
    if (!kvm)
        cmdline += QStringLiteral(" tsc=reliable no_timer_check");
    return cmdline;
}

QString buildDomainXml(const DomainSpec &spec) {
    QString xml;
    QXmlStreamWriter w(&xml);
    w.setAutoFormatting(true);
    w.writeStartElement(QStringLiteral("domain"));
    if (!spec.netSocket.isEmpty())
        w.writeNamespace(kQemuNs, QStringLiteral("qemu"));
    w.writeAttribute(QStringLiteral("type"),
                     spec.kvm ? QStringLiteral("kvm") : QStringLiteral("qemu"));
    element(w, QStringLiteral("name"), spec.name);
    w.writeStartElement(QStringLiteral("memory"));
    w.writeAttribute(QStringLiteral("unit"), QStringLiteral("MiB"));
    w.writeCharacters(QString::number(spec.memoryMiB));
    w.writeEndElement();
    element(w, QStringLiteral("vcpu"), QString::number(spec.vcpus));

    w.writeStartElement(QStringLiteral("os"));
    w.writeStartElement(QStringLiteral("type"));
    w.writeAttribute(QStringLiteral("arch"), QStringLiteral("x86_64"));
    w.writeAttribute(QStringLiteral("machine"), QStringLiteral("q35"));
    w.writeCharacters(QStringLiteral("hvm"));
    w.writeEndElement();
    element(w, QStringLiteral("kernel"), spec.kernel);
    element(w, QStringLiteral("initrd"), spec.initrd);
    element(w, QStringLiteral("cmdline"), spec.cmdline);
    w.writeEndElement(); // os

    w.writeStartElement(QStringLiteral("features"));
    w.writeEmptyElement(QStringLiteral("acpi"));
    w.writeEndElement();
    if (spec.kvm)
        emptyWith(w, QStringLiteral("cpu"),
                  {{QStringLiteral("mode"), QStringLiteral("host-passthrough")}});
    emptyWith(w, QStringLiteral("clock"), {{QStringLiteral("offset"), QStringLiteral("utc")}});
    // A guest that powers off, reboots or panics is gone, never restarted.
    element(w, QStringLiteral("on_poweroff"), QStringLiteral("destroy"));
    element(w, QStringLiteral("on_reboot"), QStringLiteral("destroy"));
    element(w, QStringLiteral("on_crash"), QStringLiteral("destroy"));

    w.writeStartElement(QStringLiteral("devices"));
    element(w, QStringLiteral("emulator"), spec.emulator);

    w.writeStartElement(QStringLiteral("disk"));
    w.writeAttribute(QStringLiteral("type"), QStringLiteral("file"));
    w.writeAttribute(QStringLiteral("device"), QStringLiteral("disk"));
    // A sandbox is disposable: flushes buy nothing when the host loses
    // power, so `unsafe` lets package installs run at memory speed.
    emptyWith(w, QStringLiteral("driver"),
              {{QStringLiteral("name"), QStringLiteral("qemu")},
               {QStringLiteral("type"), QStringLiteral("qcow2")},
               {QStringLiteral("cache"), QStringLiteral("unsafe")},
               {QStringLiteral("discard"), QStringLiteral("unmap")}});
    emptyWith(w, QStringLiteral("source"), {{QStringLiteral("file"), spec.overlay}});
    w.writeStartElement(QStringLiteral("backingStore"));
    w.writeAttribute(QStringLiteral("type"), QStringLiteral("file"));
    emptyWith(w, QStringLiteral("format"), {{QStringLiteral("type"), QStringLiteral("qcow2")}});
    emptyWith(w, QStringLiteral("source"), {{QStringLiteral("file"), spec.base}});
    w.writeEmptyElement(QStringLiteral("backingStore"));
    w.writeEndElement(); // backingStore
    emptyWith(w, QStringLiteral("target"),
              {{QStringLiteral("dev"), QStringLiteral("vda")},
               {QStringLiteral("bus"), QStringLiteral("virtio")}});
    w.writeEndElement(); // disk

    w.writeStartElement(QStringLiteral("serial"));
    w.writeAttribute(QStringLiteral("type"), QStringLiteral("file"));
    emptyWith(w, QStringLiteral("source"), {{QStringLiteral("path"), spec.consoleLog}});
    emptyWith(w, QStringLiteral("target"), {{QStringLiteral("port"), QStringLiteral("0")}});
    w.writeEndElement();

    channel(w, spec.agentSocket, spec.agentPortName);
    if (!spec.qgaSocket.isEmpty())
        channel(w, spec.qgaSocket, QStringLiteral("org.sandcastle.qga.0"));

    w.writeStartElement(QStringLiteral("rng"));
    w.writeAttribute(QStringLiteral("model"), QStringLiteral("virtio"));
    w.writeStartElement(QStringLiteral("backend"));
    w.writeAttribute(QStringLiteral("model"), QStringLiteral("random"));
    w.writeCharacters(QStringLiteral("/dev/urandom"));
    w.writeEndElement();
    w.writeEndElement(); // rng

    emptyWith(w, QStringLiteral("controller"),
              {{QStringLiteral("type"), QStringLiteral("usb")},
               {QStringLiteral("model"), QStringLiteral("none")}});
    // Free page reporting: memory the guest frees goes back to the host, so
    // a sandbox that once ran something big does not keep it resident.
    emptyWith(w, QStringLiteral("memballoon"),
              {{QStringLiteral("model"), QStringLiteral("virtio")},
               {QStringLiteral("freePageReporting"), QStringLiteral("on")}});
    w.writeStartElement(QStringLiteral("video"));
    emptyWith(w, QStringLiteral("model"), {{QStringLiteral("type"), QStringLiteral("none")}});
    w.writeEndElement();
    w.writeEndElement(); // devices
    if (!spec.netSocket.isEmpty())
        passtNic(w, spec.netSocket);
    w.writeEndElement(); // domain
    w.writeEndDocument();
    return xml;
}

} // namespace sandcastle
