#include "mainwindow.h"

#include "format.h"
#include "keysview.h"
#include "sandboxdetail.h"
#include "sandboxmodel.h"
#include "service/sandboxservice.h"
#include "settingsview.h"
#include "spendview.h"
#include "trayicon.h"

#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>
#include <QtDebug>

namespace sandcastle::ui {

MainWindow::MainWindow(SandboxService *service, QWidget *parent)
    : QMainWindow(parent)
    , service_(service)
    , model_(new SandboxModel(service, this))
    , table_(new QTableView(this))
    , filter_(new QComboBox(this))
    , detail_(new SandboxDetail(service, this))
    , keys_(new KeysView(service, this))
    , tabs_(new QTabWidget(this))
    , accel_(new QLabel(this))
    , live_(new QLabel(this))
    , api_(new QLabel(this)) {
    setObjectName(QStringLiteral("mainWindow"));
    setWindowTitle(tr("Sandcastle"));
    setWindowIcon(appIcon());
    tabs_->setObjectName(QStringLiteral("tabs"));
    tabs_->addTab(sandboxesTab(), tr("Sandboxes"));
    tabs_->addTab(new SpendView(service, this), tr("Spend"));
    tabs_->addTab(keys_, tr("Keys"));
    tabs_->addTab(new SettingsView(service, this), tr("Settings"));
    setCentralWidget(tabs_);

    accel_->setObjectName(QStringLiteral("accelStatus"));
    live_->setObjectName(QStringLiteral("liveStatus"));
    api_->setObjectName(QStringLiteral("apiStatus"));
    Engine *engine = service_->engine();
    if (engine->accelerated()) {
        accel_->setText(tr("VMs run with KVM"));
    } else {
        // The reason is long (which check failed); the tooltip has it.
        accel_->setText(tr("VMs run under emulation, not KVM: slow (boots and commands take "
                           "several times longer)"));
        accel_->setToolTip(engine->accelReason());
    }
    if (!engine->networkProblem().isEmpty()) {
        // Sandboxes with internet cannot be created: say so where it shows.
        accel_->setText(accel_->text() + tr(" · no sandbox networking (network \"none\" only)"));
        accel_->setToolTip(accel_->toolTip() + QLatin1Char('\n') + engine->networkProblem());
    }
    statusBar()->addWidget(accel_, 1);
    statusBar()->addPermanentWidget(live_);
    statusBar()->addPermanentWidget(api_);

    if (QSystemTrayIcon::isSystemTrayAvailable()) {
        tray_ = new TrayIcon(this);
        connect(tray_, &TrayIcon::showWindowRequested, this, &MainWindow::showAgain);
        connect(tray_, &TrayIcon::quitRequested, this, [this] {
            showAgain();
            close();
        });
        tray_->show();
    }
    connect(model_, &SandboxModel::liveCountChanged, this, &MainWindow::onLiveCount);
    onLiveCount(model_->liveCount());
    resize(1100, 720);
}

MainWindow::~MainWindow() = default;

QWidget *MainWindow::sandboxesTab() {
    auto *page = new QWidget(this);
    filter_->setObjectName(QStringLiteral("sandboxFilter"));
    filter_->addItem(tr("Live"), SandboxModel::Live);
    filter_->addItem(tr("All"), SandboxModel::All);
    table_->setObjectName(QStringLiteral("sandboxTable"));
    table_->setModel(model_);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->verticalHeader()->hide();
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    table_->horizontalHeader()->setSectionResizeMode(SandboxModel::Name, QHeaderView::Stretch);

    auto *top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("Show:"), page));
    top->addWidget(filter_);
    top->addStretch(1);
    auto *upper = new QWidget(page);
    auto *upperLayout = new QVBoxLayout(upper);
    upperLayout->setContentsMargins(0, 0, 0, 0);
    upperLayout->addLayout(top);
    upperLayout->addWidget(table_);

    auto *split = new QSplitter(Qt::Vertical, page);
    split->addWidget(upper);
    split->addWidget(detail_);
    split->setStretchFactor(0, 2);
    split->setStretchFactor(1, 3);
    auto *layout = new QVBoxLayout(page);
    layout->addWidget(split);

    connect(filter_, &QComboBox::currentIndexChanged, this,
            [this] { model_->setFilter(SandboxModel::Filter(filter_->currentData().toInt())); });
    connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex &current) {
                if (current.isValid())
                    detail_->setSandbox(current.data(SandboxModel::IdRole).toString());
            });
    // A reset (filter change) loses the selection: keep the shown sandbox
    // selected when it is still listed.
    connect(model_, &QAbstractItemModel::modelReset, this, [this] {
        if (const int row = model_->rowOf(detail_->sandbox()); row >= 0)
            table_->selectRow(row);
    });
    return page;
}

void MainWindow::setApiUrl(const QString &url) {
    api_->setText(tr("API: %1").arg(url));
}

void MainWindow::showFirstKey(const QString &secret) {
    keys_->showSecret(secret, tr("The first start's API key"));
    tabs_->setCurrentWidget(keys_);
}

void MainWindow::onLiveCount(int count) {
    live_->setText(tr("%n live sandbox(es)", nullptr, count));
    if (tray_)
        tray_->setLiveCount(count);
}

void MainWindow::showAgain() {
    show();
    raise();
    activateWindow();
}

void MainWindow::closeEvent(QCloseEvent *event) {
    if (quitting_) {
        event->accept();
        return;
    }
    const int live = model_->liveCount();
    event->ignore();
    if (live > 0) {
        askBeforeClosing(live);
        return;
    }
    quitting_ = true;
    hide();
    QApplication::quit(); // nothing runs: the service stops with the window
}

void MainWindow::askBeforeClosing(int live) {
    auto *box = new QMessageBox(
        QMessageBox::Question, tr("Sandboxes are running"),
        tr("%n sandbox(es) still run. Keep them running, or destroy them all and quit?", nullptr,
           live),
        QMessageBox::NoButton, this);
    box->setObjectName(QStringLiteral("confirmClose"));
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->setInformativeText(tr("Kept sandboxes go on serving the API and are destroyed when "
                               "their time is up. Quitting the app also leaves them running: "
                               "the next start takes them over."));
    QPushButton *keep = box->addButton(tray_ ? tr("Keep running in the tray")
                                             : tr("Keep running in the background"),
                                       QMessageBox::AcceptRole);
    keep->setObjectName(QStringLiteral("keepRunning"));
    QPushButton *quit = box->addButton(tr("Quit, leave them running"), QMessageBox::RejectRole);
    quit->setObjectName(QStringLiteral("quitLeaveRunning"));
    QPushButton *destroy = box->addButton(tr("Destroy all and quit"), QMessageBox::DestructiveRole);
    destroy->setObjectName(QStringLiteral("destroyAll"));
    QPushButton *cancel = box->addButton(QMessageBox::Cancel);
    box->setDefaultButton(keep);
    box->setEscapeButton(cancel);
    connect(box, &QMessageBox::finished, this, [this, box, keep, quit, destroy] {
        QAbstractButton *clicked = box->clickedButton();
        if (clicked == keep) {
            hide();
            if (!tray_)
                qInfo() << "window closed; the service keeps running (stop it with Ctrl-C or "
                           "SIGTERM)";
        } else if (clicked == quit) {
            quitting_ = true;
            QApplication::quit();
        } else if (clicked == destroy) {
            destroyAllAndQuit();
        }
    });
    box->open();
}

void MainWindow::destroyAllAndQuit() {
    quitting_ = true;
    hide();
    const QList<SandboxRecord> live =
        service_->store()->liveSandboxes().value_or(QList<SandboxRecord>());
    auto left = std::make_shared<int>(int(live.size()));
    if (*left == 0)
        QApplication::quit();
    for (const SandboxRecord &r : live) {
        service_->destroy(r.accountId, r.id).then(this, [left](Result<SandboxRecord> done) {
            if (!done)
                qWarning().noquote() << "destroy on quit:" << done.error().message;
            if (--*left == 0)
                QApplication::quit();
        });
    }
}

} // namespace sandcastle::ui
