// Settings the developer changes most (port, cap, default size and
// lifetime, libvirt URI), each checked by Settings::set before it is
// stored: an invalid value is refused with its message and never written.
// They take effect at the service's next start, as with `sandcastle
// config set`. Also: the guest image's age, and rebuilding it with a
// progress bar.
#pragma once

#include <QHash>
#include <QWidget>

class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;

namespace sandcastle {
class SandboxService;
}

namespace sandcastle::ui {

class ImageBuilder;

class SettingsView : public QWidget {
    Q_OBJECT
public:
    explicit SettingsView(SandboxService *service, QWidget *parent = nullptr);

protected:
    void showEvent(QShowEvent *event) override;

private:
    void load();
    void save();
    void rebuildImage();
    /// Reads the current image's manifest: its build date, age, packages.
    void showImageAge();

    SandboxService *service_;
    QHash<QString, QLineEdit *> fields_; // by settings key
    QLabel *message_;
    ImageBuilder *builder_;
    QPushButton *rebuild_;
    QProgressBar *progress_;
    QLabel *imageStatus_;
    QLabel *imageAge_;
};

} // namespace sandcastle::ui
