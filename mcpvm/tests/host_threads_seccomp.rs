//! mcpvm's own host threads under their seccomp filters, on real
//! threads: the case re-runs this test binary as a child (a filter
//! cannot be taken off again) that confines a thread and makes calls;
//! the parent checks how it ended. (The workspace's and the egress
//! proxy's filters have tests of their own: workspace_seccomp,
//! egress_process.)

use std::process::{Command, Output};

use mcpvm::host::seccomp::{confine, HostThread};
use vmm::SeccompMode;

const CHILD: &str = "MCPVM_HOST_THREADS_CHILD";

/// Runs the test named `name` in a child (this test binary, set to run
/// only it) and waits for it.
fn child(name: &str) -> Output {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap()
}

fn in_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// In the child: runs `f` on a thread confined as `kind` in `mode`.
fn confined(kind: HostThread, mode: SeccompMode, f: impl FnOnce() + Send + 'static) {
    std::thread::spawn(move || {
        confine(kind, mode).unwrap();
        f();
    })
    .join()
    .unwrap();
}

#[test]
fn a_channels_thread_starts_relays_that_confine_themselves() {
    if in_child() {
        use std::io::{Read, Write};
        use std::os::unix::net::UnixStream;
        // Made before, as the run's listeners are.
        let (a, mut b) = UnixStream::pair().unwrap();
        confined(HostThread::Channels, SeccompMode::On, move || {
            // A relay, started by the confined thread, stacks its filter.
            let relay = std::thread::spawn(move || {
                confine(HostThread::Relay, SeccompMode::On).unwrap();
                let mut buf = [0u8; 5];
                (&a).read_exact(&mut buf).unwrap();
                (&a).write_all(&buf).unwrap();
            });
            b.write_all(b"hello").unwrap();
            let mut back = [0u8; 5];
            b.read_exact(&mut back).unwrap();
            relay.join().unwrap();
            eprintln!("relayed {}", String::from_utf8_lossy(&back));
            // A relay may not start threads of its own.
            std::thread::spawn(|| {
                confine(HostThread::Relay, SeccompMode::On).unwrap();
                let _ = std::thread::spawn(|| eprintln!("not reached"));
            })
            .join()
            .unwrap();
        });
        return;
    }
    let out = child("a_channels_thread_starts_relays_that_confine_themselves");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("relayed hello"), "{stderr}");
    // glibc blocks every signal around clone3, so the kernel forces the
    // trap's SIGSYS with its default action: the process ends by it.
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGSYS), "{stderr}");
    assert!(!stderr.contains("not reached"), "{stderr}");
}
