#include "createtrace.h"

#include <QStringList>

namespace sandcastle {

QString phaseName(CreatePhase phase) {
    switch (phase) {
    case CreatePhase::Queue:
        return QStringLiteral("queue");
    case CreatePhase::Overlay:
        return QStringLiteral("overlay");
    case CreatePhase::HostFilter:
        return QStringLiteral("host filter");
    case CreatePhase::Passt:
        return QStringLiteral("passt");
    case CreatePhase::DomainStart:
        return QStringLiteral("domain start");
    case CreatePhase::Kernel:
        return QStringLiteral("first console line");
    case CreatePhase::Agent:
        return QStringLiteral("agent hello");
    }
    return {};
}

QString phaseDescription(CreatePhase phase) {
    switch (phase) {
    case CreatePhase::Queue:
        return QStringLiteral("waiting for a boot slot");
    case CreatePhase::Overlay:
        return QStringLiteral("creating the disk");
    case CreatePhase::HostFilter:
        return QStringLiteral("checking the host filter");
    case CreatePhase::Passt:
        return QStringLiteral("starting the network");
    case CreatePhase::DomainStart:
        return QStringLiteral("starting the VM");
    case CreatePhase::Kernel:
        return QStringLiteral("booting the kernel");
    case CreatePhase::Agent:
        return QStringLiteral("waiting for the agent");
    }
    return {};
}

void CreateTrace::enter(CreatePhase phase) {
    QMutexLocker lock(&mutex_);
    steps_.append({phase, clock_.elapsed()});
}

CreatePhase CreateTrace::current() const {
    QMutexLocker lock(&mutex_);
    return steps_.isEmpty() ? CreatePhase::Queue : steps_.last().phase;
}

qint64 CreateTrace::inPhaseMs() const {
    QMutexLocker lock(&mutex_);
    return clock_.elapsed() - (steps_.isEmpty() ? 0 : steps_.last().startMs);
}

QString CreateTrace::summary() const {
    QMutexLocker lock(&mutex_);
    QStringList parts;
    const qint64 now = clock_.elapsed();
    for (int i = 0; i < steps_.size(); ++i) {
        const qint64 end = i + 1 < steps_.size() ? steps_[i + 1].startMs : now;
        parts << QStringLiteral("%1 %2 ms")
                     .arg(phaseName(steps_[i].phase))
                     .arg(end - steps_[i].startMs);
    }
    return parts.join(QStringLiteral(", "));
}

} // namespace sandcastle
