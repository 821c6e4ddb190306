#include "capscache.h"

#include <QDir>
#include <QFile>
#include <QXmlStreamReader>

#include <sys/stat.h>

namespace sandcastle {

namespace {

/// The fields of a capabilities file that libvirt checks for staleness.
struct Stamp {
    QHash<QString, QString> fields;
    bool kvm = false;
};

Stamp stampOf(const QByteArray &xml) {
    static const QStringList watched = {
        QStringLiteral("qemuctime"),        QStringLiteral("qemumoddirmtime"),
        QStringLiteral("selfctime"),        QStringLiteral("selfvers"),
        QStringLiteral("kernelVersion"),    QStringLiteral("microcodeVersion"),
        QStringLiteral("hostCPUSignature"),
    };
    Stamp s;
    QXmlStreamReader r(xml);
    while (!r.atEnd()) {
        if (r.readNext() != QXmlStreamReader::StartElement)
            continue;
        // These names occur only as children of <qemuCaps>.
        const QString name = r.name().toString();
        if (name == QStringLiteral("flag") &&
            r.attributes().value(QStringLiteral("name")) == QStringLiteral("kvm"))
            s.kvm = true;
        else if (watched.contains(name))
            s.fields.insert(name, r.readElementText(QXmlStreamReader::SkipChildElements));
    }
    return s;
}

} // namespace

QString reprobeReason(const QByteArray &before, const QByteArray &after,
                      std::optional<bool> kvmUsable) {
    const Stamp a = stampOf(before), b = stampOf(after);
    static const QHash<QString, QString> meaning = {
        {QStringLiteral("qemuctime"), QStringLiteral("the QEMU binary changed")},
        {QStringLiteral("qemumoddirmtime"), QStringLiteral("QEMU's modules changed")},
        {QStringLiteral("selfctime"), QStringLiteral("libvirt changed")},
        {QStringLiteral("selfvers"), QStringLiteral("libvirt's version changed")},
        {QStringLiteral("kernelVersion"), QStringLiteral("the kernel changed")},
        {QStringLiteral("microcodeVersion"), QStringLiteral("the CPU microcode changed")},
        {QStringLiteral("hostCPUSignature"), QStringLiteral("the host CPU changed")},
    };
    QStringList why;
    for (auto it = meaning.begin(); it != meaning.end(); ++it) {
        if (a.fields.value(it.key()) != b.fields.value(it.key()))
            why << it.value();
    }
    why.sort();
    if (a.kvm != b.kvm)
        why << (b.kvm ? QStringLiteral("KVM became usable")
                      : QStringLiteral("KVM became unusable"));
    if (kvmUsable && *kvmUsable != b.kvm)
        why << QStringLiteral("the cache says KVM is %1 but QEMU's user %2 read /dev/kvm, so "
                              "libvirt will probe again at every create")
                   .arg(b.kvm ? QStringLiteral("available") : QStringLiteral("unavailable"),
                        *kvmUsable ? QStringLiteral("can") : QStringLiteral("cannot"));
    if (why.isEmpty())
        why << QStringLiteral("nothing the cache records changed (the file was deleted, or "
                              "libvirt found it unreadable)");
    return why.join(QStringLiteral("; "));
}

QStringList CapsCacheWatch::check(std::optional<bool> kvmUsable) {
    QMutexLocker lock(&mutex_);
    QStringList out;
    const QDir dir(dir_);
    for (const QString &name : dir.entryList({QStringLiteral("*.xml")}, QDir::Files)) {
        const QString path = dir.filePath(name);
        struct stat st {};
        if (::stat(QFile::encodeName(path).constData(), &st) != 0)
            continue;
        const qint64 mtimeNs = qint64(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
        auto it = seen_.find(name);
        if (it != seen_.end() && it->inode == st.st_ino && it->mtimeNs == mtimeNs)
            continue;
        QFile f(path);
        if (!f.open(QIODevice::ReadOnly))
            continue;
        Seen now{quint64(st.st_ino), mtimeNs, f.readAll()};
        if (it != seen_.end())
            out << QStringLiteral("libvirt probed QEMU's capabilities again (%1 was rewritten, "
                                  "which costs seconds per create): %2")
                       .arg(path, reprobeReason(it->contents, now.contents, kvmUsable));
        seen_.insert(name, now);
    }
    return out;
}

} // namespace sandcastle
