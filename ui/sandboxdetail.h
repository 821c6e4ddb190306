// One sandbox in detail: its command log, its serial console, and what a
// developer does to it by hand (extend, destroy, copy the id, run a
// command). Everything goes through the SandboxService, so it is checked
// and recorded exactly like a REST or MCP call.
#pragma once

#include <QWidget>

class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;

namespace sandcastle {
class SandboxService;
}

namespace sandcastle::ui {

class CommandLog;
class ConsoleTail;

class SandboxDetail : public QWidget {
    Q_OBJECT
public:
    explicit SandboxDetail(SandboxService *service, QWidget *parent = nullptr);
    /// Shows `id` (empty: nothing selected).
    void setSandbox(const QString &id);
    QString sandbox() const { return id_; }

private:
    void refresh();
    void extend();
    /// Asks first; the dialog is window-modal and does not block the loop.
    void confirmDestroy();
    void runCommand();
    void say(const QString &text, bool error = false);

    SandboxService *service_;
    QString id_;
    QLabel *title_;
    QLabel *facts_;
    QLabel *message_;
    QSpinBox *extendMinutes_;
    QPushButton *extend_;
    QPushButton *destroy_;
    QPushButton *copyId_;
    CommandLog *log_;
    ConsoleTail *console_;
    QLineEdit *command_;
    QPushButton *run_;
    QPlainTextEdit *output_;
};

} // namespace sandcastle::ui
