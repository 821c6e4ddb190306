// API overhead: create, exec `true` and delete through the REST API (the
// real `sandcastle serve`, over real sockets) against the same operations
// on the engine directly, in one run; then 20 sandboxes at once, each
// running execs back to back: total execs per second and latency.
// Usage: sudo build/bench/bench_api [--rounds 3] [--execs 100] [--parallel 20] [--per-box 20]
#include "../tests/support/service.h"
#include "sandbox/engine.h"
#include "support.h"

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFutureWatcher>
#include <QTemporaryDir>

#include <algorithm>
#include <cstdio>
#include <functional>

using namespace sandcastle;
using namespace testing;
using bench::await;
using bench::Stats;
using bench::stats;

namespace {

Reply finished(QNetworkReply *reply) {
    QEventLoop loop;
    QObject::connect(reply, &QNetworkReply::finished, &loop, &QEventLoop::quit);
    if (!reply->isFinished())
        loop.exec();
    return Http::wait(reply);
}
void line(const char *what, Stats direct, Stats api) {
    printf("%-22s engine %8.1f ms (p95 %8.1f)   api %8.1f ms (p95 %8.1f)   ratio %.2f\n", what,
           direct.median, direct.p95, api.median, api.p95, api.median / direct.median);
}
QTemporaryDir *dataDir(const char *tag) {
    // Engine::open() opens the folder to QEMU's user.
    return new QTemporaryDir(QStringLiteral("/tmp/sc-bench-%1-XXXXXX").arg(tag));
}

} // namespace

int main(int argc, char **argv) {
    QCoreApplication app(argc, argv);
    QCommandLineParser p;
    QCommandLineOption rounds("rounds", "create/delete rounds", "n", "3");
    QCommandLineOption execs("execs", "execs per round", "n", "100");
    QCommandLineOption parallel("parallel", "sandboxes at once", "n", "20");
    QCommandLineOption perBox("per-box", "execs per sandbox in the parallel run", "n", "20");
    p.addOptions({rounds, execs, parallel, perBox});
    p.addHelpOption();
    p.process(app);
    const int nRounds = p.value(rounds).toInt(), nExecs = p.value(execs).toInt();

    // The engine directly.
    QList<double> eCreate, eExec, eDelete;
    {
        std::unique_ptr<QTemporaryDir> dir(dataDir("engine"));
        EngineConfig config = EngineConfig::defaults();
        config.dataDir = dir->path();
        Engine engine(config);
        if (auto r = engine.open(); !r) {
            fprintf(stderr, "engine: %s\n", qPrintable(r.error().message));
            return 1;
        }
        for (int i = 0; i < nRounds; ++i) {
            QElapsedTimer t;
            t.start();
            auto box = await(engine.create({QStringLiteral("small"), {}, {}}));
            eCreate << t.elapsed();
            for (int j = 0; j < nExecs; ++j) {
                t.restart();
                await(engine.exec(box->id, {QStringLiteral("true"), {}, {}, 60000}));
                eExec << t.nsecsElapsed() / 1e6;
            }
            t.restart();
            await(engine.destroy(box->id));
            eDelete << t.elapsed();
        }
    }

    // The same through the REST API.
    std::unique_ptr<QTemporaryDir> dir(dataDir("api"));
    Service service(dir->path());
    if (!service.start()) {
        fprintf(stderr, "the service did not start\n");
        return 1;
    }
    Http http(service.base(), service.key());
    QList<double> aCreate, aExec, aDelete;
    for (int i = 0; i < nRounds; ++i) {
        QElapsedTimer t;
        t.start();
        Reply created = finished(http.send("POST", QStringLiteral("/sandboxes"), QByteArray("{}")));
        aCreate << t.elapsed();
        if (created.status != 201) {
            fprintf(stderr, "create through the API failed: %d %s\n", created.status,
                    created.body.constData());
            return 1;
        }
        const QString id = created.json.value("id").toString();
        for (int j = 0; j < nExecs; ++j) {
            t.restart();
            finished(http.send("POST", QStringLiteral("/sandboxes/%1/exec").arg(id),
                               QByteArray(R"({"command":"true"})")));
            aExec << t.nsecsElapsed() / 1e6;
        }
        t.restart();
        finished(http.send("DELETE", QStringLiteral("/sandboxes/") + id));
        aDelete << t.elapsed();
    }
    printf("TCG/KVM as the engine finds it; %d rounds, %d execs each\n", nRounds, nExecs);
    line("create", stats(eCreate), stats(aCreate));
    line("exec true", stats(eExec), stats(aExec));
    line("delete", stats(eDelete), stats(aDelete));

    // Many at once.
    const int n = p.value(parallel).toInt(), k = p.value(perBox).toInt();
    // One client per sandbox: a QNetworkAccessManager keeps at most six
    // connections per host, which would queue the other requests.
    std::vector<std::unique_ptr<Http>> clients;
    for (int i = 0; i < n; ++i)
        clients.push_back(std::make_unique<Http>(service.base(), service.key()));
    QElapsedTimer boot;
    boot.start();
    QList<QNetworkReply *> creates;
    for (int i = 0; i < n; ++i)
        creates << clients[i]->send("POST", QStringLiteral("/sandboxes"), QByteArray("{}"));
    QStringList ids;
    for (QNetworkReply *r : creates)
        ids << finished(r).json.value("id").toString();
    printf("%d sandboxes created at once in %.1f s\n", n, boot.elapsed() / 1000.0);
    QList<double> latencies;
    QHash<int, int> done;
    int inFlight = 0;
    QEventLoop loop;
    std::function<void(int)> launch = [&](int box) {
        auto *clock = new QElapsedTimer;
        clock->start();
        QNetworkReply *r =
            clients[box]->send("POST", QStringLiteral("/sandboxes/%1/exec").arg(ids[box]),
                               QByteArray(R"({"command":"true"})"));
        ++inFlight;
        QObject::connect(r, &QNetworkReply::finished, &loop, [&, r, box, clock] {
            latencies << clock->nsecsElapsed() / 1e6;
            delete clock;
            r->deleteLater();
            --inFlight;
            if (++done[box] < k)
                launch(box);
            else if (inFlight == 0)
                loop.quit();
        });
    };
    QElapsedTimer wall;
    wall.start();
    for (int i = 0; i < n; ++i)
        launch(i);
    loop.exec();
    const Stats s = stats(latencies);
    printf("%d sandboxes x %d execs: %.1f execs/s in all, latency median %.1f ms, p95 %.1f ms\n", n,
           k, latencies.size() / (wall.elapsed() / 1000.0), s.median, s.p95);
    for (const QString &id : ids)
        http.call("DELETE", QStringLiteral("/sandboxes/") + id);
    service.terminate();
    return 0;
}
