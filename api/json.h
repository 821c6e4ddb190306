// The API's JSON shapes, and the one mapping from engine errors to HTTP.
#pragma once

#include "errors.h"
#include "guest/exec.h"
#include "guestimage.h"
#include "service/settings.h"
#include "store/records.h"

#include <QJsonObject>

namespace sandcastle {
class Engine;
}

namespace sandcastle::api {

QJsonObject sandboxJson(const SandboxRecord &record);
QJsonObject execResultJson(const ExecResult &result);
QJsonObject execRecordJson(const ExecRecord &record);
QJsonObject accountJson(const AccountRecord &account, int live, const Settings &settings);
QJsonObject sizesJson(const Settings &settings);
/// GET /v1/system: the version, the accelerator ("kvm", "tcg"; null when
/// VMs are unavailable) and the guest image new sandboxes get (null when
/// there is none).
QJsonObject systemJson(const QString &version, const QString &accelerator,
                       const Result<GuestImage> &image, qint64 nowMs);
/// The same for this process and `engine`, now (reads the image's manifest,
/// so an update made while the service runs shows at once).
QJsonObject systemJson(const Engine &engine);

/// RFC 3339 UTC with a Z, as the API writes every time.
QString timestamp(qint64 ms);

struct HttpError {
    int status = 500;
    QString type; // the error envelope's `type`
};
HttpError httpErrorFor(EngineError::Kind kind);
/// {"error": {"type": ..., "message": ...}}
QJsonObject errorJson(const QString &type, const QString &message);

} // namespace sandcastle::api
