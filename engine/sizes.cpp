#include "sizes.h"

namespace sandcastle {

const QList<SandboxSize> &sandboxSizes() {
    // docs/sizes.md explains the choice; the disk is the overlay's virtual
    // size (the guest grows its filesystem to it at boot).
    static const QList<SandboxSize> sizes = {
        {QStringLiteral("small"), 1, 1024, 8},
        {QStringLiteral("medium"), 2, 2048, 16},
        {QStringLiteral("large"), 4, 4096, 32},
    };
    return sizes;
}

std::optional<SandboxSize> findSize(const QString &name) {
    for (const auto &s : sandboxSizes()) {
        if (s.name == name)
            return s;
    }
    return std::nullopt;
}

} // namespace sandcastle
