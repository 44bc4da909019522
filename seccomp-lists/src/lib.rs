//! The host seccomp allow-lists' shared parts: what every thread needs,
//! the building blocks kinds of thread combine, and the compiler from a
//! list to BPF. The VMM (`vmm::host_seccomp`) lists its own threads; an
//! embedder lists its own (mcpvm's relays, channels, host files, inbound
//! connections, egress proxy). Both compile their lists when they are
//! built ([`programs_source`], from a build script), so that a thread
//! confining itself only copies its program and writes in the process's
//! pid: compiling seven filters at run time cost about 12 ms of a
//! testbed boot (docs/benchmarks.md).

use std::collections::BTreeMap;
use std::fmt::Write;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// A kind of thread's list: its name (in messages and docs/security.md),
/// the calls it may make beyond [`COMMON`], and the calls it may make
/// only with a given argument: (call, argument index, value).
#[derive(Clone, Debug)]
pub struct List {
    pub name: &'static str,
    pub calls: Vec<i64>,
    pub conditional: Vec<(i64, u8, u64)>,
}

impl List {
    /// A list of `blocks` of calls beyond [`COMMON`], and `conditional`.
    pub fn new(name: &'static str, blocks: &[&[i64]], conditional: Vec<(i64, u8, u64)>) -> Self {
        let mut calls: Vec<i64> = COMMON
            .iter()
            .chain(blocks.iter().flat_map(|l| l.iter()))
            .copied()
            .collect();
        calls.sort_unstable();
        calls.dedup();
        List {
            name,
            calls,
            conditional,
        }
    }

    /// The names of the calls it allows, for documentation and errors.
    pub fn allowed_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.calls.iter().map(name).collect();
        names.push(OWN_SIGNALS.to_string());
        for (nr, arg, value) in &self.conditional {
            names.push(format!("{}(arg{arg} = {value:#x})", name(nr)));
        }
        names
    }

    /// Its row of docs/security.md's table: what it allows beyond every
    /// kind's calls.
    pub fn markdown_row(&self) -> String {
        let common = common_names();
        let own: Vec<String> = self
            .allowed_names()
            .into_iter()
            .filter(|n| !common.contains(n))
            .collect();
        format!("| {} | {} |\n", self.name, own.join(", "))
    }
}

fn name(nr: &i64) -> String {
    syscall_table::name(*nr as u32).unwrap_or("?").to_string()
}

/// The head of docs/security.md's table and its row of what every kind
/// may call; each kind's [`List::markdown_row`] follows.
pub fn markdown_head() -> String {
    format!(
        "| thread | system calls allowed |\n|---|---|\n| every kind | {} |\n",
        common_names().join(", ")
    )
}

fn common_names() -> Vec<String> {
    let mut common: Vec<String> = COMMON.iter().map(name).collect();
    common.push(OWN_SIGNALS.to_string());
    common
}

/// What every Rust thread needs: memory, locks and channels, signals
/// (the vCPU kick, abort: `tgkill`, to this process only, see
/// [`OWN_SIGNALS`]), time, logging to stderr, closing fds, exiting.
pub const COMMON: &[i64] = &[
    libc::SYS_brk,
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mremap,
    libc::SYS_mprotect,
    libc::SYS_madvise,
    libc::SYS_futex,
    libc::SYS_sched_yield,
    libc::SYS_rt_sigreturn,
    libc::SYS_rt_sigprocmask,
    libc::SYS_sigaltstack,
    libc::SYS_restart_syscall,
    libc::SYS_clock_gettime,
    libc::SYS_clock_nanosleep,
    libc::SYS_nanosleep,
    libc::SYS_getrandom,
    libc::SYS_write,
    libc::SYS_writev,
    libc::SYS_close,
    libc::SYS_getpid,
    libc::SYS_gettid,
    libc::SYS_exit,
    libc::SYS_exit_group,
];

/// How the lists show `tgkill`: every thread may signal its own
/// process's threads (a vCPU kick, an abort), and no other process. No
/// other call that names a process (`kill`, `tkill`, `ptrace`, pidfds) is
/// allowed to any thread, so a compromised VMM cannot signal or inspect
/// the user's other processes.
pub const OWN_SIGNALS: &str = "tgkill(to this process)";

/// Waiting on eventfds and sockets with epoll, reading eventfds.
pub const EVENT_LOOP: &[i64] = &[
    libc::SYS_epoll_wait,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_ctl,
    libc::SYS_read,
];

/// Starting a thread that confines itself: glibc's pthread_create
/// (clone3, or clone on older kernels; the new thread's robust list and
/// rseq area, its arena), and in the new thread installing its own filter on top
/// (`prctl(PR_SET_NO_NEW_PRIVS)`, `seccomp`) and the SIGSYS handler.
pub const START_CONFINED_THREAD: &[i64] = &[
    libc::SYS_clone,
    libc::SYS_clone3,
    libc::SYS_set_robust_list,
    libc::SYS_rseq,
    libc::SYS_prctl,
    libc::SYS_seccomp,
    libc::SYS_rt_sigaction,
    // glibc counts CPUs when a new thread's first malloc makes an arena.
    libc::SYS_sched_getaffinity,
];

/// The host side of a socket: accepting it and copying through it.
pub const SOCKET_PEER: &[i64] = &[
    libc::SYS_read,
    libc::SYS_accept4,
    libc::SYS_recvfrom,
    libc::SYS_sendto,
    libc::SYS_shutdown,
    libc::SYS_fcntl,
];

/// A relay's copy between a pipe and a socket: splice, and waiting for
/// either end in poll (the relay never waits inside a splice).
pub const SPLICE: &[i64] = &[libc::SYS_splice, libc::SYS_poll, libc::SYS_ppoll];

/// Reading a directory tree and writing one: open, stat, list, create,
/// link, rename, remove, set modes and times.
pub const FILE_TREE: &[i64] = &[
    libc::SYS_openat,
    libc::SYS_fstat,
    libc::SYS_newfstatat,
    libc::SYS_statx,
    libc::SYS_lseek,
    libc::SYS_getdents64,
    libc::SYS_readlink,
    libc::SYS_readlinkat,
    libc::SYS_mkdir,
    libc::SYS_mkdirat,
    libc::SYS_symlink,
    libc::SYS_symlinkat,
    libc::SYS_linkat,
    libc::SYS_unlink,
    libc::SYS_unlinkat,
    libc::SYS_rmdir,
    libc::SYS_rename,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_chmod,
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_utimensat,
    libc::SYS_ftruncate,
    libc::SYS_fsync,
];

/// `ioctl(fd, request)` allowed for each of `requests` only.
pub fn ioctls(requests: &[u64]) -> Vec<(i64, u8, u64)> {
    requests.iter().map(|&n| (libc::SYS_ioctl, 1, n)).collect()
}

/// Stands for the process's own pid in the compiled filters (the one
/// argument only known at run time: `tgkill`'s target); above any pid
/// (`pid_max` is at most 2^22), and not a value any list compares with.
pub const PID_PLACEHOLDER: u32 = 0x7fff_fffe;

/// A list compiled: its BPF program as (code, jt, jf, k), trapping
/// (`--seccomp on`) and logging (`--seccomp log`), with
/// [`PID_PLACEHOLDER`] where the process's pid goes.
pub type Compiled = [&'static [(u16, u8, u8, u32)]; 2];

/// The filter for `list`: its calls allowed, `tgkill` only to `pid`,
/// anything else met with `mismatch`.
pub fn filter(list: &List, mismatch: SeccompAction, pid: u32) -> Result<SeccompFilter, String> {
    let err = |e: &dyn std::fmt::Display| format!("the {} filter: {e}", list.name);
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        list.calls.iter().map(|&nr| (nr, Vec::new())).collect();
    for &(nr, arg, value) in &list.conditional {
        let cond = SeccompCondition::new(arg, SeccompCmpArgLen::Qword, SeccompCmpOp::Eq, value)
            .map_err(|e| err(&e))?;
        rules
            .entry(nr)
            .or_default()
            .push(SeccompRule::new(vec![cond]).map_err(|e| err(&e))?);
    }
    let to_own = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, pid.into())
        .map_err(|e| err(&e))?;
    rules
        .entry(libc::SYS_tgkill)
        .or_default()
        .push(SeccompRule::new(vec![to_own]).map_err(|e| err(&e))?);
    SeccompFilter::new(rules, mismatch, SeccompAction::Allow, TargetArch::x86_64)
        .map_err(|e| err(&e))
}

/// `list`'s program for `mismatch` with `pid` in it, compiled now (what
/// a test holds the programs compiled at build time to).
pub fn compile(list: &List, mismatch: SeccompAction, pid: u32) -> Result<BpfProgram, String> {
    BpfProgram::try_from(filter(list, mismatch, pid)?)
        .map_err(|e| format!("the {} filter: {e}", list.name))
}

/// Rust source for a build script to write into OUT_DIR: `const NAME:
/// [Compiled; N]`, each list compiled trapping and logging, in the
/// order given.
pub fn programs_source(const_name: &str, lists: &[List]) -> Result<String, String> {
    let mut out = format!(
        "/// The host seccomp filters compiled when this crate was built: [kind][0: trap,\n\
         /// 1: log], as (code, jt, jf, k).\n\
         const {const_name}: [seccomp_lists::Compiled; {}] = [\n",
        lists.len()
    );
    for list in lists {
        out += "    [\n";
        for action in [SeccompAction::Trap, SeccompAction::Log] {
            out += "        &[";
            for i in &compile(list, action, PID_PLACEHOLDER)? {
                write!(out, "({}, {}, {}, {:#x}), ", i.code, i.jt, i.jf, i.k)
                    .expect("writing to a String");
            }
            out += "],\n";
        }
        out += "    ],\n";
    }
    out += "];\n";
    Ok(out)
}

/// For a build script: writes [`programs_source`] of `lists` as `PROGRAMS`
/// to OUT_DIR/seccomp_programs.rs, for the crate to `include!`. A list
/// that does not compile fails the build, naming it.
pub fn write_programs(lists: &[List]) {
    let out = programs_source("PROGRAMS", lists).unwrap_or_else(|e| panic!("host seccomp: {e}"));
    let dir = std::env::var("OUT_DIR").expect("OUT_DIR: called from a build script");
    let path = std::path::Path::new(&dir).join("seccomp_programs.rs");
    std::fs::write(&path, out).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}
