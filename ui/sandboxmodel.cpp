#include "sandboxmodel.h"

#include "format.h"
#include "service/sandboxservice.h"

namespace sandcastle::ui {

namespace {
// The "all" filter shows this many of the newest; the record keeps more.
constexpr int kHistory = 500;
} // namespace

SandboxModel::SandboxModel(SandboxService *service, QObject *parent)
    : QAbstractTableModel(parent)
    , service_(service) {
    connect(service_, &SandboxService::sandboxChanged, this, &SandboxModel::onChanged);
    connect(service_, &SandboxService::liveTicked, this, &SandboxModel::onTicked);
    clock_.setInterval(1000);
    connect(&clock_, &QTimer::timeout, this, [this] {
        if (!rows_.isEmpty())
            emit dataChanged(index(0, Age), index(rows_.size() - 1, TimeLeft), {Qt::DisplayRole});
    });
    clock_.start();
    reload();
}

void SandboxModel::setFilter(Filter filter) {
    if (filter == filter_)
        return;
    filter_ = filter;
    reload();
}

void SandboxModel::reload() {
    beginResetModel();
    rows_.clear();
    for (const SandboxRecord &r : service_->store()->recentSandboxes(kHistory)) {
        if (shown(r))
            rows_.append(r);
    }
    endResetModel();
    announceLiveCount();
}

bool SandboxModel::shown(const SandboxRecord &r) const {
    return filter_ == All || isLive(r.status);
}

void SandboxModel::onChanged(const QString &id) {
    const auto rec = service_->store()->sandbox(id);
    const int row = rowOf(id);
    if (rec && shown(*rec)) {
        if (row >= 0) {
            rows_[row] = *rec;
            emit dataChanged(index(row, 0), index(row, ColumnCount - 1));
        } else {
            // A new sandbox is the newest: it goes on top.
            beginInsertRows({}, 0, 0);
            rows_.prepend(*rec);
            endInsertRows();
        }
    } else if (row >= 0) {
        beginRemoveRows({}, row, row);
        rows_.removeAt(row);
        endRemoveRows();
    }
    announceLiveCount();
}

void SandboxModel::onTicked() {
    // One read for every live row, whatever their number: a query per
    // sandbox per second would load the thread that serves the API.
    const auto live = service_->store()->liveSandboxes();
    if (!live)
        return;
    for (const SandboxRecord &r : *live) {
        if (const int row = rowOf(r.id); row >= 0)
            rows_[row] = r;
    }
    if (!rows_.isEmpty())
        emit dataChanged(index(0, 0), index(rows_.size() - 1, ColumnCount - 1));
    if (const int count = int(live->size()); count != lastLive_)
        emit liveCountChanged(lastLive_ = count);
}

int SandboxModel::rowOf(const QString &id) const {
    for (int i = 0; i < rows_.size(); ++i) {
        if (rows_.at(i).id == id)
            return i;
    }
    return -1;
}

std::optional<SandboxRecord> SandboxModel::record(int row) const {
    if (row < 0 || row >= rows_.size())
        return std::nullopt;
    return rows_.at(row);
}

void SandboxModel::announceLiveCount() {
    const int live = liveCount();
    if (live != lastLive_)
        emit liveCountChanged(lastLive_ = live);
}

int SandboxModel::liveCount() const {
    // Across filters: the tray and status bar count what holds a VM.
    return int(service_->store()->liveSandboxes().value_or(QList<SandboxRecord>()).size());
}

int SandboxModel::rowCount(const QModelIndex &parent) const {
    return parent.isValid() ? 0 : int(rows_.size());
}

int SandboxModel::columnCount(const QModelIndex &parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant SandboxModel::data(const QModelIndex &index, int role) const {
    if (!index.isValid() || index.row() >= rows_.size())
        return {};
    const SandboxRecord &r = rows_.at(index.row());
    if (role == IdRole)
        return r.id;
    if (role == Qt::DecorationRole && index.column() == Status)
        return statusIcon(r.status);
    if (role == Qt::ToolTipRole && index.column() == Status && !r.statusReason.isEmpty())
        return plainTip(r.statusReason);
    if (role == Qt::TextAlignmentRole && index.column() >= Age)
        return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role != Qt::DisplayRole)
        return {};
    const qint64 now = nowMs();
    switch (index.column()) {
    case Name:
        return r.name.isEmpty() ? QStringLiteral("-") : r.name;
    case Id:
        return r.id;
    case Size:
        return QStringLiteral("%1 (%2 vCPU, %3 MiB)").arg(r.size).arg(r.vcpus).arg(r.memoryMiB);
    case Status:
        // A create says what it waits on ("creating: booting the kernel").
        if (r.status == SandboxStatus::Creating && !r.statusReason.isEmpty())
            return statusName(r.status) + QStringLiteral(": ") + r.statusReason;
        return statusName(r.status);
    case Age:
        return durationText((r.endedAt ? r.endedAt : now) - r.createdAt);
    case TimeLeft:
        return isLive(r.status) ? durationText(r.expiresAt - now) : QStringLiteral("-");
    case Spend:
        return moneyText(r.costMicros);
    }
    return {};
}

QVariant SandboxModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    static const QStringList names = {tr("Name"), tr("Id"),        tr("Size"), tr("Status"),
                                      tr("Age"),  tr("Time left"), tr("Spend")};
    return names.value(section);
}

} // namespace sandcastle::ui
