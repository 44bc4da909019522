//! The policy compiler: a [`Seccomp`] policy to a classic BPF program
//! over `struct seccomp_data` (seccomp(2)).
//!
//! Shape: a foreign architecture is killed; x32-ABI numbers fail with
//! ENOSYS; the exempt calls (the listener hand-over's `sendmsg`, the
//! `write` that starts the kernel's count) are allowed on their fd; then
//! each rule in order is a compare of the call number (and, for
//! [`When::ArgIn`], of the low 32 bits of one argument) that returns the
//! rule's verdict; then, with an allow-list, each allowed number passes
//! and the rest is notified; the default is allow, or notify in log mode.
//! Errno and
//! in-children rules return `USER_NOTIF`: the supervisor decides and
//! counts, so it re-checks the same rule in user space.

use libc::sock_filter;

use mcpvm_protocol::withholding::{Action, Seccomp, When};
use syscall_table as syscalls;

/// A policy that cannot be a filter.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error("Unknown system call '{0}' in the seccomp policy (x86_64 names, e.g. 'openat')")]
    UnknownSyscall(String),
    #[error("The seccomp policy compiles to {0} BPF instructions; the kernel takes at most 4096")]
    TooLong(usize),
    #[error(
        "A rule on '{0}' compares more argument values than a filter can jump over (at most 200)"
    )]
    TooManyValues(String),
}

const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
/// Offsets in struct seccomp_data.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const fn off_arg_low(i: u8) -> u32 {
    16 + 8 * i as u32
}
const MAX_INSNS: usize = 4096;
const MAX_VALUES: usize = 200;

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// The kernel's verdict for a rule's action.
fn verdict(action: Action, when: &When) -> u32 {
    match (action, when) {
        (Action::Kill, When::InChildren) | (Action::Errno(_), _) => libc::SECCOMP_RET_USER_NOTIF,
        (Action::Kill, _) => libc::SECCOMP_RET_KILL_PROCESS,
    }
}

/// Compiles `policy`; `exempt` lists calls the child makes after its
/// filter, before `execve`, each allowed on one fd (argument 0) only.
pub fn compile(policy: &Seccomp, exempt: &[(i64, i32)]) -> Result<Vec<sock_filter>, CompileError> {
    let mut p = vec![
        stmt(LD_W_ABS, OFF_ARCH),
        jump(JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        stmt(RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(LD_W_ABS, OFF_NR),
        jump(JGE_K, X32_SYSCALL_BIT, 0, 1),
        stmt(RET_K, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
    ];
    for &(nr, fd) in exempt {
        p.extend([
            jump(JEQ_K, nr as u32, 0, 3),
            stmt(LD_W_ABS, off_arg_low(0)),
            jump(JEQ_K, fd as u32, 0, 1),
            stmt(RET_K, libc::SECCOMP_RET_ALLOW),
            stmt(LD_W_ABS, OFF_NR),
        ]);
    }
    for rule in &policy.rules {
        let nr = syscalls::number(&rule.syscall)
            .ok_or_else(|| CompileError::UnknownSyscall(rule.syscall.clone()))?;
        let ret = stmt(RET_K, verdict(rule.action, &rule.when));
        match &rule.when {
            When::Always | When::InChildren => {
                p.extend([jump(JEQ_K, nr, 0, 1), ret]);
            }
            When::ArgIn { arg, values } => {
                let n = values.len();
                if n == 0 {
                    continue;
                }
                if n > MAX_VALUES || *arg > 5 {
                    return Err(CompileError::TooManyValues(rule.syscall.clone()));
                }
                // jeq nr; ld arg; jeq v0..vn-1 (to ret); ret; ld nr.
                p.push(jump(JEQ_K, nr, 0, (n + 2) as u8));
                p.push(stmt(LD_W_ABS, off_arg_low(*arg)));
                for (i, v) in values.iter().enumerate() {
                    let jf = if i + 1 == n { 1 } else { 0 };
                    p.push(jump(JEQ_K, *v, (n - 1 - i) as u8, jf));
                }
                p.push(ret);
                p.push(stmt(LD_W_ABS, OFF_NR));
            }
        }
    }
    // Recorded calls no rule decided go to the supervisor, which reads
    // their arguments and lets them run.
    if policy.record {
        for name in super::effects::RECORDED {
            if let Some(nr) = syscalls::number(name) {
                p.extend([
                    jump(JEQ_K, nr, 0, 1),
                    stmt(RET_K, libc::SECCOMP_RET_USER_NOTIF),
                ]);
            }
        }
    }
    let pass = if policy.log {
        libc::SECCOMP_RET_USER_NOTIF
    } else {
        libc::SECCOMP_RET_ALLOW
    };
    if let Some(allow) = &policy.allow {
        for name in &allow.syscalls {
            let nr =
                syscalls::number(name).ok_or_else(|| CompileError::UnknownSyscall(name.clone()))?;
            p.extend([jump(JEQ_K, nr, 0, 1), stmt(RET_K, pass)]);
        }
        // The rest is denied by the supervisor, which counts it.
        p.push(stmt(RET_K, libc::SECCOMP_RET_USER_NOTIF));
    } else {
        p.push(stmt(RET_K, pass));
    }
    if p.len() > MAX_INSNS {
        return Err(CompileError::TooLong(p.len()));
    }
    Ok(p)
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use mcpvm_protocol::withholding::Rule;

    /// Runs a program the way the kernel would on one call: enough of
    /// classic BPF for what [`compile`] emits.
    pub fn eval(p: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_le_bytes());
        data[4..8].copy_from_slice(&arch.to_le_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = p[pc];
            match i.code {
                LD_W_ABS => {
                    let k = i.k as usize;
                    acc = u32::from_le_bytes(data[k..k + 4].try_into().unwrap());
                    pc += 1;
                }
                JEQ_K | JGE_K => {
                    let hit = if i.code == JEQ_K {
                        acc == i.k
                    } else {
                        acc >= i.k
                    };
                    pc += 1 + if hit { i.jt } else { i.jf } as usize;
                }
                RET_K => return i.k,
                c => panic!("unexpected opcode {c:#x}"),
            }
        }
    }

    fn call(p: &[sock_filter], name: &str, args: [u64; 6]) -> u32 {
        eval(p, AUDIT_ARCH_X86_64, syscalls::number(name).unwrap(), args)
    }

    fn rule(syscall: &str, action: Action, when: When) -> Rule {
        Rule {
            syscall: syscall.into(),
            action,
            when,
        }
    }

    const NOTIF: u32 = libc::SECCOMP_RET_USER_NOTIF;
    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    const KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

    #[test]
    fn rules_match_by_number_and_argument() {
        let policy = Seccomp {
            rules: vec![
                rule("mkdir", Action::Errno(libc::EROFS), When::Always),
                rule(
                    "socket",
                    Action::Errno(libc::EACCES),
                    When::ArgIn {
                        arg: 0,
                        values: vec![libc::AF_INET as u32, libc::AF_INET6 as u32],
                    },
                ),
                rule("execve", Action::Errno(libc::EPERM), When::InChildren),
                rule("ptrace", Action::Kill, When::Always),
            ],
            log: false,
            allow: None,
            record: false,
        };
        let p = compile(&policy, &[(libc::SYS_sendmsg, 7)]).unwrap();
        assert_eq!(call(&p, "mkdir", [0; 6]), NOTIF);
        assert_eq!(call(&p, "socket", [2, 1, 0, 0, 0, 0]), NOTIF);
        assert_eq!(call(&p, "socket", [10, 1, 0, 0, 0, 0]), NOTIF);
        assert_eq!(call(&p, "socket", [1, 1, 0, 0, 0, 0]), ALLOW, "AF_UNIX");
        // Only the low 32 bits of an argument count, as the kernel's int.
        assert_eq!(call(&p, "socket", [(1 << 32) | 2, 1, 0, 0, 0, 0]), NOTIF);
        assert_eq!(call(&p, "execve", [0; 6]), NOTIF);
        assert_eq!(call(&p, "ptrace", [0; 6]), KILL);
        assert_eq!(call(&p, "read", [0; 6]), ALLOW);
        // The rule after an argument rule still sees the call number.
        assert_eq!(call(&p, "openat", [2, 0, 0, 0, 0, 0]), ALLOW);
    }

    #[test]
    fn the_listener_hand_over_is_exempt_and_nothing_else() {
        let policy = Seccomp {
            rules: vec![rule("sendmsg", Action::Errno(libc::EPERM), When::Always)],
            log: false,
            allow: None,
            record: false,
        };
        let p = compile(&policy, &[(libc::SYS_sendmsg, 7)]).unwrap();
        assert_eq!(call(&p, "sendmsg", [7, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(call(&p, "sendmsg", [8, 0, 0, 0, 0, 0]), NOTIF);
    }

    #[test]
    fn log_mode_notifies_everything_not_decided_by_a_rule() {
        let policy = Seccomp {
            rules: vec![rule("reboot", Action::Kill, When::Always)],
            log: true,
            allow: None,
            record: false,
        };
        let p = compile(&policy, &[]).unwrap();
        assert_eq!(call(&p, "read", [0; 6]), NOTIF);
        assert_eq!(call(&p, "reboot", [0; 6]), KILL);
    }

    #[test]
    fn an_allow_list_passes_its_calls_and_notifies_the_rest() {
        let policy = Seccomp {
            rules: vec![rule("ptrace", Action::Kill, When::Always)],
            log: false,
            allow: Some(mcpvm_protocol::withholding::Allow {
                syscalls: vec!["read".into(), "ptrace".into()],
                errno: libc::ENOSYS,
            }),
            record: false,
        };
        let p = compile(&policy, &[(libc::SYS_sendmsg, 5), (libc::SYS_write, 9)]).unwrap();
        assert_eq!(call(&p, "read", [0; 6]), ALLOW);
        assert_eq!(call(&p, "write", [0; 6]), NOTIF);
        assert_eq!(call(&p, "ptrace", [0; 6]), KILL, "rules come first");
        assert_eq!(call(&p, "sendmsg", [5, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(call(&p, "sendmsg", [9, 0, 0, 0, 0, 0]), NOTIF);
        // The write that starts the kernel's count, on its fd only.
        assert_eq!(call(&p, "write", [9, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(call(&p, "write", [5, 0, 0, 0, 0, 0]), NOTIF);
    }

    #[test]
    fn foreign_architectures_and_x32_calls_never_pass() {
        let p = compile(&Seccomp::default(), &[]).unwrap();
        assert_eq!(eval(&p, 0x4000_0003, 0, [0; 6]), KILL, "i386");
        assert_eq!(
            eval(&p, AUDIT_ARCH_X86_64, X32_SYSCALL_BIT | 1, [0; 6]),
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32
        );
        assert_eq!(call(&p, "write", [0; 6]), ALLOW);
    }

    #[test]
    fn bad_policies_are_refused() {
        let unknown = Seccomp {
            rules: vec![rule("opne", Action::Kill, When::Always)],
            log: false,
            allow: None,
            record: false,
        };
        assert!(matches!(
            compile(&unknown, &[]),
            Err(CompileError::UnknownSyscall(s)) if s == "opne"
        ));
        let wide = Seccomp {
            rules: vec![rule(
                "ioctl",
                Action::Kill,
                When::ArgIn {
                    arg: 1,
                    values: (0..300).collect(),
                },
            )],
            log: false,
            allow: None,
            record: false,
        };
        assert!(matches!(
            compile(&wide, &[]),
            Err(CompileError::TooManyValues(_))
        ));
    }
}
