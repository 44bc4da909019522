//! mcpvm's own kinds of host thread (relays, channels, host files,
//! inbound connections, the egress proxy), each confined to its own
//! list of system calls as the VMM's threads are to theirs
//! (`vmm::host_seccomp`). The lists are in `seccomp_lists.rs`; mcpvm's
//! build.rs compiles them (`seccomp_lists::programs_source`), and a
//! thread installs its program with `vmm::host_seccomp::confine_as`.

pub use super::seccomp_lists::{HostThread, HOST_THREADS};
use vmm::host_seccomp::{confine_as, SeccompError, SeccompMode};

// PROGRAMS: [kind in HOST_THREADS order][0: On, 1: Log].
include!(concat!(env!("OUT_DIR"), "/seccomp_programs.rs"));

/// Confines the calling thread (and the threads it creates later) to
/// `kind`'s calls.
pub fn confine(kind: HostThread, mode: SeccompMode) -> Result<(), SeccompError> {
    confine_as(kind.name(), &PROGRAMS[kind.index()], mode)
}

/// The rows of docs/security.md's table for mcpvm's own threads, after
/// the VMM's (`vmm::host_seccomp::markdown_table`).
pub fn markdown_rows() -> String {
    HOST_THREADS
        .iter()
        .map(|k| k.list().markdown_row())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_list_exactly_what_the_filters_allow() {
        let doc = include_str!("../../../docs/security.md");
        let table = vmm::host_seccomp::markdown_table() + &markdown_rows();
        assert!(
            doc.contains(&table),
            "docs/security.md must carry this table:\n{table}"
        );
    }

    #[test]
    fn every_kind_sits_at_its_index() {
        for (i, kind) in HOST_THREADS.iter().enumerate() {
            assert_eq!(kind.index(), i, "{kind:?}");
        }
    }

    #[test]
    fn the_programs_built_with_mcpvm_are_the_lists_compiled_now() {
        let pid = unsafe { libc::getpid() } as u32;
        for kind in HOST_THREADS {
            for (mode, action, slot) in [
                (SeccompMode::On, seccompiler::SeccompAction::Trap, 0),
                (SeccompMode::Log, seccompiler::SeccompAction::Log, 1),
            ] {
                let now = seccomp_lists::compile(&kind.list(), action, pid).unwrap();
                let built =
                    vmm::host_seccomp::compiled_program(&PROGRAMS[kind.index()], mode).unwrap();
                assert_eq!(built, now, "{kind:?} {mode:?}");
                let placeholders = PROGRAMS[kind.index()][slot]
                    .iter()
                    .filter(|i| i.3 == seccomp_lists::PID_PLACEHOLDER)
                    .count();
                assert_eq!(placeholders, 1, "{kind:?} {mode:?}");
            }
        }
    }

    #[test]
    fn only_the_threads_that_start_threads_may_and_relays_fit_inside_channels() {
        // None may fork or run a program; only the threads that start
        // confined threads may clone; the egress proxy opens files
        // read-only only. What the channels thread starts, relays, must
        // fit inside its own list, or the stacked filters would refuse a
        // relay's calls.
        for kind in HOST_THREADS {
            let calls = kind.list().calls;
            for nr in [libc::SYS_fork, libc::SYS_vfork, libc::SYS_execve] {
                assert!(!calls.contains(&nr), "{kind:?} may fork or exec");
            }
            let starts = matches!(
                kind,
                HostThread::Channels | HostThread::Egress | HostThread::Inbound
            );
            for nr in [libc::SYS_clone, libc::SYS_clone3] {
                assert_eq!(calls.contains(&nr), starts, "{kind:?} and {nr}");
            }
        }
        assert!(!HostThread::Egress.list().calls.contains(&libc::SYS_openat));
        let (relay, channels) = (HostThread::Relay.list(), HostThread::Channels.list());
        assert!(relay.calls.iter().all(|nr| channels.calls.contains(nr)));
        assert!(relay
            .conditional
            .iter()
            .all(|c| channels.conditional.contains(c)));
    }
}
