// The MCP tools: their descriptions and input schemas, and calling them on
// the sandbox service. A failing command is a normal result; a tool that
// cannot do its job (unknown sandbox, no credit, cap reached, bad
// arguments) answers with isError and a message an agent can act on.
#pragma once

#include <QFuture>
#include <QJsonArray>
#include <QJsonObject>

namespace sandcastle {
class SandboxService;
}

namespace sandcastle::api {

/// The `tools` array of tools/list.
QJsonArray mcpToolList();

/// Whether `name` is one of the tools.
bool isMcpTool(const QString &name);

/// Runs tool `name`; the future gives the CallToolResult object.
QFuture<QJsonObject> callMcpTool(SandboxService *service, const QString &accountId,
                                 const QString &name, const QJsonObject &arguments);

} // namespace sandcastle::api
