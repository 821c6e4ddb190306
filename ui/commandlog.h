// A sandbox's command log: every exec the record holds for it, newest
// first, whoever ran it (REST, MCP or the command box). Refreshed on the
// service's execStarted/execFinished for that sandbox. The record keeps env
// names only, and output previews with env values masked, so nothing here
// can show a secret.
#pragma once

#include <QTableWidget>

namespace sandcastle {
class SandboxService;
}

namespace sandcastle::ui {

class CommandLog : public QTableWidget {
    Q_OBJECT
public:
    explicit CommandLog(SandboxService *service, QWidget *parent = nullptr);
    void setSandbox(const QString &id);

private:
    void refresh();

    SandboxService *service_;
    QString id_;
};

} // namespace sandcastle::ui
