#include "settingsview.h"

#include "guestimage.h"
#include "imagebuilder.h"
#include "service/sandboxservice.h"

#include <QDateTime>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>

namespace sandcastle::ui {

namespace {
// Plain text fields on purpose: the rules live in Settings::set, and the
// window shows its refusals rather than a second set of rules.
const QList<std::pair<QString, QString>> kShown = {
    {QStringLiteral("port"), QStringLiteral("API port")},
    {QStringLiteral("max_live_sandboxes"), QStringLiteral("Live sandboxes per account")},
    {QStringLiteral("default_size"), QStringLiteral("Default size")},
    {QStringLiteral("default_timeout_minutes"), QStringLiteral("Default lifetime (minutes)")},
    {QStringLiteral("libvirt_uri"), QStringLiteral("libvirt URI")},
};
} // namespace

SettingsView::SettingsView(SandboxService *service, QWidget *parent)
    : QWidget(parent)
    , service_(service)
    , message_(new QLabel(this))
    , builder_(new ImageBuilder(this))
    , rebuild_(new QPushButton(tr("Rebuild guest image"), this))
    , progress_(new QProgressBar(this))
    , imageStatus_(new QLabel(this))
    , imageAge_(new QLabel(this)) {
    auto *settingsBox = new QGroupBox(tr("Service settings"), this);
    auto *form = new QFormLayout(settingsBox);
    for (const auto &[key, label] : kShown) {
        auto *edit = new QLineEdit(settingsBox);
        edit->setObjectName(QStringLiteral("setting_") + key);
        const auto described = Settings::describe();
        for (const auto &[k, help] : described) {
            if (k == key)
                edit->setToolTip(help);
        }
        fields_.insert(key, edit);
        form->addRow(label, edit);
    }
    auto *save = new QPushButton(tr("Save"), settingsBox);
    save->setObjectName(QStringLiteral("saveSettingsButton"));
    message_->setTextFormat(Qt::PlainText); // errors quote what was typed
    message_->setObjectName(QStringLiteral("settingsMessage"));
    message_->setWordWrap(true);
    form->addRow(save, message_);

    auto *imageBox = new QGroupBox(tr("Guest image"), this);
    rebuild_->setObjectName(QStringLiteral("rebuildImageButton"));
    progress_->setObjectName(QStringLiteral("imageProgress"));
    progress_->setRange(0, 100);
    progress_->setValue(0);
    imageStatus_->setObjectName(QStringLiteral("imageStatus"));
    imageStatus_->setWordWrap(true);
    imageStatus_->setText(tr("A cached image is checked in seconds; a full build takes a few "
                             "minutes, needs root, and downloads about 400 MB."));
    imageAge_->setObjectName(QStringLiteral("imageAge"));
    imageAge_->setTextFormat(Qt::PlainText);
    imageAge_->setWordWrap(true);
    auto *imageLayout = new QVBoxLayout(imageBox);
    imageLayout->addWidget(imageAge_);
    auto *row = new QHBoxLayout;
    row->addWidget(rebuild_);
    row->addWidget(progress_, 1);
    imageLayout->addLayout(row);
    imageLayout->addWidget(imageStatus_);

    auto *layout = new QVBoxLayout(this);
    layout->addWidget(settingsBox);
    layout->addWidget(imageBox);
    layout->addStretch(1);

    connect(save, &QPushButton::clicked, this, &SettingsView::save);
    connect(rebuild_, &QPushButton::clicked, this, &SettingsView::rebuildImage);
    connect(builder_, &ImageBuilder::progress, this, [this](int percent, const QString &line) {
        progress_->setValue(percent);
        imageStatus_->setText(line);
    });
    connect(builder_, &ImageBuilder::finished, this, [this](bool ok, const QString &message) {
        rebuild_->setEnabled(true);
        imageStatus_->setStyleSheet(ok ? QString() : QStringLiteral("color: #b3261e"));
        imageStatus_->setText(message);
        showImageAge();
    });
    load();
    showImageAge();
}

void SettingsView::showEvent(QShowEvent *event) {
    QWidget::showEvent(event);
    showImageAge(); // it ages, and `sandcastle image update` may have run meanwhile
}

void SettingsView::showImageAge() {
    auto image = GuestImage::load(service_->engine()->config().imageDir);
    if (!image) {
        imageAge_->setStyleSheet(QStringLiteral("color: #b3261e"));
        imageAge_->setText(image.error().message);
        return;
    }
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    const QString warning = image->ageWarning(now);
    imageAge_->setStyleSheet(warning.isEmpty() ? QString() : QStringLiteral("color: #b3261e"));
    QString text = tr("Current image: %1.").arg(image->describe(now));
    if (!warning.isEmpty())
        text += QLatin1Char('\n') + tr("Update it: %1").arg(warning);
    else
        text += QLatin1Char('\n') +
                tr("`%1` (as root) rebuilds it with the archive's current packages, security "
                   "updates included; older than %2 days, the log says so.")
                    .arg(QLatin1String(GuestImage::kUpdateCommand))
                    .arg(GuestImage::kMaxAgeDays);
    imageAge_->setText(text);
}

void SettingsView::load() {
    const Settings stored = Settings::fromStored(service_->store()->settings());
    for (auto it = fields_.begin(); it != fields_.end(); ++it)
        it.value()->setText(stored.value(it.key()));
}

void SettingsView::save() {
    Settings next = Settings::fromStored(service_->store()->settings());
    // Checks every changed field first, so a refusal stores none of them.
    QStringList changed;
    for (const auto &[key, label] : kShown) {
        const QString value = fields_.value(key)->text().trimmed();
        if (value == next.value(key))
            continue;
        if (auto ok = next.set(key, value); !ok) {
            message_->setStyleSheet(QStringLiteral("color: #b3261e"));
            message_->setText(tr("Not saved: %1").arg(ok.error().message));
            return;
        }
        changed << key;
    }
    for (const QString &key : changed) {
        if (auto ok = service_->store()->setSetting(key, next.value(key)); !ok) {
            message_->setStyleSheet(QStringLiteral("color: #b3261e"));
            message_->setText(tr("Not saved: %1").arg(ok.error().message));
            return;
        }
    }
    message_->setStyleSheet({});
    message_->setText(changed.isEmpty()
                          ? tr("Nothing changed.")
                          : tr("Saved %1; takes effect at the next start of the service.")
                                .arg(changed.join(QStringLiteral(", "))));
    load();
}

void SettingsView::rebuildImage() {
    rebuild_->setEnabled(false);
    imageStatus_->setStyleSheet({});
    builder_->start(ImageBuilder::defaultScript(), ImageBuilder::defaultAgent());
}

} // namespace sandcastle::ui
