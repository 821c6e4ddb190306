// Whether this host can run VMs with KVM.
#pragma once

#include <QList>
#include <QString>

#include <optional>

#include <sys/stat.h>

namespace sandcastle {

struct AccelProbe {
    bool kvm = false;
    QString reason; // why KVM is or is not used, for logs and the GUI
};

/// KVM is used only when /dev/kvm opens, a VM can be created, and the CPU
/// advertises vmx or svm: some hosts expose a /dev/kvm whose guests never
/// boot (seen on this project's CI machines). `SANDCASTLE_ACCEL=tcg`
/// forces emulation, `=kvm` forces KVM.
AccelProbe probeAccel();

/// Whether a user with `uid` and `groups` may open a file with `st`'s
/// owner and mode for reading and writing, or reading only (`readOnly`);
/// root's override aside.
bool canReadWrite(const struct stat &st, uid_t uid, const QList<gid_t> &groups,
                  bool readOnly = false);

/// Whether `user` may open `device` (a character device) for reading and
/// writing (QEMU needs both), or for reading only (`readOnly`: libvirt's
/// test of whether its cached capabilities still hold); nullopt when there
/// is no such device or user.
std::optional<bool> kvmUsableBy(const QString &user,
                                const QString &device = QStringLiteral("/dev/kvm"),
                                bool readOnly = false);

/// QEMU runs as `qemuUser`, and so do libvirt's checks of whether KVM is
/// usable, while libvirt's capability probe may have seen KVM as root. Where
/// the two disagree, libvirt probes QEMU again at every create. On a host
/// without udev, /dev/kvm can be root's alone: this does what the
/// distribution's udev rule does (group kvm, mode 0660) when udev does not
/// run and `qemuUser` is in group kvm. Returns a line for the log, empty
/// when nothing needed doing. `device` is a parameter for the tests.
QString ensureKvmAccess(const QString &qemuUser,
                        const QString &device = QStringLiteral("/dev/kvm"));

} // namespace sandcastle
