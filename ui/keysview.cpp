#include "keysview.h"

#include "format.h"
#include "service/sandboxservice.h"

#include <QApplication>
#include <QClipboard>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

namespace sandcastle::ui {

KeysView::KeysView(SandboxService *service, QWidget *parent)
    : QWidget(parent)
    , service_(service)
    , keys_(new QTableWidget(0, 6, this))
    , name_(new QLineEdit(this))
    , secret_(new QLineEdit(this))
    , secretNote_(new QLabel(this))
    , message_(new QLabel(this)) {
    keys_->setObjectName(QStringLiteral("keysTable"));
    keys_->setHorizontalHeaderLabels(
        {tr("Id"), tr("Prefix"), tr("Name"), tr("Account"), tr("Created"), tr("Revoked")});
    keys_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    keys_->setSelectionBehavior(QAbstractItemView::SelectRows);
    keys_->setSelectionMode(QAbstractItemView::SingleSelection);
    keys_->verticalHeader()->hide();
    keys_->horizontalHeader()->setStretchLastSection(true);
    name_->setObjectName(QStringLiteral("keyName"));
    name_->setPlaceholderText(tr("name of the new key, e.g. my-agent"));
    secret_->setObjectName(QStringLiteral("keySecret"));
    secret_->setReadOnly(true);
    secret_->setPlaceholderText(tr("a new key's secret appears here, once"));
    secretNote_->setWordWrap(true);
    message_->setTextFormat(Qt::PlainText); // errors quote what was typed
    message_->setObjectName(QStringLiteral("keysMessage"));
    message_->setWordWrap(true);

    auto *create = new QPushButton(tr("Create key"), this);
    create->setObjectName(QStringLiteral("createKeyButton"));
    auto *copy = new QPushButton(tr("Copy"), this);
    copy->setObjectName(QStringLiteral("copyKeyButton"));
    auto *revoke = new QPushButton(tr("Revoke selected"), this);
    revoke->setObjectName(QStringLiteral("revokeKeyButton"));

    auto *createRow = new QHBoxLayout;
    createRow->addWidget(name_, 1);
    createRow->addWidget(create);
    auto *secretRow = new QHBoxLayout;
    secretRow->addWidget(secret_, 1);
    secretRow->addWidget(copy);
    auto *layout = new QVBoxLayout(this);
    layout->addLayout(createRow);
    layout->addLayout(secretRow);
    layout->addWidget(secretNote_);
    layout->addWidget(keys_, 1);
    auto *bottom = new QHBoxLayout;
    bottom->addWidget(message_, 1);
    bottom->addWidget(revoke);
    layout->addLayout(bottom);

    connect(create, &QPushButton::clicked, this, &KeysView::create);
    connect(name_, &QLineEdit::returnPressed, this, &KeysView::create);
    connect(copy, &QPushButton::clicked, this,
            [this] { QApplication::clipboard()->setText(secret_->text()); });
    connect(revoke, &QPushButton::clicked, this, &KeysView::revoke);
    refresh();
}

void KeysView::refresh() {
    const QList<KeyRecord> keys = service_->store()->keys();
    keys_->setRowCount(int(keys.size()));
    for (int row = 0; row < keys.size(); ++row) {
        const KeyRecord &k = keys.at(row);
        const QStringList cells = {k.id,
                                   k.prefix + QStringLiteral("…"),
                                   k.name,
                                   k.accountId,
                                   timeText(k.createdAt),
                                   k.revokedAt ? timeText(k.revokedAt) : QString()};
        for (int c = 0; c < cells.size(); ++c)
            keys_->setItem(row, c, new QTableWidgetItem(cells.at(c)));
    }
    keys_->resizeColumnsToContents();
}

void KeysView::showSecret(const QString &secret, const QString &what) {
    secret_->setText(secret);
    secretNote_->setText(tr("%1: shown once. Only its hash is kept, so copy it now.").arg(what));
}

void KeysView::create() {
    const auto accounts = service_->store()->accounts();
    if (accounts.isEmpty())
        return;
    // Keys belong to the first account, as `sandcastle keys create` does.
    const QString name =
        name_->text().trimmed().isEmpty() ? QStringLiteral("window") : name_->text().trimmed();
    auto key = service_->store()->createKey(accounts.first().id, name);
    if (!key) {
        message_->setText(key.error().message);
        return;
    }
    showSecret(key->second, tr("Key %1").arg(key->first.id));
    message_->setText(tr("Created %1.").arg(key->first.id));
    name_->clear();
    refresh();
}

void KeysView::revoke() {
    const int row = keys_->currentRow();
    if (row < 0 || !keys_->item(row, 0)) {
        message_->setText(tr("Select a key to revoke."));
        return;
    }
    auto k = service_->store()->revokeKey(keys_->item(row, 0)->text());
    message_->setText(k ? tr("Revoked %1: requests with it now answer 401.").arg(k->id)
                        : k.error().message);
    refresh();
}

} // namespace sandcastle::ui
