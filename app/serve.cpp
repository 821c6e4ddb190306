// `sandcastle serve`: the record, the engine, the reconciler and the REST
// API in one process. VMs outlive the process on purpose: the next start
// takes over the ones that still run (and ends the ones that expired).
#include "apiserver.h"
#include "commands.h"
#include "logging.h"
#include "mainwindow.h"
#include "service/sandboxservice.h"

#include <QApplication>
#include <QDateTime>
#include <QDir>
#include <QLockFile>
#include <QSocketNotifier>
#include <QTimer>
#include <QtDebug>

#include <csignal>
#include <cstdio>
#include <unistd.h>

namespace sandcastle {

namespace {

int signalPipe[2] = {-1, -1};

void onSignal(int) {
    const char c = 1;
    [[maybe_unused]] auto n = ::write(signalPipe[1], &c, 1);
}

/// SIGINT and SIGTERM end the event loop (through a pipe: a signal
/// handler may not touch Qt).
void quitOnSignals() {
    if (::pipe(signalPipe) != 0)
        return;
    auto *notifier = new QSocketNotifier(signalPipe[0], QSocketNotifier::Read, qApp);
    QObject::connect(notifier, &QSocketNotifier::activated, qApp, [] {
        char c;
        [[maybe_unused]] auto n = ::read(signalPipe[0], &c, 1);
        qInfo() << "stopping (sandboxes keep running; the next start takes them over)";
        QCoreApplication::quit();
    });
    std::signal(SIGINT, onSignal);
    std::signal(SIGTERM, onSignal);
}

void say(const QString &line) {
    fprintf(stdout, "%s\n", qPrintable(line));
    fflush(stdout);
}

} // namespace

int runServe(const ServeOptions &options) {
    EngineConfig config = EngineConfig::defaults();
    if (!QDir().mkpath(config.dataDir)) {
        fprintf(stderr, "sandcastle: cannot create the data dir %s\n", qPrintable(config.dataDir));
        return 1;
    }
    // One service per data dir: libvirt's embedded driver allows one
    // process per root, and two reconcilers would fight.
    QLockFile lock(config.dataDir + QStringLiteral("/sandcastle.lock"));
    lock.setStaleLockTime(0);
    if (!lock.tryLock(200)) {
        qint64 pid = 0;
        QString host, app;
        lock.getLockInfo(&pid, &host, &app);
        fprintf(stderr, "sandcastle: another Sandcastle (pid %lld) already serves %s\n",
                (long long)pid, qPrintable(config.dataDir));
        return 1;
    }
    installLogging(config.dataDir + QStringLiteral("/sandcastle.log"));

    auto store = Store::open(config.dataDir + QStringLiteral("/sandcastle.db"));
    if (!store) {
        qCritical().noquote() << store.error().message;
        return 1;
    }
    Settings settings = Settings::fromStored((*store)->settings());
    if (options.port >= 0)
        settings.port = options.port;
    if (!options.listenAddress.isEmpty())
        settings.listenAddress = options.listenAddress;
    if (config.libvirtUri.isEmpty())
        config.libvirtUri = settings.libvirtUri;
    config.sandboxDns = settings.sandboxDns;
    config.userNamespaces = settings.sandboxUserNamespaces;
    config.maxBooting = settings.maxBooting;

    QString firstKey;
    // One transaction: a failed read is an error, not "no accounts", and
    // a crash half-way leaves no account without its key.
    auto first =
        (*store)->ensureFirstAccount(QStringLiteral("default"), settings.signupCreditMicros);
    if (!first) {
        qCritical().noquote() << "cannot create the first account:" << first.error().message;
        return 1;
    }
    if (*first) {
        firstKey = (*first)->second;
        qInfo().noquote() << "first start: created account" << (*first)->first.accountId
                          << "and key" << (*first)->first.id;
    }

    Engine engine(config);
    if (auto opened = engine.open(); !opened)
        qCritical().noquote() << "VMs are unavailable until this is fixed (creates answer 503):"
                              << opened.error().message;
    else
        qInfo().noquote()
            << "VMs:"
            << (engine.accelerated()
                    ? QStringLiteral("KVM")
                    : QStringLiteral("emulated, slow (%1)").arg(engine.accelReason()));
    if (!engine.networkProblem().isEmpty())
        qWarning().noquote() << "sandboxes can only be created with network \"none\":"
                             << engine.networkProblem();
    else if (engine.dnsServers().isEmpty())
        qWarning().noquote() << "the host names no IPv4 resolver a sandbox can reach: sandboxes "
                                "get no DNS until `sandcastle config set sandbox_dns ...`";
    // An image that is never rebuilt never gets security updates: say so
    // at the start and then once a day for as long as the service runs.
    const auto warnIfImageOld = [imageDir = config.imageDir] {
        if (auto image = GuestImage::load(imageDir)) {
            const QString warning = image->ageWarning(QDateTime::currentMSecsSinceEpoch());
            if (!warning.isEmpty())
                qWarning().noquote() << warning;
        }
    };
    warnIfImageOld();
    QTimer imageAgeCheck;
    imageAgeCheck.setInterval(24 * 3600 * 1000);
    QObject::connect(&imageAgeCheck, &QTimer::timeout, qApp, warnIfImageOld);
    imageAgeCheck.start();
    SandboxService service(&engine, store->get(), settings);
    api::ApiServer server(&service);
    quitOnSignals();
    // The window lives next to the server and follows the service's
    // signals; closing it asks before anything happens to live sandboxes.
    std::unique_ptr<ui::MainWindow> window;
    if (options.window) {
        QApplication::setQuitOnLastWindowClosed(false);
        window = std::make_unique<ui::MainWindow>(&service);
        window->show();
    }

    service.start().then(qApp, [&](Result<void> started) {
        if (!started)
            qWarning().noquote() << "start-up reconciliation:" << started.error().message;
        auto port = server.start(QHostAddress(settings.listenAddress), quint16(settings.port));
        if (!port) {
            qCritical().noquote() << port.error().message;
            QCoreApplication::exit(1);
            return;
        }
        const QString host = settings.listenAddress.contains(QLatin1Char(':'))
                                 ? QStringLiteral("[%1]").arg(settings.listenAddress)
                                 : settings.listenAddress;
        const QString url = QStringLiteral("http://%1:%2/v1").arg(host).arg(*port);
        say(QStringLiteral("Sandcastle API: ") + url);
        if (window) {
            window->setApiUrl(url);
            if (!firstKey.isEmpty())
                window->showFirstKey(firstKey);
        }
        if (!firstKey.isEmpty()) {
            // Printed once and never logged: only its hash is kept.
            say(QStringLiteral("API key (shown once, keep it): %1").arg(firstKey));
            say(QStringLiteral("  export AAS_API_KEY=%1").arg(firstKey));
        }
        qInfo().noquote() << "ready; log:" << config.dataDir + QStringLiteral("/sandcastle.log");
    });
    return QCoreApplication::exec();
}

} // namespace sandcastle
