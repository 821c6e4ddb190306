// The guest image a sandbox boots: kernel, initramfs (with the agent) and the
// read-only base disk, as named by the builder's manifest.json.
#pragma once

#include "errors.h"

#include <QString>
#include <QStringList>

namespace sandcastle {

struct GuestImage {
    QString kernel;
    QString initrd;
    QString base;
    QString bootHash;
    QString rootfs;        // the root filesystem's folder name (rootfs-<hash>-<built>)
    QString kernelVersion; // e.g. 6.1.0-50-amd64
    QStringList suites;    // what its packages came from (bookworm, -updates, -security)
    /// When the root filesystem's packages were fetched (ms since the
    /// epoch, UTC). From the manifest; an image built before it recorded
    /// the time has the time its base file was written instead.
    qint64 builtAt = 0;
    bool builtAtEstimated = false; // taken from the base file, not the manifest

    /// Older than this, the log and the window say to update it: Debian
    /// publishes security updates every few days.
    static constexpr int kMaxAgeDays = 30;
    static constexpr const char *kUpdateCommand = "sandcastle image update";

    /// Reads `<imageDir>/current/manifest.json` and checks the files exist.
    static Result<GuestImage> load(const QString &imageDir);
    /// Parses a manifest's text; `path` names it in errors. Does not look
    /// at the files it names (but for a missing build time: the base's).
    static Result<GuestImage> parse(const QByteArray &manifest, const QString &path);

    /// Whole days since builtAt at `nowMs` (0 on the day it was built).
    int ageDays(qint64 nowMs) const;
    bool outdated(qint64 nowMs) const { return ageDays(nowMs) > kMaxAgeDays; }
    /// One line for people: when it was built, how old, from what.
    QString describe(qint64 nowMs) const;
    /// The log's warning when the image is older than kMaxAgeDays, naming
    /// the command that updates it; empty when it is not.
    QString ageWarning(qint64 nowMs) const;
};

} // namespace sandcastle
