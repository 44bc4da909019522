//! A stopped `mcpvm run` ends promptly and leaves nothing behind,
//! wherever its guest got to. An audit or probe that is killed passes
//! SIGTERM on to its runs (PR_SET_PDEATHSIG), and a run stopped while its
//! guest was still booting used to wait for channels the agent never
//! opened. These run on the host: the VM is built and started on whatever
//! /dev/kvm is here (on a kvm_pvm host the guest never gets far, which is
//! exactly the "stopped during boot" case). probes::transport::wire's tests cover the
//! parent-death signal itself.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a stopped run may take to end: the vCPU stop grace (2 s) plus
/// the relays' drain (2 s), with room for a loaded machine.
const STOP_BOUND: Duration = Duration::from_secs(5);

fn start_run() -> std::process::Child {
    Command::new(common::artifact("bin/mcpvm"))
        .args(["run", "--allow-pvm", "--timeout", "120", "--", "/bin/true"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `child` up to `bound`; kills it and fails if it is still
/// there then.
fn ended_within(mut child: std::process::Child, bound: Duration) -> (i32, Duration) {
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            use std::os::unix::process::ExitStatusExt;
            let code = status.code().or(status.signal().map(|s| 128 + s)).unwrap();
            return (code, t0.elapsed());
        }
        if t0.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the stopped run was still there after {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_run_stopped_at_any_point_of_its_start_ends_promptly() {
    // From before the signal handlers exist to well into the boot.
    for delay_ms in [0, 5, 20, 60, 150, 400, 1000] {
        let child = start_run();
        let pid = child.id() as i32;
        std::thread::sleep(Duration::from_millis(delay_ms));
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let (code, took) = ended_within(child, STOP_BOUND);
        assert_eq!(code, 143, "stopped {delay_ms} ms after start");
        eprintln!("stopped after {delay_ms} ms: ended {took:?} later");
        assert!(
            !std::path::Path::new(&format!("/tmp/mcpvm-{}/{pid}", unsafe { libc::getuid() }))
                .exists(),
            "its run directory is gone"
        );
    }
}
