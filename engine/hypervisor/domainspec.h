// Everything needed to describe one sandbox VM, and the pure function that
// turns it into libvirt domain XML.
#pragma once

#include <QString>

namespace sandcastle {

struct DomainSpec {
    QString name;
    int vcpus = 1;
    int memoryMiB = 1024;
    bool kvm = false;
    QString emulator = QStringLiteral("/usr/bin/qemu-system-x86_64");
    QString kernel;
    QString initrd;
    QString cmdline;
    QString overlay;       // per-sandbox qcow2, backed by the read-only base
    QString base;          // the backing file of the overlay
    QString consoleLog;    // serial console output goes here
    QString agentSocket;   // host end of the agent's virtio-serial port
    QString agentPortName; // the guest's name of that port
    QString qgaSocket;     // optional: a qemu-guest-agent port (benchmark only)
    QString netSocket;     // passt's socket; empty: no network card at all
};

/// The libvirt domain XML for `spec`. Pure: same input, same text.
QString buildDomainXml(const DomainSpec &spec);

/// The kernel command line the guest boots with.
QString guestKernelCmdline(bool kvm);

} // namespace sandcastle
