#include "accel.h"

#include <QFile>

#include <optional>

#include <fcntl.h>
#include <grp.h>
#include <linux/kvm.h>
#include <pwd.h>
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

bool canReadWrite(const struct stat &st, uid_t uid, const QList<gid_t> &groups, bool readOnly) {
    const mode_t rw = readOnly ? S_IRUSR : S_IRUSR | S_IWUSR;
    if (st.st_uid == uid)
        return (st.st_mode & rw) == rw;
    if (groups.contains(st.st_gid))
        return (st.st_mode & (rw >> 3)) == (rw >> 3);
    return (st.st_mode & (rw >> 6)) == (rw >> 6);
}

namespace {

struct UserIds {
    uid_t uid = 0;
    QList<gid_t> groups; // the primary group too
};

std::optional<UserIds> lookupUser(const QString &name) {
    const QByteArray user = name.toLocal8Bit();
    passwd pwBuf{};
    passwd *pw = nullptr;
    char buf[4096];
    if (getpwnam_r(user.constData(), &pwBuf, buf, sizeof buf, &pw) != 0 || !pw)
        return std::nullopt;
    UserIds ids{pw->pw_uid, QList<gid_t>(256)};
    int n = int(ids.groups.size());
    if (getgrouplist(user.constData(), pw->pw_gid, ids.groups.data(), &n) < 0)
        n = 0;
    ids.groups.resize(n);
    if (ids.groups.isEmpty())
        ids.groups << pw->pw_gid;
    return ids;
}

std::optional<gid_t> kvmGroup() {
    group grBuf{};
    group *kvm = nullptr;
    char buf[4096];
    if (getgrnam_r("kvm", &grBuf, buf, sizeof buf, &kvm) != 0 || !kvm)
        return std::nullopt;
    return kvm->gr_gid;
}

} // namespace

std::optional<bool> kvmUsableBy(const QString &user, const QString &device, bool readOnly) {
    struct stat st {};
    if (::stat(device.toLocal8Bit().constData(), &st) != 0 || !S_ISCHR(st.st_mode))
        return std::nullopt;
    auto ids = lookupUser(user);
    if (!ids)
        return std::nullopt;
    return canReadWrite(st, ids->uid, ids->groups, readOnly);
}

QString ensureKvmAccess(const QString &qemuUser, const QString &device) {
    auto usable = kvmUsableBy(qemuUser, device);
    if (!usable || *usable)
        return {}; // no KVM here (emulation, nothing to agree on), or it is fine
    const QByteArray path = device.toLocal8Bit();
    struct stat st {};
    ::stat(path.constData(), &st);
    const QString problem =
        QStringLiteral("%1 is mode %2, owner %3:%4, and QEMU's user %5 cannot open it")
            .arg(device)
            .arg(st.st_mode & 07777, 4, 8, QLatin1Char('0'))
            .arg(st.st_uid)
            .arg(st.st_gid)
            .arg(qemuUser);
    const auto kvm = kvmGroup();
    const auto ids = lookupUser(qemuUser);
    if (!kvm || !ids || !ids->groups.contains(*kvm))
        return problem + QStringLiteral("; add %1 to group kvm and give %2 to that group "
                                        "(root:kvm 0660), or VMs are emulated")
                             .arg(qemuUser, device);
    // Never fight udev: where it runs, its rules decide.
    if (QFile::exists(QStringLiteral("/run/udev/control")))
        return problem + QStringLiteral("; udev runs here, so its rules decide: give %1 to "
                                        "group kvm (0660) there, or VMs are emulated")
                             .arg(device);
    if (::chown(path.constData(), 0, *kvm) != 0 || ::chmod(path.constData(), 0660) != 0)
        return problem + QStringLiteral("; could not make it root:kvm 0660: %1")
                             .arg(QString::fromLocal8Bit(strerror(errno)));
    return QStringLiteral("%1 was root's alone and udev does not run: made it root:kvm 0660, "
                          "as the distribution's udev rule would, so QEMU's user %2 can use it")
        .arg(device, qemuUser);
}

} // namespace sandcastle
