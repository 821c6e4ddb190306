// The sandbox sizes of the API (`small`, `medium`, `large`).
#pragma once

#include <QList>
#include <QString>

#include <optional>

namespace sandcastle {

struct SandboxSize {
    QString name;
    int vcpus = 1;
    int memoryMiB = 1024;
    int diskGiB = 8;
};

/// All sizes, smallest first.
const QList<SandboxSize> &sandboxSizes();

/// The size called `name`, or nothing for an unknown name.
std::optional<SandboxSize> findSize(const QString &name);

} // namespace sandcastle
