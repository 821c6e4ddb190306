// sandcastle: the command line. `serve` runs the service; the other
// subcommands administer its record (keys, credit, settings).
#include "commands.h"

#include <QCommandLineParser>
#include <QCoreApplication>

using namespace sandcastle;

int main(int argc, char **argv) {
    QCoreApplication app(argc, argv);
    QCoreApplication::setApplicationName(QStringLiteral("sandcastle"));
    QCoreApplication::setApplicationVersion(QStringLiteral(PROJECT_VERSION));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "Disposable VM sandboxes for AI agents.\n\n"
        "Commands:\n"
        "  serve                      run the service (REST API on 127.0.0.1:8765)\n"
        "  keys create|list|revoke ID API keys\n"
        "  credit show|add AMOUNT     prepaid credit of an account\n"
        "  accounts list|create       accounts (create prints the new account's key)\n"
        "  config list|get|set|unset  settings (`config list` explains each)\n"
        "  mcp                        MCP over stdio (needs the service running; key in\n"
        "                             AAS_API_KEY, URL in SANDCASTLE_URL)\n"
        "  demo                       boot one sandbox, run --run, destroy it\n\n"
        "The data dir is /var/lib/sandcastle for root, else ~/.local/share/sandcastle;\n"
        "SANDCASTLE_DATA_DIR overrides it."));
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
                                QStringLiteral("serve: no window (the default for now)."));
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
        return runServe(o);
    }
    if (command == QLatin1String("mcp"))
        return runMcpStdio();
    if (command == QLatin1String("demo"))
        return runDemo(parser.value(size), parser.value(run));
    if (command == QLatin1String("keys") || command == QLatin1String("credit") ||
        command == QLatin1String("config") || command == QLatin1String("accounts"))
        return runAdmin(command, args.mid(1), parser.value(name), parser.value(account));
    parser.showHelp(2);
}
