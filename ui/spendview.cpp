#include "spendview.h"

#include "format.h"
#include "service/sandboxservice.h"

#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QDateTime>
#include <QDateTimeAxis>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLineSeries>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSplitter>
#include <QTableWidget>
#include <QValueAxis>

namespace sandcastle::ui {

namespace {
constexpr qint64 kChartSpanMs = 24 * 3600 * 1000ll;

QTableWidget *table(const QStringList &headers, QWidget *parent) {
    auto *t = new QTableWidget(0, int(headers.size()), parent);
    t->setHorizontalHeaderLabels(headers);
    t->setEditTriggers(QAbstractItemView::NoEditTriggers);
    t->verticalHeader()->hide();
    t->horizontalHeader()->setStretchLastSection(true);
    return t;
}

void setRow(QTableWidget *t, int row, const QStringList &cells) {
    for (int c = 0; c < cells.size(); ++c)
        t->setItem(row, c, new QTableWidgetItem(cells.at(c)));
}
} // namespace

SpendView::SpendView(SandboxService *service, QWidget *parent)
    : QWidget(parent)
    , service_(service)
    , accounts_(new QComboBox(this))
    , credit_(new QLabel(this))
    , message_(new QLabel(this))
    , amount_(new QLineEdit(this))
    , perSandbox_(
          table({tr("Sandbox"), tr("Size"), tr("Status"), tr("Rate/hour"), tr("Spend")}, this))
    , rates_(table({tr("Size"), tr("vCPUs"), tr("Memory"), tr("Rate/hour")}, this))
    , chart_(new QChart)
    , series_(new QLineSeries) {
    accounts_->setObjectName(QStringLiteral("spendAccount"));
    credit_->setObjectName(QStringLiteral("creditLabel"));
    message_->setTextFormat(Qt::PlainText); // errors quote what was typed
    message_->setObjectName(QStringLiteral("creditMessage"));
    message_->setWordWrap(true);
    amount_->setObjectName(QStringLiteral("creditAmount"));
    amount_->setPlaceholderText(tr("amount, e.g. 5 or 0.25"));
    perSandbox_->setObjectName(QStringLiteral("spendPerSandbox"));
    rates_->setObjectName(QStringLiteral("rates"));
    QFont big = credit_->font();
    big.setPointSizeF(big.pointSizeF() * 1.6);
    big.setBold(true);
    credit_->setFont(big);

    series_->setName(tr("Spend, cumulative (USD)"));
    chart_->addSeries(series_);
    auto *x = new QDateTimeAxis;
    x->setFormat(QStringLiteral("HH:mm"));
    x->setTitleText(tr("time"));
    auto *y = new QValueAxis;
    y->setLabelFormat(QStringLiteral("%.4f"));
    y->setTitleText(tr("USD"));
    chart_->addAxis(x, Qt::AlignBottom);
    chart_->addAxis(y, Qt::AlignLeft);
    series_->attachAxis(x);
    series_->attachAxis(y);
    chart_->setTitle(tr("Spend over the last 24 hours"));
    chart_->legend()->hide();
    auto *chartView = new QChartView(chart_, this);
    chartView->setObjectName(QStringLiteral("spendChart"));
    chartView->setRenderHint(QPainter::Antialiasing);
    chartView->setMinimumHeight(220);

    auto *add = new QPushButton(tr("Add credit"), this);
    add->setObjectName(QStringLiteral("addCreditButton"));
    auto *top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("Account:"), this));
    top->addWidget(accounts_);
    top->addSpacing(20);
    top->addWidget(credit_, 1);
    top->addWidget(amount_);
    top->addWidget(add);

    auto *tables = new QSplitter(Qt::Horizontal, this);
    tables->addWidget(perSandbox_);
    tables->addWidget(rates_);
    tables->setStretchFactor(0, 3);
    tables->setStretchFactor(1, 2);

    auto *layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addWidget(message_);
    layout->addWidget(chartView, 3);
    layout->addWidget(tables, 2);

    coalesce_.setSingleShot(true);
    coalesce_.setInterval(250);
    connect(&coalesce_, &QTimer::timeout, this, &SpendView::refresh);
    connect(service_, &SandboxService::creditChanged, &coalesce_, qOverload<>(&QTimer::start));
    connect(accounts_, &QComboBox::currentIndexChanged, this, &SpendView::refresh);
    connect(add, &QPushButton::clicked, this, &SpendView::addCredit);
    connect(amount_, &QLineEdit::returnPressed, this, &SpendView::addCredit);
    refresh();
}

QString SpendView::account() const {
    return accounts_->currentData().toString();
}

void SpendView::refresh() {
    Store *store = service_->store();
    // Accounts made on the command line meanwhile join the list.
    const QList<AccountRecord> all = store->accounts();
    if (all.size() != accounts_->count()) {
        const QSignalBlocker quiet(accounts_);
        const QString current = account();
        accounts_->clear();
        for (const AccountRecord &a : all)
            accounts_->addItem(QStringLiteral("%1 (%2)").arg(a.name, a.id), a.id);
        accounts_->setCurrentIndex(std::max(0, accounts_->findData(current)));
    }
    const QString id = account();
    const auto acct = store->account(id);
    credit_->setText(acct ? tr("Credit left: %1").arg(moneyText(acct->balanceMicros))
                          : tr("No account yet"));

    QList<SandboxRecord> mine;
    for (const SandboxRecord &r : store->recentSandboxes(200)) {
        if (r.accountId == id)
            mine.append(r);
    }
    perSandbox_->setRowCount(int(mine.size()));
    for (int i = 0; i < mine.size(); ++i) {
        const SandboxRecord &r = mine.at(i);
        setRow(perSandbox_, i,
               {r.name.isEmpty() ? r.id : QStringLiteral("%1 (%2)").arg(r.name, r.id), r.size,
                statusName(r.status), moneyText(r.rateMicrosPerHour), moneyText(r.costMicros)});
    }
    perSandbox_->resizeColumnsToContents();

    const auto &sizes = sandboxSizes();
    rates_->setRowCount(int(sizes.size()));
    for (int i = 0; i < sizes.size(); ++i) {
        const SandboxSize &s = sizes.at(i);
        setRow(rates_, i,
               {s.name, QString::number(s.vcpus), QStringLiteral("%1 MiB").arg(s.memoryMiB),
                moneyText(service_->settings().ratesMicrosPerHour.value(s.name))});
    }
    rates_->resizeColumnsToContents();
    refreshChart(id);
}

void SpendView::refreshChart(const QString &account) {
    const qint64 now = nowMs();
    const auto usage = service_->store()->usageByMinute(account, now - kChartSpanMs);
    QList<QPointF> points;
    qint64 total = 0;
    // A step per minute that had usage, starting from zero before the first.
    if (!usage.isEmpty())
        points.append(QPointF(double(usage.first().first * 60000 - 60000), 0));
    for (const auto &[bucket, micros] : usage) {
        total += micros;
        points.append(QPointF(double(bucket * 60000), double(total) / 1e6));
    }
    points.append(QPointF(double(now), double(total) / 1e6));
    series_->replace(points);
    // At least the last half hour, so a young account's axis reads in minutes.
    const qint64 from =
        std::min(now - 30 * 60000ll, usage.isEmpty() ? now : usage.first().first * 60000 - 60000);
    auto *x = qobject_cast<QDateTimeAxis *>(chart_->axes(Qt::Horizontal).value(0));
    auto *y = qobject_cast<QValueAxis *>(chart_->axes(Qt::Vertical).value(0));
    if (x)
        x->setRange(QDateTime::fromMSecsSinceEpoch(from), QDateTime::fromMSecsSinceEpoch(now));
    if (y)
        y->setRange(0, std::max(0.001, double(total) / 1e6 * 1.2));
}

void SpendView::addCredit() {
    auto micros = parseMoney(amount_->text());
    if (!micros) {
        message_->setStyleSheet(QStringLiteral("color: #b3261e"));
        message_->setText(micros.error().message);
        return;
    }
    auto balance =
        service_->store()->addCredit(account(), *micros, QStringLiteral("added in the window"));
    if (!balance) {
        message_->setStyleSheet(QStringLiteral("color: #b3261e"));
        message_->setText(balance.error().message);
        return;
    }
    message_->setStyleSheet({});
    message_->setText(
        tr("Added %1; the balance is %2.").arg(moneyText(*micros), moneyText(*balance)));
    amount_->clear();
    refresh();
}

} // namespace sandcastle::ui
