//! Host-side confinement: a seccomp filter per thread kind, installed by
//! each thread on itself before the guest runs.
//!
//! The guest drives the vCPU threads (every MMIO and port access) and the
//! device threads (every descriptor chain), so those are where a device
//! bug would be exploited; each kind may make only the system calls its
//! work needs (the lists below, documented in docs/security.md). A thread
//! inherits the filter of the thread that creates it, so device threads
//! are started when the VM is built, from the unconfined main thread, and
//! wait for activation (see `devices::virtio::DeviceThread`).
//!
//! Modes: `On` traps any other call, says which thread made which call and
//! ends the process with [`EXIT_BAD_SYSCALL`]; `Log` lets it through and
//! has the kernel log it (`audit: type=1326` in the kernel log, with
//! `syscall=N`); `Off` installs nothing.
//!
//! The VMM's lists are in [`lists`]; vmm/build.rs compiles every kind's
//! filter in both modes when the VMM is built (`seccomp_lists`), so that
//! a thread confining itself only copies its program and writes in the
//! process's pid. An embedder's threads are its own kinds, with lists it
//! compiles the same way and installs with [`confine_as`].

mod lists;

use std::cell::Cell;
use std::str::FromStr;

use seccompiler::{sock_filter, BpfProgram};

pub use lists::{ThreadKind, KINDS};
#[cfg(test)]
use lists::{VCPU_SAVE, VM_SAVE};
pub use seccomp_lists::{Compiled, List, OWN_SIGNALS};

// PROGRAMS: [kind in KINDS order][0: On, 1: Log], as (code, jt, jf, k).
include!(concat!(env!("OUT_DIR"), "/seccomp_programs.rs"));

/// The exit status after a trapped call: 128 + SIGSYS, as a shell shows a
/// process killed by that signal.
pub const EXIT_BAD_SYSCALL: i32 = 128 + libc::SIGSYS;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SeccompMode {
    Off,
    Log,
    #[default]
    On,
}

impl SeccompMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SeccompMode::Off => "off",
            SeccompMode::Log => "log",
            SeccompMode::On => "on",
        }
    }
}

impl FromStr for SeccompMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(SeccompMode::Off),
            "log" => Ok(SeccompMode::Log),
            "on" => Ok(SeccompMode::On),
            _ => Err(format!("'{s}' is not a seccomp mode; use off, log or on")),
        }
    }
}

/// The names of the calls `kind` may make, for documentation and errors.
pub fn allowed_names(kind: ThreadKind) -> Vec<String> {
    kind.list().allowed_names()
}

/// The VMM's allow-lists as the start of the Markdown table in
/// docs/security.md (a test keeps the two the same); an embedder's kinds
/// add their rows after it.
pub fn markdown_table() -> String {
    KINDS.iter().fold(seccomp_lists::markdown_head(), |s, k| {
        s + &k.list().markdown_row()
    })
}

#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("Cannot install the seccomp filter on a {0} thread")]
    Install(&'static str, #[source] seccompiler::Error),
    #[error("Cannot install the SIGSYS handler")]
    Handler(#[source] std::io::Error),
    #[error("A thread ended before it could confine itself")]
    Thread,
}

/// The BPF program for `kind` in `mode` (None when `mode` is Off): the
/// one compiled at build time, with this process's pid in its `tgkill`
/// rule.
pub fn program(kind: ThreadKind, mode: SeccompMode) -> Option<BpfProgram> {
    compiled_program(&PROGRAMS[kind.index()], mode)
}

/// A program compiled at build time (`seccomp_lists::programs_source`)
/// for `mode`, with this process's pid in its `tgkill` rule.
pub fn compiled_program(compiled: &Compiled, mode: SeccompMode) -> Option<BpfProgram> {
    let slot = match mode {
        SeccompMode::Off => return None,
        SeccompMode::On => 0,
        SeccompMode::Log => 1,
    };
    // SAFETY: getpid has no preconditions.
    let own = unsafe { libc::getpid() } as u32;
    Some(with_pid(compiled[slot], own))
}

/// `BPF_JMP | BPF_JEQ | BPF_K`: the comparison that holds the placeholder.
const JEQ_K: u16 = 0x15;

fn with_pid(compiled: &[(u16, u8, u8, u32)], pid: u32) -> BpfProgram {
    compiled
        .iter()
        .map(|&(code, jt, jf, k)| sock_filter {
            code,
            jt,
            jf,
            k: if code == JEQ_K && k == seccomp_lists::PID_PLACEHOLDER {
                pid
            } else {
                k
            },
        })
        .collect()
}

thread_local! {
    /// The calling thread's kind, for the SIGSYS message. A thread that
    /// never called `confine` but carries a filter was started by a
    /// confined thread (which none of ours does).
    static KIND: Cell<&'static str> = const { Cell::new("child-of-a-confined") };
}

/// Closes every file descriptor above stderr that this process inherited:
/// whatever its parent left open (an MCP client's other pipes, sockets)
/// is not the VM's business. Call first thing, before opening anything.
pub fn close_inherited_fds() -> std::io::Result<()> {
    close_inherited_fds_except(None)
}

/// [`close_inherited_fds`], keeping `keep` (a descriptor the caller was
/// handed on purpose, such as a socket already bound for it).
pub fn close_inherited_fds_except(keep: Option<i32>) -> std::io::Result<()> {
    let ranges: Vec<(u32, u32)> = match keep {
        Some(k) if k > 2 => vec![(3, k as u32 - 1), (k as u32 + 1, u32::MAX)],
        _ => vec![(3, u32::MAX)],
    };
    // SAFETY: close_range only closes descriptors; nothing is open yet
    // that this process itself needs beyond stdio and `keep`.
    let rc = ranges
        .iter()
        .filter(|(a, b)| a <= b)
        .map(|&(a, b)| unsafe { libc::syscall(libc::SYS_close_range, a, b, 0u32) })
        .fold(0, |acc, rc| if rc != 0 { rc } else { acc });
    if rc == 0 {
        return Ok(());
    }
    // Kernels before 5.9: one by one, from /proc/self/fd.
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2 && Some(fd) != keep)
        .collect();
    for fd in fds {
        // SAFETY: closing a descriptor number; the directory's own fd is
        // gone by now (EBADF is ignored).
        unsafe { libc::close(fd) };
    }
    Ok(())
}

/// Confines the calling thread (and the threads it creates later) to
/// `kind`'s calls. In `On` mode, also installs the SIGSYS handler that
/// reports a trapped call.
pub fn confine(kind: ThreadKind, mode: SeccompMode) -> Result<(), SeccompError> {
    confine_as(kind.name(), &PROGRAMS[kind.index()], mode)
}

/// [`confine`] for an embedder's own kind of thread: `name` in messages,
/// `compiled` its list as its build compiled it.
pub fn confine_as(
    name: &'static str,
    compiled: &Compiled,
    mode: SeccompMode,
) -> Result<(), SeccompError> {
    let Some(prog) = compiled_program(compiled, mode) else {
        return Ok(());
    };
    if mode == SeccompMode::On {
        install_sigsys_handler().map_err(SeccompError::Handler)?;
    }
    keep_malloc_from_opening_files();
    KIND.with(|k| k.set(name));
    seccompiler::apply_filter(&prog).map_err(|e| SeccompError::Install(name, e))?;
    log::debug!("seccomp: {name} thread confined ({mode:?})");
    Ok(())
}

/// glibc malloc opens files in two places no confined thread may: the
/// first time it shrinks a thread arena's heap it reads
/// /proc/sys/vm/overcommit_memory (seen on a vsock thread after 64
/// streams closed), and once a process has more than eight arenas it
/// counts CPUs from /sys before making another (seen on a thread started
/// by a confined one, in a VM with two disks). A trim threshold no heap
/// reaches means it never shrinks one (wholly free heaps are still
/// unmapped, large blocks still munmapped); a fixed arena limit means it
/// never counts CPUs. One arena: the VMM's threads allocate little and
/// rarely (buffers are made once), and each further arena's heap is
/// memory every VM pays for (about 80 KiB each, measured). glibc fixes
/// its arena limit when the first thread makes an arena, so the VMM's
/// binary calls this before it starts any thread; `confine` calls it
/// again for processes that did not.
pub fn keep_malloc_from_opening_files() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets malloc parameters; any thread may call it.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

fn install_sigsys_handler() -> std::io::Result<()> {
    // SAFETY: sigaction with a zeroed struct, SA_SIGINFO and a handler
    // that only formats into a stack buffer, writes and exits.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_sigsys as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut act.sa_mask);
        if libc::sigaction(libc::SIGSYS, &act, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The system call number in a SIGSYS siginfo: `si_syscall`, after
/// `si_call_addr` in the union that starts at byte 16.
fn trapped_syscall(info: &libc::siginfo_t) -> i32 {
    // SAFETY: siginfo_t is 128 bytes; bytes 24..28 are si_syscall for
    // SIGSYS (include/uapi/asm-generic/siginfo.h).
    unsafe {
        std::ptr::read_unaligned(
            (info as *const libc::siginfo_t)
                .cast::<u8>()
                .add(24)
                .cast::<i32>(),
        )
    }
}

/// What the trap report says after the call: the embedder's advice, in
/// its own words (the VMM knows no command line). Set once, before any
/// filter is installed; read by the signal handler, which cannot lock.
static TRAP_ADVICE: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Sets the sentence the trap report ends with (for example how to let
/// such calls through to see them all). Only the first call counts.
pub fn set_trap_advice(advice: &'static str) {
    let _ = TRAP_ADVICE.set(advice);
}

/// Says which thread made which call, then ends the process: only write
/// and exit_group, which every filter allows, and no allocation.
extern "C" fn on_sigsys(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let nr = unsafe { trapped_syscall(&*info) };
    let name = syscall_table::name(nr as u32).unwrap_or("unknown");
    let kind = KIND.with(Cell::get);
    let mut msg = Message::default();
    msg.push("mcpvm: seccomp: a ");
    msg.push(kind);
    msg.push(" thread made the system call ");
    msg.push(name);
    msg.push(" (");
    msg.push_number(nr);
    msg.push("), which its filter does not allow; the VMM stops.");
    if let Some(advice) = TRAP_ADVICE.get() {
        msg.push(" ");
        msg.push(advice);
    }
    msg.push("\n");
    // SAFETY: write and _exit are async-signal-safe.
    unsafe {
        libc::write(2, msg.buf.as_ptr().cast(), msg.len);
        libc::_exit(EXIT_BAD_SYSCALL);
    }
}

/// A fixed buffer a signal handler can format into.
struct Message {
    buf: [u8; 320],
    len: usize,
}

impl Default for Message {
    fn default() -> Self {
        Message {
            buf: [0; 320],
            len: 0,
        }
    }
}

impl Message {
    fn push(&mut self, s: &str) {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
    }

    fn push_number(&mut self, n: i32) {
        let mut digits = [0u8; 12];
        let mut i = digits.len();
        let mut v = n.unsigned_abs();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        if n < 0 {
            self.push("-");
        }
        // SAFETY-free: ASCII digits are valid UTF-8.
        self.push(std::str::from_utf8(&digits[i..]).unwrap_or("?"));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_snapshot_ioctl_numbers_are_the_kernel_s() {
        // From <linux/kvm.h> on x86_64, as strace prints them.
        assert_eq!(
            VCPU_SAVE,
            &[
                0x8090ae81, 0x8138ae83, 0xc008ae88, 0x8400ae8e, 0x8004ae98, 0x8040ae9f, 0x8080aea1,
                0x9000aea4, 0x8188aea6
            ]
        );
        assert_eq!(VM_SAVE, &[0xc208ae62, 0x8070ae9f, 0x8030ae7c]);
    }

    use super::*;

    #[test]
    fn modes_parse_and_bad_ones_say_the_choices() {
        assert_eq!("on".parse::<SeccompMode>(), Ok(SeccompMode::On));
        assert_eq!("log".parse::<SeccompMode>(), Ok(SeccompMode::Log));
        assert_eq!("off".parse::<SeccompMode>(), Ok(SeccompMode::Off));
        let e = "strict".parse::<SeccompMode>().unwrap_err();
        assert!(e.contains("off, log or on"), "{e}");
    }

    #[test]
    fn docs_list_exactly_what_the_filters_allow() {
        let doc = include_str!("../../../docs/security.md");
        let table = markdown_table();
        assert!(
            doc.contains(&table),
            "docs/security.md must carry this table:\n{table}"
        );
    }

    #[test]
    fn every_kind_sits_at_its_index_in_kinds() {
        for (i, kind) in KINDS.iter().enumerate() {
            assert_eq!(kind.index(), i, "{kind:?}");
        }
    }

    #[test]
    fn the_programs_built_with_the_vmm_are_the_lists_compiled_now() {
        // Whatever build.rs compiled must be what the lists compile to
        // with this process's pid; the placeholder is one comparison.
        let pid = unsafe { libc::getpid() } as u32;
        for kind in KINDS {
            for (mode, action) in [
                (SeccompMode::On, seccompiler::SeccompAction::Trap),
                (SeccompMode::Log, seccompiler::SeccompAction::Log),
            ] {
                let now = seccomp_lists::compile(&kind.list(), action, pid).unwrap();
                assert_eq!(program(kind, mode).unwrap(), now, "{kind:?} {mode:?}");
                let slot = if mode == SeccompMode::On { 0 } else { 1 };
                let placeholders = PROGRAMS[kind.index()][slot]
                    .iter()
                    .filter(|i| i.3 == seccomp_lists::PID_PLACEHOLDER)
                    .count();
                assert_eq!(placeholders, 1, "{kind:?} {mode:?}");
            }
            assert!(program(kind, SeccompMode::Off).is_none());
        }
    }

    #[test]
    fn guest_facing_threads_cannot_open_files_or_spawn() {
        for kind in [
            ThreadKind::Vcpu,
            ThreadKind::Block,
            ThreadKind::Vsock,
            ThreadKind::Rng,
        ] {
            let c = kind.list().calls;
            for nr in [
                libc::SYS_openat,
                libc::SYS_open,
                libc::SYS_execve,
                libc::SYS_clone,
                libc::SYS_clone3,
                libc::SYS_fork,
                libc::SYS_ptrace,
                libc::SYS_mount,
            ] {
                assert!(!c.contains(&nr), "{kind:?} may call {nr}");
            }
            assert!(!c.contains(&libc::SYS_socket), "socket is conditional only");
            assert!(!c.contains(&libc::SYS_ioctl), "ioctl is conditional only");
        }
        assert!(allowed_names(ThreadKind::Vcpu).contains(&"ioctl(arg1 = 0xae80)".to_string()));
        // No thread of the VMM's starts threads (a new thread carries its
        // creator's filter: device threads are started unconfined, when
        // the VM is built), forks or runs a program.
        for kind in KINDS {
            for nr in [
                libc::SYS_fork,
                libc::SYS_vfork,
                libc::SYS_execve,
                libc::SYS_clone,
                libc::SYS_clone3,
            ] {
                assert!(!kind.list().calls.contains(&nr), "{kind:?} may call {nr}");
            }
        }
    }

    #[test]
    fn messages_format_numbers_without_allocating() {
        let mut m = Message::default();
        m.push("nr ");
        m.push_number(-41);
        m.push_number(0);
        assert_eq!(&m.buf[..m.len], b"nr -410");
        for _ in 0..100 {
            m.push("overflow ");
        }
        assert_eq!(m.len, m.buf.len());
    }
}
