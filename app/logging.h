// Log lines go to the terminal and, for the service, to a file in the
// data dir (sandcastle.log), each with a UTC timestamp.
#pragma once

#include <QString>

namespace sandcastle {

/// Installs the message handler; `file` empty: terminal only.
void installLogging(const QString &file);

} // namespace sandcastle
