// sandcastle: the command line. `serve` runs the service; the other
// subcommands administer its record (keys, credit, settings).
#include "commands.h"

#include <QApplication>
#include <QCommandLineParser>

#include <memory>

using namespace sandcastle;

namespace {

/// `serve` opens the window when there is a display and no --headless.
/// Decided on the raw arguments: a QApplication must be made (and a
/// display connected) before the parser runs, and only when wanted.
bool wantsWindow(int argc, char **argv) {
    if (qEnvironmentVariableIsEmpty("DISPLAY") && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY"))
        return false;
    static const QList<QByteArray> takesValue = {"--port",    "--listen", "--name",
                                                 "--account", "--size",   "--run"};
    QByteArray command;
    for (int i = 1; i < argc; ++i) {
        const QByteArray arg(argv[i]);
        if (arg == "--headless")
            return false;
        if (takesValue.contains(arg))
            ++i; // its value is not the command
        else if (!arg.startsWith('-') && command.isEmpty())
            command = arg;
    }
    return command == "serve";
}

} // namespace

int main(int argc, char **argv) {
    bool window = wantsWindow(argc, argv);
    // A display that is named but unreachable (a stale DISPLAY over ssh)
    // must not take the service down: Qt falls back to no screen at all.
    if (window && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY")
                                       ? "xcb;offscreen"
                                       : "wayland;xcb;offscreen");
    std::unique_ptr<QCoreApplication> application =
        window ? std::make_unique<QApplication>(argc, argv)
               : std::make_unique<QCoreApplication>(argc, argv);
    if (window && QGuiApplication::platformName() == QLatin1String("offscreen") &&
        qEnvironmentVariable("QT_QPA_PLATFORM") != QLatin1String("offscreen")) {
        fprintf(stderr, "sandcastle: the display cannot be reached; running without a window\n");
        window = false;
    }
    QCoreApplication &app = *application;
    QCoreApplication::setApplicationName(QStringLiteral("sandcastle"));
    QCoreApplication::setApplicationVersion(QStringLiteral(PROJECT_VERSION));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "Disposable VM sandboxes for AI agents.\n\n"
        "Commands:\n"
        "  serve                      run the service (REST API on 127.0.0.1:8765); with a\n"
        "                             display it also opens the window (--headless: not)\n"
        "  keys create|list|revoke ID API keys\n"
        "  credit show|add AMOUNT     prepaid credit of an account\n"
        "  accounts list|create       accounts (create prints the new account's key)\n"
        "  config list|get|set|unset  settings (`config list` explains each)\n"
        "  image status|update        the guest image's age; update rebuilds it with the\n"
        "                             archive's current packages (security updates; root)\n"
        "  mcp                        MCP over stdio (needs the service running; key in\n"
        "                             AAS_API_KEY, URL in SANDCASTLE_URL)\n"
        "  demo                       boot one sandbox, run --run, destroy it\n\n"
        "The data dir is /var/lib/sandcastle for root, else ~/.local/share/sandcastle;\n"
        "SANDCASTLE_DATA_DIR overrides it. The guest image is in images/ there (not\n"
        "under SANDCASTLE_DATA_DIR); SANDCASTLE_IMAGE_DIR overrides it."));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addPositionalArgument(QStringLiteral("command"), QStringLiteral("see above"));
    QCommandLineOption port(QStringLiteral("port"), QStringLiteral("serve: port (0: any free)."),
                            QStringLiteral("port"));
    QCommandLineOption listen(QStringLiteral("listen"), QStringLiteral("serve: address."),
                              QStringLiteral("address"));
    QCommandLineOption name(QStringLiteral("name"), QStringLiteral("Name of a new key/account."),
                            QStringLiteral("name"));
    QCommandLineOption account(QStringLiteral("account"),
                               QStringLiteral("Account id (default: the first account)."),
                               QStringLiteral("id"));
    QCommandLineOption size(QStringLiteral("size"), QStringLiteral("demo: sandbox size."),
                            QStringLiteral("size"), QStringLiteral("small"));
    QCommandLineOption run(QStringLiteral("run"), QStringLiteral("demo: command to run."),
                           QStringLiteral("command"),
                           QStringLiteral("uname -a && id && python3 --version && node --version"));
    QCommandLineOption headless(QStringLiteral("headless"),
                                QStringLiteral("serve: no window, even with a display."));
    parser.addOptions({port, listen, name, account, size, run, headless});
    parser.process(app);

    const QStringList args = parser.positionalArguments();
    const QString command = args.value(0);
    if (command == QLatin1String("serve")) {
        ServeOptions o;
        if (parser.isSet(port)) {
            bool ok = false;
            o.port = parser.value(port).toInt(&ok);
            if (!ok || o.port < 0 || o.port > 65535) {
                fprintf(stderr, "sandcastle: --port must be 0-65535\n");
                return 2;
            }
        }
        o.listenAddress = parser.value(listen);
        o.window = window;
        if (window)
            QApplication::setDesktopFileName(QStringLiteral("sandcastle"));
        return runServe(o);
    }
    if (command == QLatin1String("mcp"))
        return runMcpStdio();
    if (command == QLatin1String("image"))
        return runImage(args.mid(1));
    if (command == QLatin1String("demo"))
        return runDemo(parser.value(size), parser.value(run));
    if (command == QLatin1String("keys") || command == QLatin1String("credit") ||
        command == QLatin1String("config") || command == QLatin1String("accounts"))
        return runAdmin(command, args.mid(1), parser.value(name), parser.value(account));
    parser.showHelp(2);
}
