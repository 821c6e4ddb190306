// Spend: an account's credit, what each sandbox cost, spend over time (a
// chart of the ledger's per-minute usage rows, cumulative), the per-size
// rates, and adding credit. Follows the service's creditChanged.
#pragma once

#include <QTimer>
#include <QWidget>

class QComboBox;
class QLabel;
class QLineEdit;
class QTableWidget;
class QChart;
class QLineSeries;

namespace sandcastle {
class SandboxService;
}

namespace sandcastle::ui {

class SpendView : public QWidget {
    Q_OBJECT
public:
    explicit SpendView(SandboxService *service, QWidget *parent = nullptr);
    QString account() const;

private:
    void refresh();
    void refreshChart(const QString &account);
    void addCredit();

    SandboxService *service_;
    QComboBox *accounts_;
    QLabel *credit_;
    QLabel *message_;
    QLineEdit *amount_;
    QTableWidget *perSandbox_;
    QTableWidget *rates_;
    QChart *chart_;
    QLineSeries *series_;
    // creditChanged comes every metering pass; one redraw per burst.
    QTimer coalesce_;
};

} // namespace sandcastle::ui
