#include "commandlog.h"

#include "format.h"
#include "service/sandboxservice.h"

#include <QHeaderView>

namespace sandcastle::ui {

namespace {
constexpr int kShown = 200;

QString previewOf(const ExecRecord &e) {
    if (!e.error.isEmpty())
        return e.error;
    QString text = e.stdoutPreview;
    if (!e.stderrPreview.isEmpty())
        text += (text.isEmpty() ? QString() : QStringLiteral("\n")) + e.stderrPreview;
    return text.trimmed();
}
} // namespace

CommandLog::CommandLog(SandboxService *service, QWidget *parent)
    : QTableWidget(0, 7, parent)
    , service_(service) {
    setObjectName(QStringLiteral("commandLog"));
    setHorizontalHeaderLabels({tr("Time"), tr("Command"), tr("Cwd"), tr("Env"), tr("Exit"),
                               tr("Duration"), tr("Output")});
    setEditTriggers(NoEditTriggers);
    setSelectionBehavior(SelectRows);
    setWordWrap(false);
    verticalHeader()->hide();
    horizontalHeader()->setStretchLastSection(true);
    auto refreshIfMine = [this](const QString &sandboxId, qint64) {
        if (sandboxId == id_)
            refresh();
    };
    connect(service_, &SandboxService::execStarted, this, refreshIfMine);
    connect(service_, &SandboxService::execFinished, this, refreshIfMine);
}

void CommandLog::setSandbox(const QString &id) {
    id_ = id;
    refresh();
}

void CommandLog::refresh() {
    const QList<ExecRecord> execs =
        id_.isEmpty() ? QList<ExecRecord>() : service_->store()->execs(id_, kShown);
    setRowCount(int(execs.size()));
    for (int row = 0; row < execs.size(); ++row) {
        const ExecRecord &e = execs.at(row);
        const QString exit =
            e.status == QLatin1String("finished") ? QString::number(e.exitCode) : e.status;
        const QString preview = previewOf(e);
        const QStringList cells = {timeText(e.startedAt),
                                   e.command,
                                   e.cwd,
                                   e.envNames.join(QStringLiteral(", ")),
                                   exit,
                                   e.status == QLatin1String("running")
                                       ? QStringLiteral("…")
                                       : execDurationText(e.durationMs),
                                   preview.simplified().left(300)};
        for (int col = 0; col < cells.size(); ++col) {
            auto *item = new QTableWidgetItem(cells.at(col));
            if (col == 1 || col == 6)
                item->setToolTip(plainTip(col == 1 ? e.command : preview.left(4000)));
            setItem(row, col, item);
        }
    }
    resizeColumnsToContents();
}

} // namespace sandcastle::ui
