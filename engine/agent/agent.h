// The guest agent: one poll loop that serves the host over the virtio port.
// Single-threaded on purpose: every exec, file transfer and the port itself
// are file descriptors in one poll set, so there are no locks and a stuck
// command cannot stall the others.
#pragma once

#include "protocol.h"

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

namespace sandcastle::agent {

constexpr uid_t kSandboxUid = 1000;
constexpr gid_t kSandboxGid = 1000;

class Agent {
public:
    explicit Agent(int portFd);
    ~Agent();
    /// Runs forever; returns only if the port is unusable. `afterReady` runs
    /// once, after the first Ready has been handed to the port.
    int run(const std::function<void()> &afterReady = {});

private:
    struct Exec;
    struct Upload;
    struct Download;

    void handleFrame(const proto::Frame &f);
    void hello(const proto::Frame &f);
    void endSession();
    void cancel(uint32_t id);
    void writeData(const proto::Frame &f);
    void closeUpload(uint32_t id);
    void startExec(const proto::Frame &f);
    void checkStarted(Exec &e);
    Exec *findExec(uint32_t id);
    void openUpload(const proto::Frame &f);
    void openDownload(const proto::Frame &f);
    void pumpDownloads();
    void readOutput(Exec &e, int stream);
    void reapChildren();
    void finishExec(uint64_t serial);
    void checkDeadlines();
    void hostGone();
    void readPort();
    void flushPort();
    void send(proto::Type type, uint32_t id, std::string_view payload = {});
    void sendError(uint32_t id, proto::ErrorCode code, const std::string &message);
    std::string readyPayload() const;
    bool outputRoom() const;

    int port_;
    uint64_t execSerial_ = 0; // names the commands' cgroups and keys execs_
    int sigFd_ = -1;
    bool hostConnected_ = true;
    long long nextPortCheckMs_ = 0;
    uint64_t session_ = 0; // the nonce of the host session we serve; 0: none
    proto::FrameReader reader_;
    std::string out_;
    size_t outPos_ = 0;
    // By serial, not request id: an ended session's commands run on next
    // to the new session's, whose ids may be the same.
    std::map<uint64_t, std::unique_ptr<Exec>> execs_;
    std::map<uint32_t, std::unique_ptr<Upload>> uploads_;
    std::map<uint32_t, std::unique_ptr<Download>> downloads_;
};

} // namespace sandcastle::agent
