// The phases of one create, with their times: what a create is waiting
// for right now (shown as the sandbox's status_reason and in the window)
// and, when it is done, how long each phase took (one line in the log). A
// create that stalls says where.
#pragma once

#include <QElapsedTimer>
#include <QList>
#include <QMutex>
#include <QString>

namespace sandcastle {

enum class CreatePhase {
    Queue,       // waiting for a boot slot (at most so many VMs boot at once)
    Overlay,     // the copy-on-write disk
    HostFilter,  // the host's nftables filter checked or loaded again
    Passt,       // the sandbox's network process
    DomainStart, // libvirt defines and starts QEMU (may probe QEMU first)
    Kernel,      // QEMU runs; the guest kernel boots until its first console line
    Agent,       // the guest's userspace starts, until the agent says hello
};

/// Short name for logs ("domain start").
QString phaseName(CreatePhase phase);
/// What a user reads while the create waits on it ("booting the kernel").
QString phaseDescription(CreatePhase phase);

class CreateTrace {
public:
    CreateTrace() { clock_.start(); }

    /// Starts `phase`, ending the one before. Callable from any thread.
    void enter(CreatePhase phase);
    CreatePhase current() const;
    qint64 elapsedMs() const { return clock_.elapsed(); }
    qint64 inPhaseMs() const;
    /// "overlay 41 ms, passt 20 ms, ..., agent hello 812 ms (so far)".
    QString summary() const;

private:
    struct Step {
        CreatePhase phase;
        qint64 startMs;
    };
    QElapsedTimer clock_;
    mutable QMutex mutex_;
    QList<Step> steps_;
};

} // namespace sandcastle
