// `sandcastle demo`: the engine end to end without the service or the
// record: create a sandbox, run a command, print, destroy.
#include "commands.h"
#include "sandbox/engine.h"

#include <QCoreApplication>
#include <QTextStream>

namespace sandcastle {

namespace {

QTextStream out(stdout);
QTextStream err(stderr);

} // namespace

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
    engine->create({size, QStringLiteral("demo"), {}})
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

} // namespace sandcastle
