//! Process signals, turned into requests on a VM's [`VmControl`].
//!
//! - SIGINT, SIGTERM, SIGHUP: stop the VM cleanly; the run returns
//!   `ExitReason::Signal` and the VMM exits with 128+N.
//! - SIGUSR1, when the run saves snapshots: pause the VM and write one.
//! - The vCPU kick signal ([`kick`]): interrupts a vCPU thread blocked in
//!   `KVM_RUN` so it sees the stop flag.
//!
//! A handler may only make async-signal-safe calls, so it writes the
//! signal's number to a pipe (the self-pipe trick); a thread of its own,
//! confined to reading that pipe, forwards each one to the VM. The pipe's
//! write end is the one process-global here: a handler has no other way to
//! reach anything. [`catch`] starts catching early (a signal during the
//! build is kept in the pipe); [`Caught::forward_to`] delivers to a VM.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;

pub mod kick;

use crate::handle::{VmControl, VmHandle};
use crate::{host_seccomp as seccomp, ExitReason, SeccompMode, ThreadKind, VmmError};

/// Written on the pipe by [`Forwarding`]'s drop: the thread ends.
const END: u8 = 0;

/// The pipe's write end, for the handlers.
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
/// The pipe, made once per process: (read end, write end).
static PIPE: OnceLock<(OwnedFd, OwnedFd)> = OnceLock::new();

extern "C" fn on_signal(signum: libc::c_int) {
    let fd = WAKE_FD.load(Ordering::Relaxed);
    let byte = signum as u8;
    // SAFETY: write(2) is async-signal-safe; one byte from our stack.
    unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
}

fn install(signum: libc::c_int, handler: extern "C" fn(libc::c_int)) -> io::Result<()> {
    // SAFETY: sigaction with a zeroed struct, a valid handler and an empty
    // mask; the handlers only write a byte or do nothing.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = handler as usize;
        act.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut act.sa_mask);
        if libc::sigaction(signum, &act, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn pipe() -> io::Result<&'static (OwnedFd, OwnedFd)> {
    if let Some(p) = PIPE.get() {
        return Ok(p);
    }
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into the array we pass.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds are fresh and ours.
    let pair = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // A second caller racing us keeps its own pair and drops ours.
    Ok(PIPE.get_or_init(|| pair))
}

/// Signals caught and kept until [`Caught::forward_to`] delivers them.
pub struct Caught {
    snapshots: bool,
}

/// Starts catching the stop signals, and SIGUSR1 if `snapshots`.
pub fn catch(snapshots: bool) -> io::Result<Caught> {
    let (_, write) = pipe()?;
    WAKE_FD.store(write.as_raw_fd(), Ordering::Relaxed);
    for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        install(s, on_signal)?;
    }
    if snapshots {
        install(libc::SIGUSR1, on_signal)?;
    }
    Ok(Caught { snapshots })
}

impl Caught {
    /// Delivers every signal caught so far and from now on to `vm`, on a
    /// thread confined to reading the pipe. Until the returned guard is
    /// dropped.
    pub fn forward_to(self, vm: &VmHandle) -> Result<Forwarding, VmmError> {
        forward_on_thread(vm.control(), self.snapshots, vm.seccomp_mode())
    }
}

/// Catches and forwards the process's signals to `vm` (see [`catch`]).
pub fn forward(vm: &VmHandle) -> Result<Forwarding, VmmError> {
    catch(vm.saves_snapshots())
        .map_err(VmmError::Signals)?
        .forward_to(vm)
}

fn forward_on_thread(
    control: VmControl,
    snapshots: bool,
    mode: SeccompMode,
) -> Result<Forwarding, VmmError> {
    let (read, _) = pipe().map_err(VmmError::Signals)?;
    let fd = read.as_raw_fd();
    let (confined_tx, confined) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let result = seccomp::confine(ThreadKind::Signals, mode);
            let ok = result.is_ok();
            let _ = confined_tx.send(result);
            if ok {
                deliver(fd, &control, snapshots);
            }
        })
        .map_err(VmmError::Thread)?;
    confined
        .recv()
        .map_err(|_| VmmError::Signals(io::Error::other("the signal thread ended")))??;
    Ok(Forwarding)
}

/// Reads signal numbers until [`END`], each becoming a request.
fn deliver(fd: i32, control: &VmControl, snapshots: bool) {
    loop {
        let mut byte = 0u8;
        // SAFETY: read(2) of one byte into our stack, from a pipe fd that
        // lives as long as the process.
        let n = unsafe { libc::read(fd, (&mut byte as *mut u8).cast(), 1) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if n != 1 || byte == END {
            return;
        }
        match i32::from(byte) {
            libc::SIGUSR1 if snapshots => control.request_snapshot(),
            libc::SIGUSR1 => {}
            sig => control.stop(ExitReason::Signal(sig)),
        }
    }
}

/// Forwarding in progress; dropping it ends the forwarding thread.
pub struct Forwarding;

impl Drop for Forwarding {
    fn drop(&mut self) {
        if let Some((_, write)) = PIPE.get() {
            // SAFETY: one byte from our stack to our own pipe.
            unsafe { libc::write(write.as_raw_fd(), (&END as *const u8).cast(), 1) };
        }
    }
}
