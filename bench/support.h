// What the benchmark programs share: summary statistics and waiting for a
// future without polling.
#pragma once

#include <QEventLoop>
#include <QFuture>
#include <QFutureWatcher>
#include <QList>

#include <algorithm>

namespace bench {

struct Stats {
    double median = 0, p95 = 0, min = 0;
};

inline Stats stats(QList<double> v) {
    std::sort(v.begin(), v.end());
    if (v.isEmpty())
        return {};
    return {v[v.size() / 2], v[std::min<qsizetype>(v.size() - 1, qsizetype(v.size() * 0.95))],
            v.first()};
}

/// Waits in an event loop woken by the completion itself: polling (as
/// QTest::qWaitFor does) would add its sleep to every figure.
template <typename T> T await(QFuture<T> f) {
    QEventLoop loop;
    QFutureWatcher<T> watcher;
    QObject::connect(&watcher, &QFutureWatcher<T>::finished, &loop, &QEventLoop::quit);
    watcher.setFuture(f);
    if (!f.isFinished())
        loop.exec();
    return f.result();
}

} // namespace bench
