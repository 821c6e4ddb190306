// Whether this host can run VMs with KVM.
#pragma once

#include <QString>

namespace sandcastle {

struct AccelProbe {
    bool kvm = false;
    QString reason; // why KVM is or is not used, for logs and the GUI
};

/// KVM is used only when /dev/kvm opens, a VM can be created, and the CPU
/// advertises vmx or svm: some hosts expose a /dev/kvm whose guests never
/// boot (seen on this project's CI machines). `SANDCASTLE_ACCEL=tcg`
/// forces emulation, `=kvm` forces KVM.
AccelProbe probeAccel();

} // namespace sandcastle
