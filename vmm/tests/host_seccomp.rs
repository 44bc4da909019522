//! The VMM's host seccomp filters on real threads. Each case re-runs this
//! test binary as a child (a filter cannot be taken off again) that
//! confines a thread and makes calls; the parent checks how it ended.

use std::process::{Command, Output};

use vmm::devices::virtio::vsock::connector::Connector;
use vmm::host_seccomp::{confine, SeccompMode, ThreadKind, EXIT_BAD_SYSCALL};

const CHILD: &str = "MCPVM_SECCOMP_CHILD";

/// This test binary, set to run only the test named `name`, as a child.
fn child_command(name: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1");
    c
}

/// Runs the test named `name` in a child and waits for it.
fn child(name: &str) -> Output {
    child_command(name).output().unwrap()
}

fn in_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// In the child: runs `f` on a thread confined as `kind` in `mode`.
fn confined(kind: ThreadKind, mode: SeccompMode, f: impl FnOnce() + Send + 'static) {
    std::thread::spawn(move || {
        confine(kind, mode).unwrap();
        f();
    })
    .join()
    .unwrap();
}

fn inet_socket() -> i32 {
    // SAFETY: socket() has no memory arguments.
    unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) }
}

#[test]
fn vcpu_thread_calling_outside_its_filter_stops_the_vmm_and_says_why() {
    if in_child() {
        confined(ThreadKind::Vcpu, SeccompMode::On, || {
            inet_socket();
            eprintln!("not reached");
        });
        return;
    }
    let out = child("vcpu_thread_calling_outside_its_filter_stops_the_vmm_and_says_why");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(EXIT_BAD_SYSCALL), "{stderr}");
    assert!(
        stderr.contains("a vcpu thread made the system call socket (41)"),
        "{stderr}"
    );
    assert!(!stderr.contains("not reached"), "{stderr}");
}

#[test]
fn log_mode_lets_the_call_through() {
    if in_child() {
        confined(ThreadKind::Vcpu, SeccompMode::Log, || {
            let fd = inet_socket();
            assert!(fd >= 0, "socket refused in log mode");
            println!("socket fd {fd}");
        });
        return;
    }
    let c = child_command("log_mode_lets_the_call_through")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = c.id();
    let out = c.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("socket fd "), "{stdout}");
    // The kernel's record of it, where this user may read the kernel log.
    // The record reaches the log through the kernel's audit thread, after
    // the call returned: it is looked for until it comes, at most 10 s.
    let needle = format!("pid={pid} ");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let log = match Command::new("dmesg").output() {
            Ok(d) if d.status.success() => String::from_utf8_lossy(&d.stdout).into_owned(),
            _ => {
                eprintln!(
                    "the kernel log is not readable here: the record of the call is not checked"
                );
                return;
            }
        };
        if log
            .lines()
            .any(|l| l.contains("type=1326") && l.contains(&needle) && l.contains("syscall=41"))
        {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no seccomp log record for pid {pid} calling socket (41) within 10 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn allowed_calls_work_under_the_filter() {
    if in_child() {
        // A vCPU thread: channels, sleeping, eventfds, logging, KVM_RUN
        // (on a bad fd: refused by the kernel, not by the filter).
        confined(ThreadKind::Vcpu, SeccompMode::On, || {
            let (tx, rx) = std::sync::mpsc::channel();
            tx.send(1).unwrap();
            assert_eq!(rx.recv().unwrap(), 1);
            std::thread::sleep(std::time::Duration::from_millis(1));
            let e = vmm_sys_util::eventfd::EventFd::new(libc::EFD_NONBLOCK).unwrap();
            e.write(1).unwrap();
            assert_eq!(e.read().unwrap(), 1);
            let _dup = e.try_clone().unwrap();
            // SAFETY: ioctl on an invalid fd only returns EBADF.
            let rc = unsafe { libc::ioctl(-1, 0xae80) };
            assert_eq!(rc, -1);
            eprintln!("vcpu ok");
        });
        // vsock: a guest stream's host socket comes from the connector
        // (its own confined thread), connected to `<uds>_<port>`.
        let dir = tempfile::tempdir().unwrap();
        let uds = dir.path().join("v.sock");
        let listener =
            std::os::unix::net::UnixListener::bind(dir.path().join("v.sock_1024")).unwrap();
        let connector = Connector::start(&uds, SeccompMode::On).unwrap();
        confined(ThreadKind::Vsock, SeccompMode::On, move || {
            let a = connector.connect(1024).unwrap();
            a.set_nonblocking(true).unwrap();
            let (mut b, _) = listener.accept().unwrap();
            std::io::Write::write_all(&mut b, b"x").unwrap();
            eprintln!("vsock ok");
        });
        return;
    }
    let out = child("allowed_calls_work_under_the_filter");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("vcpu ok") && stderr.contains("vsock ok"),
        "{stderr}"
    );
}

#[test]
fn vsock_thread_may_not_open_inet_sockets_nor_vcpu_other_ioctls() {
    if in_child() {
        match std::env::var("CASE").as_deref() {
            Ok("vsock") => confined(ThreadKind::Vsock, SeccompMode::On, || {
                inet_socket();
            }),
            _ => confined(ThreadKind::Vcpu, SeccompMode::On, || {
                // SAFETY: TCGETS on stdin with a valid buffer.
                let mut t: libc::termios = unsafe { std::mem::zeroed() };
                unsafe { libc::ioctl(0, libc::TCGETS, &mut t) };
            }),
        }
        return;
    }
    for (case, call) in [("vsock", "socket (41)"), ("vcpu", "ioctl (16)")] {
        let out = child_command("vsock_thread_may_not_open_inet_sockets_nor_vcpu_other_ioctls")
            .env("CASE", case)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(EXIT_BAD_SYSCALL),
            "{case}: {stderr}"
        );
        assert!(
            stderr.contains(&format!("system call {call}")),
            "{case}: {stderr}"
        );
    }
}

#[test]
fn guest_facing_threads_cannot_open_host_files() {
    if in_child() {
        confined(ThreadKind::Block, SeccompMode::On, || {
            let _ = std::fs::File::open("/etc/hostname");
        });
        return;
    }
    let out = child("guest_facing_threads_cannot_open_host_files");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(EXIT_BAD_SYSCALL), "{stderr}");
    assert!(
        stderr.contains("a virtio-blk thread made the system call openat"),
        "{stderr}"
    );
}

#[test]
fn a_thread_that_frees_much_memory_stays_within_its_filter() {
    if in_child() {
        // glibc shrinks a thread arena's heap after a large free, and the
        // first time it checks /proc/sys/vm/overcommit_memory (openat).
        confined(ThreadKind::Rng, SeccompMode::On, || {
            for _ in 0..3 {
                let v: Vec<Vec<u8>> = (0..20_000).map(|i| vec![i as u8; 1000]).collect();
                drop(v);
            }
            eprintln!("freed");
        });
        return;
    }
    let out = child("a_thread_that_frees_much_memory_stays_within_its_filter");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("freed"), "{stderr}");
}

#[test]
fn a_confined_vsock_thread_cannot_connect_anywhere() {
    if in_child() {
        // The session bus, docker.sock, an agent socket: any Unix socket
        // outside the run directory. Not even one inside it: connecting
        // is the connector's job.
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("docker.sock");
        let _l = std::os::unix::net::UnixListener::bind(&elsewhere).unwrap();
        confined(ThreadKind::Vsock, SeccompMode::On, move || {
            let r = std::os::unix::net::UnixStream::connect(&elsewhere);
            eprintln!("not reached: {r:?}");
        });
        return;
    }
    let out = child("a_confined_vsock_thread_cannot_connect_anywhere");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(EXIT_BAD_SYSCALL), "{stderr}");
    assert!(
        stderr.contains("a vsock thread made the system call socket"),
        "{stderr}"
    );
    assert!(!stderr.contains("not reached"), "{stderr}");
}

#[test]
fn a_vcpu_thread_may_signal_its_own_process_and_no_other() {
    const OTHER: &str = "MCPVM_SECCOMP_OTHER_PID";
    if in_child() {
        let other: i32 = std::env::var(OTHER).unwrap().parse().unwrap();
        confined(ThreadKind::Vcpu, SeccompMode::On, move || {
            // SAFETY: getpid and gettid have no preconditions; signal 0
            // only checks that the target exists.
            let own = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), libc::gettid(), 0) };
            eprintln!("own process: {own}");
            unsafe { libc::syscall(libc::SYS_tgkill, other, other, libc::SIGTERM) };
            eprintln!("not reached");
        });
        return;
    }
    let mut other = Command::new("sleep").arg("30").spawn().unwrap();
    let out = child_command("a_vcpu_thread_may_signal_its_own_process_and_no_other")
        .env(OTHER, other.id().to_string())
        .output()
        .unwrap();
    let alive = other.try_wait().unwrap().is_none();
    let _ = other.kill();
    let _ = other.wait();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("own process: 0"), "{stderr}");
    assert_eq!(out.status.code(), Some(EXIT_BAD_SYSCALL), "{stderr}");
    assert!(stderr.contains("made the system call tgkill"), "{stderr}");
    assert!(!stderr.contains("not reached"), "{stderr}");
    assert!(alive, "the other process was signalled");
}
