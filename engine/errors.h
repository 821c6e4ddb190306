// Typed engine errors. Every failure the engine reports carries a kind (the
// API layer maps kinds to HTTP statuses in one place) and a message that
// says what happened and what to do about it.
#pragma once

#include <QString>

#include <expected>

namespace sandcastle {

struct EngineError {
    enum class Kind {
        InvalidArgument,  // the caller asked for something malformed
        NotFound,         // no such sandbox, file or directory
        Conflict,         // the sandbox is not in a state that allows this
        PermissionDenied, // the guest user may not touch that path
        TooLarge,         // a file or payload beyond the documented limit
        NoSpace,          // the sandbox's disk is full
        Unavailable,      // hypervisor, image or guest agent not ready
        Timeout,          // the guest did not answer in time
        QuotaExceeded,    // the account's cap of live sandboxes is reached
        NoCredit,         // the account's prepaid credit is used up
        Internal,         // a bug or an unexpected host failure
    };
    Kind kind = Kind::Internal;
    QString message;
};

template <typename T> using Result = std::expected<T, EngineError>;

inline std::unexpected<EngineError> fail(EngineError::Kind kind, const QString &message) {
    return std::unexpected(EngineError{kind, message});
}

/// Short machine-readable name of a kind, e.g. "not_found".
QString kindName(EngineError::Kind kind);

} // namespace sandcastle
