#include "errors.h"

namespace sandcastle {

QString kindName(EngineError::Kind kind) {
    switch (kind) {
    case EngineError::Kind::InvalidArgument:
        return QStringLiteral("invalid_argument");
    case EngineError::Kind::NotFound:
        return QStringLiteral("not_found");
    case EngineError::Kind::Conflict:
        return QStringLiteral("conflict");
    case EngineError::Kind::PermissionDenied:
        return QStringLiteral("permission_denied");
    case EngineError::Kind::TooLarge:
        return QStringLiteral("too_large");
    case EngineError::Kind::NoSpace:
        return QStringLiteral("no_space");
    case EngineError::Kind::Unavailable:
        return QStringLiteral("unavailable");
    case EngineError::Kind::Timeout:
        return QStringLiteral("timeout");
    case EngineError::Kind::QuotaExceeded:
        return QStringLiteral("quota_exceeded");
    case EngineError::Kind::NoCredit:
        return QStringLiteral("no_credit");
    case EngineError::Kind::Internal:
        break;
    }
    return QStringLiteral("internal");
}

} // namespace sandcastle
