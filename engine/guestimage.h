// The guest image a sandbox boots: kernel, initramfs (with the agent) and the
// read-only base disk, as named by the builder's manifest.json.
#pragma once

#include "errors.h"

#include <QString>

namespace sandcastle {

struct GuestImage {
    QString kernel;
    QString initrd;
    QString base;
    QString bootHash;

    /// Reads `<imageDir>/current/manifest.json` and checks the files exist.
    static Result<GuestImage> load(const QString &imageDir);
};

} // namespace sandcastle
