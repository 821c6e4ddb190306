// The Sandcastle window: live sandboxes and their detail, spend, keys and
// settings, a status bar (KVM or emulation, live count, API address) and a
// tray icon. It lives in the `sandcastle serve` process next to the API
// server and follows the SandboxService's signals, so what agents do over
// REST or MCP shows as it happens.
#pragma once

#include <QMainWindow>

class QComboBox;
class QLabel;
class QTableView;

namespace sandcastle {
class SandboxService;
}

namespace sandcastle::ui {

class KeysView;
class SandboxDetail;
class SandboxModel;
class TrayIcon;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(SandboxService *service, QWidget *parent = nullptr);
    ~MainWindow() override;

    /// Shows where the API listens (once the server runs).
    void setApiUrl(const QString &url);
    /// The first start's key: shown once in the Keys tab, which is raised.
    void showFirstKey(const QString &secret);

protected:
    /// With live sandboxes, asks: keep them running (in the tray or in the
    /// background), or destroy them all and quit. Never kills silently.
    void closeEvent(QCloseEvent *event) override;

private:
    QWidget *sandboxesTab();
    void onLiveCount(int count);
    void askBeforeClosing(int live);
    void destroyAllAndQuit();
    void showAgain();

    SandboxService *service_;
    SandboxModel *model_;
    QTableView *table_;
    QComboBox *filter_;
    SandboxDetail *detail_;
    KeysView *keys_;
    QTabWidget *tabs_;
    QLabel *accel_;
    QLabel *live_;
    QLabel *api_;
    TrayIcon *tray_ = nullptr;
    bool quitting_ = false;
};

} // namespace sandcastle::ui
