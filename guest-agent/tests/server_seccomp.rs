//! The seccomp confinement on this host's kernel (no VM needed): real
//! programs under real filters, the supervisor answering and counting.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use guest_agent::server_seccomp as seccomp;
use mcpvm_protocol::messages::{Counter, SyscallCount};
use mcpvm_protocol::withholding::{Action, Resource, Rlimit, Rule, Seccomp, When};

struct Run {
    out: Output,
    denied: Vec<SyscallCount>,
    used: Vec<SyscallCount>,
}

/// Runs `sh -c script` confined; returns its output and the tallies.
fn confined(script: &str, rlimits: &[Rlimit], policy: &Seccomp) -> Run {
    // Notifications: the kernel's histogram is global, and this is the
    // host's kernel (the guest's count is tested in withhold_linux).
    let (child, parent) = seccomp::prepare(rlimits, Some(policy), Counter::Notification).unwrap();
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", script]);
    // SAFETY: pre_exec only makes async-signal-safe calls.
    unsafe { cmd.pre_exec(move || child.pre_exec()) };
    let sup = parent.supervise(None).expect("a supervisor");
    let proc = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = proc.wait_with_output().unwrap();
    let t = sup.finish(Duration::from_secs(5));
    assert_eq!(t.counted_by, Counter::Notification);
    Run {
        out,
        denied: t.denied,
        used: t.used,
    }
}

fn deny(syscall: &str, errno: i32, when: When) -> Rule {
    Rule {
        syscall: syscall.into(),
        action: Action::Errno(errno),
        when,
    }
}

fn count(list: &[SyscallCount], syscall: &str) -> u64 {
    list.iter()
        .filter(|c| c.syscall == syscall)
        .map(|c| c.count)
        .sum()
}

fn stdout(r: &Run) -> String {
    String::from_utf8_lossy(&r.out.stdout).to_string()
}

#[test]
fn a_denied_call_fails_with_the_errno_and_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "mkdir {0}/a; echo rc=$?; mkdir {0}/b; ls {0}",
        dir.path().display()
    );
    let policy = Seccomp {
        rules: vec![
            deny("mkdir", libc::EROFS, When::Always),
            deny("mkdirat", libc::EROFS, When::Always),
        ],
        log: false,
        allow: None,
        record: false,
    };
    let r = confined(&script, &[], &policy);
    let stderr = String::from_utf8_lossy(&r.out.stderr);
    assert!(stdout(&r).contains("rc=1"), "{}", stdout(&r));
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    let n = count(&r.denied, "mkdir") + count(&r.denied, "mkdirat");
    assert_eq!(n, 2, "{:?}", r.denied);
    assert!(r.denied.iter().all(|d| d.errno.as_deref() == Some("EROFS")));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn deny_exec_lets_the_server_exec_itself_but_not_spawn_programs() {
    let policy = Seccomp {
        rules: vec![
            deny("execve", libc::EPERM, When::InChildren),
            deny("execveat", libc::EPERM, When::InChildren),
        ],
        log: false,
        allow: None,
        record: false,
    };
    // The shell execs itself into env and env into sh: still the server.
    let r = confined(
        "exec /usr/bin/env sh -c 'echo started; /bin/true; echo rc=$?'",
        &[],
        &policy,
    );
    assert!(stdout(&r).contains("started"), "{}", stdout(&r));
    // sh reports 126 for a command it found but could not execute.
    assert!(stdout(&r).contains("rc=126"), "{}", stdout(&r));
    assert_eq!(count(&r.denied, "execve"), 1, "{:?}", r.denied);
}

#[test]
fn inet_sockets_are_refused_and_unix_sockets_are_not() {
    let policy = Seccomp {
        rules: vec![Rule {
            syscall: "socket".into(),
            action: Action::Errno(libc::EACCES),
            when: When::ArgIn {
                arg: 0,
                values: vec![libc::AF_INET as u32, libc::AF_INET6 as u32],
            },
        }],
        log: false,
        allow: None,
        record: false,
    };
    let py = "import socket\n\
              socket.socket(socket.AF_UNIX).close(); print('unix ok')\n\
              try:\n    socket.socket(socket.AF_INET)\n\
              except PermissionError as e: print('inet', e.errno)";
    let r = confined(&format!("exec python3 -c \"{py}\""), &[], &policy);
    assert!(
        stdout(&r).contains("unix ok"),
        "{} {}",
        stdout(&r),
        String::from_utf8_lossy(&r.out.stderr)
    );
    assert!(
        stdout(&r).contains(&format!("inet {}", libc::EACCES)),
        "{}",
        stdout(&r)
    );
    assert_eq!(count(&r.denied, "socket"), 1, "{:?}", r.denied);
}

#[test]
fn log_mode_records_every_call_the_program_made() {
    let policy = Seccomp {
        rules: vec![],
        log: true,
        allow: None,
        record: false,
    };
    let r = confined("echo hello; cat /dev/null", &[], &policy);
    assert_eq!(stdout(&r), "hello\n");
    assert!(r.out.status.success());
    assert!(r.denied.is_empty());
    let forks = count(&r.used, "clone") + count(&r.used, "clone3") + count(&r.used, "vfork");
    assert!(forks > 0, "{:?}", r.used);
    for call in ["execve", "write", "wait4", "exit_group"] {
        assert!(count(&r.used, call) > 0, "{call} missing from {:?}", r.used);
    }
}

#[test]
fn an_allow_list_from_a_logged_run_runs_the_same_program_and_nothing_more() {
    let log = Seccomp {
        rules: vec![],
        log: true,
        allow: None,
        record: false,
    };
    let logged = confined("echo hello", &[], &log);
    let mut allowed: Vec<String> = logged.used.iter().map(|c| c.syscall.clone()).collect();
    let minimal = Seccomp {
        rules: vec![],
        log: false,
        allow: Some(mcpvm_protocol::withholding::Allow {
            syscalls: allowed.clone(),
            errno: libc::ENOSYS,
        }),
        record: false,
    };
    let again = confined("echo hello", &[], &minimal);
    assert_eq!(stdout(&again), "hello\n");
    assert!(again.denied.is_empty(), "{:?}", again.denied);
    // Without write, the same program cannot print.
    allowed.retain(|c| c != "write");
    let strict = Seccomp {
        allow: Some(mcpvm_protocol::withholding::Allow {
            syscalls: allowed,
            errno: libc::ENOSYS,
        }),
        ..minimal
    };
    let r = confined("echo hello", &[], &strict);
    assert_eq!(stdout(&r), "");
    assert!(count(&r.denied, "write") > 0, "{:?}", r.denied);
}

#[test]
fn a_kill_rule_ends_the_process_with_sigsys() {
    let policy = Seccomp {
        rules: vec![Rule {
            syscall: "getsid".into(),
            action: Action::Kill,
            when: When::Always,
        }],
        log: false,
        allow: None,
        record: false,
    };
    let script = "echo before; exec python3 -c 'import os; os.getsid(0); print(1)'";
    let r = confined(script, &[], &policy);
    assert_eq!(r.out.status.signal(), Some(libc::SIGSYS), "{:?}", r.out);
    assert_eq!(stdout(&r), "before\n");
}

#[test]
fn rlimits_apply_to_the_program() {
    let limits = [Rlimit {
        resource: Resource::Nofile,
        value: 12,
    }];
    let r = confined("ulimit -n", &limits, &Seccomp::default());
    assert_eq!(stdout(&r).trim(), "12");
}

#[test]
fn a_recording_policy_records_files_programs_and_addresses_with_their_call() {
    use guest_agent::calls::Calls;
    use guest_agent::server_seccomp::effects::{Recorded, Recorder};
    use mcpvm_protocol::messages::During;
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    std::fs::write(dir.path().join("secret"), "token").unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret"), dir.path().join("link")).unwrap();
    // A listener for the connect, so that it is a real one (loopback).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!(
        "cd {d} && cat link > /dev/null && echo hi > made.txt && mv made.txt moved.txt \
         && /bin/true --flag=x && (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; \
         bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' 2>/dev/null"
    );
    let policy = Seccomp {
        rules: vec![
            deny("mkdir", libc::EACCES, When::Always),
            deny("mkdirat", libc::EACCES, When::Always),
        ],
        log: false,
        allow: None,
        record: true,
    };
    let calls = Arc::new(Calls::default());
    calls.sent(br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run"}}"#);
    let (tx, rx) = std::sync::mpsc::channel();
    let (child, parent) = seccomp::prepare(&[], Some(&policy), Counter::Notification).unwrap();
    let mut cmd = Command::new("/bin/bash");
    cmd.args(["-c", &format!("{script}; mkdir {d}/denied; exit 0")]);
    // SAFETY: pre_exec only makes async-signal-safe calls.
    unsafe { cmd.pre_exec(move || child.pre_exec()) };
    let sup = parent
        .supervise(Some(Recorder::new(calls.clone(), tx)))
        .expect("a supervisor");
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    sup.finish(Duration::from_secs(5));
    let effects: Vec<_> = rx
        .try_iter()
        .filter_map(|r| match r {
            Recorded::Effect(e) => Some(e),
            Recorded::End { .. } => None,
        })
        .collect();
    // By name, or by the name's *at form (glibc picks).
    let find = |call: &str, what: &dyn Fn(&mcpvm_protocol::messages::Effect) -> bool| {
        effects
            .iter()
            .find(|e| (e.call == call || e.call == format!("{call}at")) && what(e))
            .unwrap_or_else(|| panic!("no {call} like that in:\n{effects:#?}"))
    };
    let secret = dir.path().join("secret").canonicalize().unwrap();
    let read = find("openat", &|e| e.paths[0].ends_with("/link"));
    assert_eq!(read.access.as_deref(), Some("read"));
    assert_eq!(
        read.resolved.as_deref(),
        Some(secret.to_str().unwrap()),
        "the symlink is followed"
    );
    let made = find("openat", &|e| e.paths[0].ends_with("/made.txt"));
    assert_eq!(made.access.as_deref(), Some("write+create+truncate"));
    find("renameat2", &|e| {
        e.paths.len() == 2 && e.paths[1].ends_with("/moved.txt")
    });
    let exec = find("execve", &|e| {
        e.paths.first().is_some_and(|p| p.ends_with("/true"))
    });
    assert_eq!(exec.argv, vec!["/bin/true", "--flag=x"]);
    // A host with nscd sees a connect to its socket first (glibc asks it
    // before resolving), so look for the loopback one by its address.
    let loopback = format!("inet 127.0.0.1:{port}");
    find("connect", &|e| {
        e.address.as_deref() == Some(loopback.as_str())
    });
    let denied = find("mkdir", &|e| e.paths[0].ends_with("/denied"));
    assert_eq!(denied.denied.as_deref(), Some("EACCES"));
    for e in &effects {
        assert!(
            matches!(&e.during, During::Request { tool: Some(t), .. } if t == "run"),
            "every call happened during the request: {e:?}"
        );
        // The exe is the caller's before the call: an execve shows the
        // program that made it.
        assert!(e.pid > 0 && e.exe.starts_with('/'), "{e:?}");
    }
}

/// The server's identity is dropped in the child before its filter, so
/// a policy that denies the identity calls still leaves the user in
/// place, and its limits still apply after. (Raising a hard limit needs
/// CAP_SYS_RESOURCE, which PID 1 of the guest has and a container may
/// not, so the limit here is today's hard one.) Off root (a developer's
/// shell), leaving root is impossible and the spawn fails with EPERM,
/// which is asserted instead.
#[test]
fn the_child_drops_to_the_user_before_its_filter() {
    let policy = Seccomp {
        rules: vec![
            deny("setresuid", libc::EPERM, When::Always),
            deny("setgroups", libc::EPERM, When::Always),
        ],
        ..Default::default()
    };
    let mut now = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct we pass.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut now) }, 0);
    let high = Rlimit {
        resource: Resource::Nofile,
        value: now.rlim_max,
    };
    let (child, parent) = seccomp::prepare(&[high], Some(&policy), Counter::Notification).unwrap();
    let child = child.as_user(65534, 65534);
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", "id -u; id -g; id -G; ulimit -n"]);
    // SAFETY: pre_exec only makes async-signal-safe calls.
    unsafe { cmd.pre_exec(move || child.pre_exec()) };
    let sup = parent.supervise(None).expect("a supervisor");
    let spawned = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        let e = spawned.expect_err("only root can change its identity");
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
        return;
    }
    let out = spawned.unwrap().wait_with_output().unwrap();
    sup.finish(Duration::from_secs(5));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("65534\n65534\n65534\n{}\n", now.rlim_max)
    );
}
