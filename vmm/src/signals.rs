//! Process signals the VMM reacts to.
//!
//! - SIGINT, SIGTERM, SIGHUP: stop the VM cleanly; the run returns
//!   `ExitReason::Signal` and the VMM exits with 128+N.
//! - SIGUSR1, when the run saves snapshots: pause the VM and write one.
//! - The vCPU kick signal (SIGRTMIN): interrupts a vCPU thread blocked in
//!   `KVM_RUN` so it sees the stop flag. Its handler does nothing; the
//!   interruption (EINTR) is the point.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static STOP_REQUESTED: AtomicI32 = AtomicI32::new(0);
static SNAPSHOT_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(signum: libc::c_int) {
    STOP_REQUESTED.store(signum, Ordering::SeqCst);
}

extern "C" fn on_snapshot(_: libc::c_int) {
    SNAPSHOT_REQUESTED.store(true, Ordering::SeqCst);
}

extern "C" fn on_kick(_: libc::c_int) {}

fn install(signum: libc::c_int, handler: extern "C" fn(libc::c_int)) -> std::io::Result<()> {
    // SAFETY: sigaction with a zeroed struct, a valid handler and an empty
    // mask; the handlers only touch an atomic.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = handler as usize;
        libc::sigemptyset(&mut act.sa_mask);
        if libc::sigaction(signum, &act, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The signal used to kick vCPU threads out of `KVM_RUN`.
pub fn kick_signal() -> libc::c_int {
    libc::SIGRTMIN()
}

/// Installs the stop and kick handlers, and the snapshot one if the run
/// saves snapshots. Call once, before vCPUs start.
pub fn install_handlers(snapshots: bool) -> std::io::Result<()> {
    for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        install(s, on_stop)?;
    }
    if snapshots {
        install(libc::SIGUSR1, on_snapshot)?;
    }
    install(kick_signal(), on_kick)
}

/// Asks for a snapshot as SIGUSR1 does (from within the process, e.g.
/// when the guest is at the point to be saved). Honoured only by a run
/// with somewhere to save it.
pub fn request_snapshot() {
    SNAPSHOT_REQUESTED.store(true, Ordering::SeqCst);
}

/// Whether a snapshot was asked for since the last call.
pub fn take_snapshot_request() -> bool {
    SNAPSHOT_REQUESTED.swap(false, Ordering::SeqCst)
}

/// The stop signal received so far, if any.
pub fn stop_requested() -> Option<i32> {
    match STOP_REQUESTED.load(Ordering::SeqCst) {
        0 => None,
        n => Some(n),
    }
}
