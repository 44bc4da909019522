//! Answers the filter's user notifications: the errno a rule names, or
//! "continue" (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`) for an allowed call in
//! log mode and for a call an in-children rule lets through (the first caller's own). Counts every
//! answer, so the agent can report what the server was denied and, in log
//! mode, everything it called.
//!
//! "Continue" lets the kernel run the call as if unfiltered; seccomp(2)
//! warns that a supervisor must not base security decisions on pointer
//! arguments it reads (they can change after the check), and this one
//! reads none: it decides on the call number and integer arguments only,
//! exactly as the BPF filter did.

use std::collections::{BTreeMap, HashSet};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use mcpvm_protocol::messages::SyscallCount;

use super::effects::Recorder;
use super::names::name;
use mcpvm_protocol::withholding::{Action, Rule, Seccomp, When};
use syscall_table as syscalls;

/// What the supervisor decides for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Continue,
    Errno(i32),
    Kill,
}

/// The decisions and the tallies, without the kernel (unit-testable).
#[derive(Debug, Default)]
pub struct Judge {
    rules: Vec<(u32, Rule)>,
    log: bool,
    /// The allow-list's numbers and the errno for the rest.
    allow: Option<(HashSet<u32>, i32)>,
    /// The first caller of each in-children rule's call.
    first_caller: std::collections::HashMap<u32, u32>,
    denied: BTreeMap<(u32, String), u64>,
    used: BTreeMap<u32, u64>,
}

impl Judge {
    /// Rules with an unknown name were refused by the compiler already;
    /// here they are skipped.
    pub fn new(policy: &Seccomp) -> Self {
        Judge {
            rules: policy
                .rules
                .iter()
                .filter_map(|r| syscalls::number(&r.syscall).map(|nr| (nr, r.clone())))
                .collect(),
            log: policy.log,
            allow: policy.allow.as_ref().map(|a| {
                let nrs = a
                    .syscalls
                    .iter()
                    .filter_map(|n| syscalls::number(n))
                    .collect();
                (nrs, a.errno)
            }),
            ..Judge::default()
        }
    }

    /// One call: its number, arguments, and the calling process's pid.
    pub fn decide(&mut self, nr: u32, args: [u64; 6], pid: u32) -> Decision {
        if self.log {
            *self.used.entry(nr).or_default() += 1;
        }
        let rule = self.rules.iter().find(|(n, r)| {
            *n == nr
                && match &r.when {
                    When::Always | When::InChildren => true,
                    When::ArgIn { arg, values } => {
                        let v = args.get(*arg as usize).copied().unwrap_or(0) as u32;
                        values.contains(&v)
                    }
                }
        });
        let Some((_, rule)) = rule else {
            return match &self.allow {
                Some((allowed, errno)) if !allowed.contains(&nr) => {
                    let e = *errno;
                    *self
                        .denied
                        .entry((nr, syscalls::errno_name(e)))
                        .or_default() += 1;
                    Decision::Errno(e)
                }
                _ => Decision::Continue,
            };
        };
        if rule.when == When::InChildren && *self.first_caller.entry(nr).or_insert(pid) == pid {
            return Decision::Continue;
        }
        let (decision, errno) = match rule.action {
            Action::Errno(e) => (Decision::Errno(e), syscalls::errno_name(e)),
            Action::Kill => (Decision::Kill, "SIGSYS".to_string()),
        };
        *self.denied.entry((nr, errno)).or_default() += 1;
        decision
    }

    pub fn denied(&self) -> Vec<SyscallCount> {
        self.denied
            .iter()
            .map(|((nr, errno), &count)| SyscallCount {
                syscall: name(*nr),
                errno: Some(errno.clone()),
                count,
            })
            .collect()
    }

    pub fn used(&self) -> Vec<SyscallCount> {
        self.used
            .iter()
            .map(|(nr, &count)| SyscallCount {
                syscall: name(*nr),
                errno: None,
                count,
            })
            .collect()
    }
}

/// The thread serving one listener, its judge and, under a recording
/// policy, its recorder.
pub struct Supervisor {
    judge: Arc<Mutex<Judge>>,
    recorder: Option<Arc<Mutex<Recorder>>>,
    thread: Option<JoinHandle<()>>,
}

impl Supervisor {
    /// Serves the listener `listener` yields (it may block until the
    /// child has installed its filter).
    pub fn start(
        policy: &Seccomp,
        listener: impl FnOnce() -> std::io::Result<OwnedFd> + Send + 'static,
        recorder: Option<Recorder>,
    ) -> Self {
        let judge = Arc::new(Mutex::new(Judge::new(policy)));
        let recorder = recorder.map(|r| Arc::new(Mutex::new(r)));
        let (j, r) = (judge.clone(), recorder.clone());
        let thread = std::thread::Builder::new()
            .name("seccomp".into())
            .spawn(move || {
                if let Ok(fd) = listener() {
                    serve(&fd, &j, r.as_deref());
                }
            })
            .ok();
        Supervisor {
            judge,
            recorder,
            thread,
        }
    }

    /// The tallies so far: (denied, used).
    pub fn report(&self) -> (Vec<SyscallCount>, Vec<SyscallCount>) {
        let j = self.judge.lock().unwrap_or_else(|p| p.into_inner());
        (j.denied(), j.used())
    }

    /// Waits (bounded) for the last filtered process to go: its listener
    /// then reports a hang-up and the thread ends. Processes the server
    /// left running keep it going; their later calls are not counted.
    pub fn finish(mut self, within: std::time::Duration) -> (Vec<SyscallCount>, Vec<SyscallCount>) {
        let end = std::time::Instant::now() + within;
        while self.thread.as_ref().is_some_and(|t| !t.is_finished())
            && std::time::Instant::now() < end
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        if let Some(t) = self.thread.take().filter(|t| t.is_finished()) {
            let _ = t.join();
        }
        if let Some(r) = &self.recorder {
            r.lock().unwrap_or_else(|p| p.into_inner()).end();
        }
        self.report()
    }
}

fn serve(listener: &OwnedFd, judge: &Mutex<Judge>, recorder: Option<&Mutex<Recorder>>) {
    let fd = listener.as_raw_fd();
    loop {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one pollfd we own.
        let n = unsafe { libc::poll(&mut pfd, 1, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if pfd.revents & libc::POLLIN == 0 {
            // POLLHUP: no process is left in the filter.
            return;
        }
        // SAFETY: the kernel fills a zeroed seccomp_notif (it must be
        // zeroed on entry).
        let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        if unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut req) } != 0 {
            // ENOENT: the caller died before we read it.
            continue;
        }
        let decision = judge.lock().unwrap_or_else(|p| p.into_inner()).decide(
            req.data.nr as u32,
            req.data.args,
            req.pid,
        );
        if let Some(r) = recorder {
            // While the caller waits: its memory and directories are as
            // the call sees them.
            let denied = match decision {
                Decision::Continue => None,
                Decision::Errno(e) => Some(syscalls::errno_name(e)),
                Decision::Kill => Some("SIGSYS".to_string()),
            };
            r.lock().unwrap_or_else(|p| p.into_inner()).record(
                req.pid,
                req.data.nr as u32,
                req.data.args,
                denied,
            );
        }
        let mut resp = libc::seccomp_notif_resp {
            id: req.id,
            val: 0,
            error: 0,
            flags: 0,
        };
        match decision {
            Decision::Continue => resp.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
            Decision::Errno(e) => resp.error = -e,
            Decision::Kill => {
                // SAFETY: a signal to the caller's pid, as the kernel would
                // send on SECCOMP_RET_KILL_PROCESS.
                unsafe { libc::kill(req.pid as libc::pid_t, libc::SIGSYS) };
                resp.error = -libc::EPERM;
            }
        }
        // ENOENT here too if the caller is gone; nothing to do.
        // SAFETY: SEND reads the response we pass.
        unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nr(name: &str) -> u32 {
        syscalls::number(name).unwrap()
    }

    #[test]
    fn the_judge_answers_and_counts() {
        let mut j = Judge::new(&Seccomp {
            rules: vec![
                Rule {
                    syscall: "execve".into(),
                    action: Action::Errno(libc::EPERM),
                    when: When::InChildren,
                },
                Rule {
                    syscall: "socket".into(),
                    action: Action::Errno(libc::EACCES),
                    when: When::ArgIn {
                        arg: 0,
                        values: vec![2],
                    },
                },
            ],
            log: true,
            allow: None,
            record: false,
        });
        // The server execs twice (a shebang, then env to node): allowed.
        assert_eq!(j.decide(nr("execve"), [0; 6], 10), Decision::Continue);
        assert_eq!(j.decide(nr("execve"), [0; 6], 10), Decision::Continue);
        // What it spawns may not.
        assert_eq!(
            j.decide(nr("execve"), [0; 6], 11),
            Decision::Errno(libc::EPERM)
        );
        assert_eq!(
            j.decide(nr("execve"), [0; 6], 12),
            Decision::Errno(libc::EPERM)
        );
        assert_eq!(
            j.decide(nr("socket"), [1, 0, 0, 0, 0, 0], 10),
            Decision::Continue
        );
        assert_eq!(
            j.decide(nr("socket"), [2, 0, 0, 0, 0, 0], 10),
            Decision::Errno(libc::EACCES)
        );
        assert_eq!(j.decide(nr("read"), [0; 6], 10), Decision::Continue);
        assert_eq!(
            j.denied(),
            vec![
                SyscallCount {
                    syscall: "socket".into(),
                    errno: Some("EACCES".into()),
                    count: 1
                },
                SyscallCount {
                    syscall: "execve".into(),
                    errno: Some("EPERM".into()),
                    count: 2
                },
            ]
        );
        let used: Vec<_> = j.used().into_iter().map(|c| (c.syscall, c.count)).collect();
        assert_eq!(
            used,
            vec![
                ("read".into(), 1),
                ("socket".into(), 2),
                ("execve".into(), 4)
            ]
        );
    }
}
