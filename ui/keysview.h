// API keys: the list (ids and prefixes only: the record keeps hashes), a
// new key (its secret shown once, with a copy button) and revoking.
#pragma once

#include <QWidget>

class QLabel;
class QLineEdit;
class QTableWidget;

namespace sandcastle {
class SandboxService;
}

namespace sandcastle::ui {

class KeysView : public QWidget {
    Q_OBJECT
public:
    explicit KeysView(SandboxService *service, QWidget *parent = nullptr);
    /// Puts a secret in the shown-once box (the first start's key, too).
    void showSecret(const QString &secret, const QString &what);

private:
    void refresh();
    void create();
    void revoke();

    SandboxService *service_;
    QTableWidget *keys_;
    QLineEdit *name_;
    QLineEdit *secret_;
    QLabel *secretNote_;
    QLabel *message_;
};

} // namespace sandcastle::ui
