// sandcastle-agent: started by the initramfs as the guest's PID 1.
#include "agent.h"
#include "system.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <unistd.h>

using namespace sandcastle;

int main(int argc, char **argv) {
    if (getpid() == 1)
        agent::initSystem();
    signal(SIGPIPE, SIG_IGN);
    setgroups(0, nullptr); // permission checks as `sandbox` must not see root's groups

    // Tests may name the port device directly (argv[1]); the guest finds it.
    for (;;) {
        std::string path = argc > 1 ? argv[1] : agent::findPort(proto::kPortName);
        int fd = path.empty() ? -1 : open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
            agent::logLine("no port " + std::string(proto::kPortName) + " yet; retrying");
            usleep(200 * 1000);
            continue;
        }
        agent::logLine("ready on " + path);
        agent::Agent a(fd);
        static bool lateDone = false;
        a.run([] {
            if (getpid() == 1 && !lateDone)
                agent::runBootScript("late", false);
            lateDone = true;
        });
        close(fd);
        agent::logLine("port failed; reopening");
        if (getpid() != 1)
            return 1;
    }
}
