// The sandbox table: every account's sandboxes from the record, kept up to
// date by the service's sandboxChanged signal (a REST create shows up as
// soon as the service records it). A one-second timer only repaints the
// columns that move with the clock (age, time left).
#pragma once

#include "store/records.h"

#include <QAbstractTableModel>
#include <QTimer>

namespace sandcastle {
class SandboxService;
}

namespace sandcastle::ui {

class SandboxModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Name, Id, Size, Status, Age, TimeLeft, Spend, ColumnCount };
    enum Filter { Live, All };
    /// The sandbox id of a row, under this role in every column.
    static constexpr int IdRole = Qt::UserRole + 1;

    explicit SandboxModel(SandboxService *service, QObject *parent = nullptr);

    void setFilter(Filter filter);
    Filter filter() const { return filter_; }
    /// Row of a sandbox, or -1.
    int rowOf(const QString &id) const;
    std::optional<SandboxRecord> record(int row) const;
    int liveCount() const;

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

signals:
    void liveCountChanged(int count);

private:
    void reload();
    void onChanged(const QString &id);
    void onTicked();
    bool shown(const SandboxRecord &r) const;
    /// Emits liveCountChanged when the count moved since the last time.
    void announceLiveCount();

    SandboxService *service_;
    Filter filter_ = Live;
    QList<SandboxRecord> rows_; // newest first
    QTimer clock_;
    int lastLive_ = -1;
};

} // namespace sandcastle::ui
