// Runs blocking work (libvirt calls, qemu-img) off the Qt event loop.
#pragma once

#include <QFuture>
#include <QPromise>
#include <QThreadPool>

#include <memory>
#include <type_traits>

namespace sandcastle {

/// Runs `fn` on `pool` and returns a future for its result. Continue with
/// `future.then(contextObject, ...)` to come back to the caller's thread.
template <typename Fn>
auto runInPool(QThreadPool *pool, Fn fn) -> QFuture<std::invoke_result_t<Fn>> {
    using R = std::invoke_result_t<Fn>;
    auto promise = std::make_shared<QPromise<R>>();
    QFuture<R> future = promise->future();
    promise->start();
    pool->start([promise, fn = std::move(fn)]() mutable {
        promise->addResult(fn());
        promise->finish();
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

} // namespace sandcastle
