// Runs blocking work (libvirt calls, qemu-img) off the Qt event loop.
#pragma once

#include "errors.h"

#include <QFuture>
#include <QObject>
#include <QPromise>
#include <QThreadPool>

#include <QList>

#include <memory>
#include <type_traits>
#include <utility>

namespace sandcastle {

/// Runs `fn` on `pool` and returns a future for its result, which is
/// reported on the calling thread (it must run an event loop). Continue with
/// `future.then(contextObject, ...)`.
///
/// Why not finish the future on the pool thread: in Qt 6.4 a continuation
/// attached by `.then` at the moment another thread finishes the future can
/// run twice, and the second run crashes on a moved-from promise (seen once
/// in 20 concurrent creates: a segfault in reportStarted). Finishing on the
/// caller's thread, through its event queue, always comes after the caller
/// has attached its continuation.
template <typename Fn>
auto runInPool(QThreadPool *pool, Fn fn) -> QFuture<std::invoke_result_t<Fn>> {
    using R = std::invoke_result_t<Fn>;
    auto promise = std::make_shared<QPromise<R>>();
    QFuture<R> future = promise->future();
    promise->start();
    auto *relay = new QObject; // lives in the calling thread
    pool->start([promise, relay, fn = std::move(fn)]() mutable {
        auto result = std::make_shared<R>(fn());
        QMetaObject::invokeMethod(
            relay,
            [promise, relay, result] {
                promise->addResult(std::move(*result));
                promise->finish();
                relay->deleteLater();
            },
            Qt::QueuedConnection);
    });
    return future;
}

/// A future that is already finished with `value`.
template <typename T> QFuture<T> readyFuture(T value) {
    QPromise<T> promise;
    QFuture<T> future = promise.future();
    promise.start();
    promise.addResult(std::move(value));
    promise.finish();
    return future;
}

/// A future that has already failed with `error`.
template <typename T> QFuture<Result<T>> failedFuture(const EngineError &error) {
    return readyFuture<Result<T>>(std::unexpected(error));
}
template <typename T>
QFuture<Result<T>> failedFuture(EngineError::Kind kind, const QString &message) {
    return failedFuture<T>(EngineError{kind, message});
}

/// One result for many waiters. A Qt 6 future takes a single continuation
/// (attaching a second replaces the first), so each waiter gets its own.
template <typename T> class FanOut {
public:
    QFuture<T> wait() {
        auto promise = std::make_shared<QPromise<T>>();
        promise->start();
        waiters_.append(promise);
        return promise->future();
    }
    void finish(const T &value) {
        const auto waiters = std::exchange(waiters_, {});
        for (const auto &p : waiters) {
            p->addResult(value);
            p->finish();
        }
    }

private:
    QList<std::shared_ptr<QPromise<T>>> waiters_;
};

} // namespace sandcastle
