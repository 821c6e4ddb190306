#include "accel.h"

#include <QFile>

#include <fcntl.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <unistd.h>

namespace sandcastle {

AccelProbe probeAccel() {
    const QByteArray forced = qgetenv("SANDCASTLE_ACCEL");
    if (forced == "tcg")
        return {false, QStringLiteral("emulation forced by SANDCASTLE_ACCEL=tcg")};
    if (forced == "kvm")
        return {true, QStringLiteral("KVM forced by SANDCASTLE_ACCEL=kvm")};

    int fd = ::open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return {false,
                QStringLiteral("no usable /dev/kvm: VMs are emulated (about ten times slower)")};
    int vm = ioctl(fd, KVM_CREATE_VM, 0);
    ::close(fd);
    if (vm < 0)
        return {false, QStringLiteral("/dev/kvm cannot create a VM: VMs are emulated")};
    ::close(vm);

    QFile cpuinfo(QStringLiteral("/proc/cpuinfo"));
    QByteArray flags;
    if (cpuinfo.open(QIODevice::ReadOnly))
        flags = cpuinfo.readAll();
    if (!flags.contains(" vmx") && !flags.contains(" svm"))
        return {false,
                QStringLiteral("/dev/kvm exists but the CPU shows no vmx/svm: VMs are emulated")};
    return {true, QStringLiteral("KVM")};
}

} // namespace sandcastle
