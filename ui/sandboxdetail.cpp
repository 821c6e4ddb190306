#include "sandboxdetail.h"

#include "commandlog.h"
#include "consoletail.h"
#include "format.h"
#include "service/sandboxservice.h"

#include <QApplication>
#include <QClipboard>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTabWidget>
#include <QVBoxLayout>

namespace sandcastle::ui {

SandboxDetail::SandboxDetail(SandboxService *service, QWidget *parent)
    : QWidget(parent)
    , service_(service)
    , title_(new QLabel(this))
    , facts_(new QLabel(this))
    , message_(new QLabel(this))
    , extendMinutes_(new QSpinBox(this))
    , extend_(new QPushButton(tr("Extend"), this))
    , destroy_(new QPushButton(tr("Destroy…"), this))
    , copyId_(new QPushButton(tr("Copy id"), this))
    , log_(new CommandLog(service, this))
    , console_(new ConsoleTail(this))
    , command_(new QLineEdit(this))
    , run_(new QPushButton(tr("Run"), this))
    , output_(new QPlainTextEdit(this)) {
    // Names, reasons and errors carry text of users and guests: never markup.
    for (QLabel *label : {title_, facts_, message_})
        label->setTextFormat(Qt::PlainText);
    title_->setObjectName(QStringLiteral("detailTitle"));
    message_->setObjectName(QStringLiteral("detailMessage"));
    message_->setWordWrap(true);
    facts_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    extendMinutes_->setObjectName(QStringLiteral("extendMinutes"));
    extendMinutes_->setRange(1, 1440);
    extendMinutes_->setValue(15);
    extendMinutes_->setSuffix(tr(" min"));
    extend_->setObjectName(QStringLiteral("extendButton"));
    destroy_->setObjectName(QStringLiteral("destroyButton"));
    copyId_->setObjectName(QStringLiteral("copyIdButton"));
    command_->setObjectName(QStringLiteral("commandBox"));
    command_->setPlaceholderText(
        tr("Command to run in the sandbox as its user (sh -c), e.g. ls -la"));
    run_->setObjectName(QStringLiteral("runButton"));
    output_->setObjectName(QStringLiteral("commandOutput"));
    output_->setReadOnly(true);
    output_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    output_->setMaximumBlockCount(2000);

    QFont big = title_->font();
    big.setPointSizeF(big.pointSizeF() * 1.3);
    big.setBold(true);
    title_->setFont(big);

    auto *actions = new QHBoxLayout;
    actions->addWidget(title_, 1);
    actions->addWidget(extendMinutes_);
    actions->addWidget(extend_);
    actions->addWidget(copyId_);
    actions->addWidget(destroy_);

    auto *tabs = new QTabWidget(this);
    tabs->addTab(log_, tr("Command log"));
    tabs->addTab(console_, tr("Serial console"));

    auto *commandRow = new QHBoxLayout;
    commandRow->addWidget(command_, 1);
    commandRow->addWidget(run_);

    auto *layout = new QVBoxLayout(this);
    layout->addLayout(actions);
    layout->addWidget(facts_);
    layout->addWidget(message_);
    layout->addWidget(tabs, 3);
    layout->addLayout(commandRow);
    layout->addWidget(output_, 1);

    connect(extend_, &QPushButton::clicked, this, &SandboxDetail::extend);
    connect(destroy_, &QPushButton::clicked, this, &SandboxDetail::confirmDestroy);
    connect(copyId_, &QPushButton::clicked, this,
            [this] { QApplication::clipboard()->setText(id_); });
    connect(run_, &QPushButton::clicked, this, &SandboxDetail::runCommand);
    connect(command_, &QLineEdit::returnPressed, this, &SandboxDetail::runCommand);
    connect(service_, &SandboxService::sandboxChanged, this, [this](const QString &id) {
        if (id == id_)
            refresh();
    });
    connect(service_, &SandboxService::liveTicked, this, [this] {
        if (!id_.isEmpty())
            refresh(); // its cost and time left
    });
    setSandbox({});
}

void SandboxDetail::setSandbox(const QString &id) {
    if (id != id_) {
        output_->clear();
        message_->clear();
    }
    id_ = id;
    log_->setSandbox(id);
    refresh();
}

void SandboxDetail::refresh() {
    const auto rec = id_.isEmpty() ? std::nullopt : service_->store()->sandbox(id_);
    const bool live = rec && isLive(rec->status);
    const bool running = rec && rec->status == SandboxStatus::Running;
    for (QWidget *w : {static_cast<QWidget *>(extend_), static_cast<QWidget *>(extendMinutes_),
                       static_cast<QWidget *>(destroy_)})
        w->setEnabled(live);
    copyId_->setEnabled(rec.has_value());
    command_->setEnabled(running);
    run_->setEnabled(running);
    if (!rec) {
        title_->setText(tr("Select a sandbox"));
        facts_->clear();
        console_->follow({});
        return;
    }
    title_->setText(rec->name.isEmpty() ? rec->id
                                        : QStringLiteral("%1 — %2").arg(rec->name, rec->id));
    QString facts =
        tr("%1, %2, network %3 · created %4 · expires %5 · spend %6")
            .arg(statusName(rec->status), rec->size, rec->network, timeText(rec->createdAt),
                 timeText(rec->expiresAt), moneyText(rec->costMicros));
    if (!rec->statusReason.isEmpty())
        facts += QStringLiteral(" · ") + rec->statusReason;
    facts_->setText(facts);
    // The engine knows the console of a VM it runs; an ended sandbox's
    // folder is gone, and the pane says so.
    const auto info = service_->engine()->sandbox(id_);
    console_->follow(info ? info->consoleLog
                          : service_->engine()->config().dataDir +
                                QStringLiteral("/sandboxes/%1/console.log").arg(id_));
}

void SandboxDetail::say(const QString &text, bool error) {
    message_->setStyleSheet(error ? QStringLiteral("color: #b3261e") : QString());
    message_->setText(text);
}

void SandboxDetail::extend() {
    const auto rec = service_->store()->sandbox(id_);
    if (!rec)
        return;
    auto r = service_->extend(rec->accountId, id_, extendMinutes_->value());
    if (!r)
        say(r.error().message, true);
    else
        say(tr("Extended by %1 minutes: expires %2")
                .arg(extendMinutes_->value())
                .arg(timeText(r->expiresAt)));
}

void SandboxDetail::confirmDestroy() {
    const QString id = id_;
    auto *box = new QMessageBox(QMessageBox::Warning, tr("Destroy sandbox"),
                                tr("Destroy %1? Its VM and disk are deleted; whatever runs in it "
                                   "stops now.")
                                    .arg(id),
                                QMessageBox::Yes | QMessageBox::Cancel, this);
    box->setObjectName(QStringLiteral("confirmDestroy"));
    box->setDefaultButton(QMessageBox::Cancel);
    box->setAttribute(Qt::WA_DeleteOnClose);
    connect(box, &QMessageBox::finished, this, [this, box, id] {
        if (box->standardButton(box->clickedButton()) != QMessageBox::Yes)
            return;
        const auto rec = service_->store()->sandbox(id);
        if (!rec)
            return;
        say(tr("Destroying %1…").arg(id));
        service_->destroy(rec->accountId, id).then(this, [this, id](Result<SandboxRecord> r) {
            if (id == id_)
                say(r ? tr("%1 is %2.").arg(id, statusName(r->status)) : r.error().message, !r);
        });
    });
    box->open();
}

void SandboxDetail::runCommand() {
    const QString command = command_->text().trimmed();
    const auto rec = service_->store()->sandbox(id_);
    if (command.isEmpty() || !rec)
        return;
    ExecRequest request;
    request.command = command;
    const QString id = id_;
    output_->appendPlainText(QStringLiteral("$ ") + command);
    run_->setEnabled(false);
    service_->exec(rec->accountId, id, request).then(this, [this, id](Result<ExecResult> r) {
        run_->setEnabled(true);
        if (id != id_)
            return; // another sandbox is shown now; the log has it
        if (!r) {
            output_->appendPlainText(tr("failed: %1").arg(r.error().message));
            return;
        }
        if (!r->stdoutData.isEmpty())
            output_->appendPlainText(QString::fromUtf8(r->stdoutData).trimmed());
        if (!r->stderrData.isEmpty())
            output_->appendPlainText(QString::fromUtf8(r->stderrData).trimmed());
        output_->appendPlainText(tr("[exit %1, %2%3]")
                                     .arg(r->exitCode)
                                     .arg(execDurationText(r->durationMs))
                                     .arg(r->truncated ? tr(", output truncated") : QString()));
    });
    command_->clear();
}

} // namespace sandcastle::ui
