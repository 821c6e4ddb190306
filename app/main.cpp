// sandcastle: the command line. Until the REST service lands, `demo` shows
// the engine end to end: create a sandbox, run a command, print, destroy.
#include "sandbox/engine.h"

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QTextStream>

#include <cstdio>

using namespace sandcastle;

namespace {

QTextStream out(stdout);
QTextStream err(stderr);

int runDemo(const QString &size, const QString &command) {
    auto *engine = new Engine(EngineConfig::defaults(), qApp);
    if (auto r = engine->open(); !r) {
        err << "sandcastle: " << r.error().message << Qt::endl;
        return 1;
    }
    out << "VMs: " << (engine->accelerated() ? "KVM" : "emulated (" + engine->accelReason() + ")")
        << Qt::endl;
    out << "creating a " << size << " sandbox..." << Qt::endl;
    int status = 1;
    engine->create({size, QStringLiteral("demo")})
        .then(qApp, [=, &status](Result<SandboxInfo> box) {
            if (!box) {
                err << "sandcastle: create failed: " << box.error().message << Qt::endl;
                qApp->exit(1);
                return;
            }
            out << "sandbox " << box->id << " ready in " << box->bootMs << " ms" << Qt::endl;
            out << "$ " << command << Qt::endl;
            engine->exec(box->id, {command, {}, {}, 60000})
                .then(qApp, [=, &status](Result<ExecResult> r) {
                    if (r) {
                        out << r->stdoutData;
                        err << r->stderrData;
                        out << "[exit " << r->exitCode << ", " << r->durationMs << " ms]"
                            << Qt::endl;
                        status = r->exitCode;
                    } else {
                        err << "sandcastle: exec failed: " << r.error().message << Qt::endl;
                    }
                    engine->destroy(box->id).then(qApp, [=](Result<void> d) {
                        out << (d ? "destroyed " : "destroy failed: ")
                            << (d ? box->id : d.error().message) << Qt::endl;
                        qApp->quit();
                    });
                });
        });
    int rc = QCoreApplication::exec();
    return rc != 0 ? rc : status;
}

} // namespace

int main(int argc, char **argv) {
    QCoreApplication app(argc, argv);
    QCoreApplication::setApplicationName(QStringLiteral("sandcastle"));
    QCoreApplication::setApplicationVersion(QStringLiteral(PROJECT_VERSION));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Disposable VM sandboxes for AI agents."));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addPositionalArgument(QStringLiteral("command"), QStringLiteral("demo"));
    QCommandLineOption size(QStringLiteral("size"), QStringLiteral("Sandbox size."),
                            QStringLiteral("size"), QStringLiteral("small"));
    QCommandLineOption run(QStringLiteral("run"), QStringLiteral("Command the demo runs."),
                           QStringLiteral("command"),
                           QStringLiteral("uname -a && id && python3 --version && node --version"));
    parser.addOptions({size, run});
    parser.process(app);

    const QStringList args = parser.positionalArguments();
    if (args.value(0) == QStringLiteral("demo"))
        return runDemo(parser.value(size), parser.value(run));
    parser.showHelp(2);
}
