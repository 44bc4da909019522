//! The vCPU kick signal (SIGRTMIN): interrupts a vCPU thread blocked in
//! `KVM_RUN` so it sees the stop flag. Its handler does nothing; the
//! interruption (EINTR) is the point. The VM's handle sends it; it needs
//! nothing of the process signals beside it.

use std::io;

extern "C" fn on_kick(_: libc::c_int) {}

/// The signal used to kick vCPU threads out of `KVM_RUN`.
pub fn kick_signal() -> libc::c_int {
    libc::SIGRTMIN()
}

/// Installs the (empty) kick handler. Call before vCPUs start.
pub fn install_kick() -> io::Result<()> {
    super::install(kick_signal(), on_kick)
}
