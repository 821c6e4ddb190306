// The `sandcastle` subcommands. Each returns the process exit status.
#pragma once

#include <QStringList>

namespace sandcastle {

struct ServeOptions {
    int port = -1; // -1: the stored setting
    QString listenAddress;
    bool window = false; // the desktop GUI (main() made a QApplication)
};

/// Runs the service: record, engine, reconciler, REST API. Until stopped.
int runServe(const ServeOptions &options);
/// keys create|list|revoke, credit show|add, config list|get|set|unset,
/// accounts list|create: administration on the record, service running or not.
int runAdmin(const QString &command, const QStringList &args, const QString &name,
             const QString &account);
/// image status|update: the guest image's age; rebuilding its root
/// filesystem with the archive's current packages (security updates).
int runImage(const QStringList &args);
/// MCP over stdio, bridged to the running service's /mcp.
int runMcpStdio();
/// Creates one sandbox, runs `command` in it, destroys it (no record).
int runDemo(const QString &size, const QString &command);

} // namespace sandcastle
