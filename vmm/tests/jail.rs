//! The jail, entered by a child process of this test (a process with one
//! thread, which the kernel requires) that then tries what a compromised
//! VMM would and prints what happened, one `check result` per line.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Command;

use vmm::jail::{Jail, JailError};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("child") => child(&args[2..]),
        Some("refused") => refused(&args[2]),
        _ => {
            if parent() {
                a_host_that_refuses_the_mounts_leaves_the_process_unjailed();
            }
        }
    }
}

/// A host that lets the user namespace through and refuses what follows
/// (AppArmor's restricted user namespaces do): `Unavailable`, and the
/// process still sees the host as before, so `--jail auto` goes on.
fn a_host_that_refuses_the_mounts_leaves_the_process_unjailed() {
    let work = tempfile::tempdir().unwrap();
    let outside = work.path().join("outside");
    std::fs::write(&outside, "still here").unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .arg("refused")
        .arg(&outside)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("unavailable: make the mounts private"),
        "{stdout}"
    );
    assert!(stdout.contains("read: still here"), "{stdout}");
    println!("jail: a refused mount leaves the process unjailed:\n{stdout}");
}

fn refused(outside: &str) {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
    // mount(2) fails with EPERM, as a restricting host's would.
    let rules = [(libc::SYS_mount, vec![])].into_iter().collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        TargetArch::x86_64,
    )
    .unwrap();
    let prog: BpfProgram = filter.try_into().unwrap();
    seccompiler::apply_filter(&prog).unwrap();
    let build_at = tempfile::tempdir().unwrap();
    match Jail::new(build_at.path())
        .bind(Path::new(outside), false)
        .enter()
    {
        Err(JailError::Unavailable(e)) => println!("unavailable: {e}"),
        Err(e) => panic!("a refused mount must leave the process as it was: {e}"),
        Ok(()) => panic!("the jail was built with mount refused"),
    }
    println!(
        "read: {}",
        std::fs::read_to_string(outside).unwrap_or_default()
    );
}

/// What the jailed child did, checked from outside; false when this host
/// gives no user namespace (and says so).
fn parent() -> bool {
    let work = tempfile::tempdir().unwrap();
    let (bound, outside, scratch) = (
        work.path().join("bound"),
        work.path().join("outside"),
        work.path().join("scratch"),
    );
    let build_at = work.path().join("jail");
    for d in [&bound, &outside, &build_at] {
        std::fs::create_dir(d).unwrap();
    }
    let kernel = work.path().join("kernel");
    std::fs::write(&kernel, "vmlinux").unwrap();
    std::fs::write(outside.join("secret"), "precious").unwrap();
    let _inside_listener = UnixListener::bind(bound.join("in.sock")).unwrap();
    let _outside_listener = UnixListener::bind(outside.join("out.sock")).unwrap();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port().to_string();

    let out = Command::new(std::env::current_exe().unwrap())
        .arg("child")
        .args([&bound, &kernel, &outside, &scratch, &build_at].map(|p| p.display().to_string()))
        .arg(&port)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(why) = stdout.strip_prefix("unavailable: ") {
        // Not silent: the output says the jail went untested, and why.
        println!("jail: NOT TESTED: this host gives no user namespace: {why}");
        return false;
    }
    assert!(
        out.status.success(),
        "the child failed:\n{stdout}\n{stderr}"
    );
    let expected = [
        ("read the read-only kernel", "ok"),
        ("write the read-only kernel", "denied"),
        ("write in the writable directory", "ok"),
        ("write in the scratch directory", "ok"),
        ("write at the jail's root", "denied"),
        ("read a file outside", "denied"),
        ("read /etc/passwd", "denied"),
        ("connect to a socket in the bound directory", "ok"),
        ("connect to a socket outside", "denied"),
        ("connect to the host's loopback", "denied"),
        ("mount a tmpfs", "denied"),
        ("chroot", "denied"),
    ];
    let mut failed = Vec::new();
    for (check, want) in expected {
        let got = stdout
            .lines()
            .find_map(|l| l.strip_prefix(check).map(|r| r.trim().to_string()))
            .unwrap_or_else(|| "missing".into());
        if !got.starts_with(want) {
            failed.push(format!("{check}: want {want}, got {got}"));
        }
    }
    assert!(
        failed.is_empty(),
        "{}\n--- child said:\n{stdout}{stderr}",
        failed.join("\n")
    );
    assert_eq!(
        std::fs::read_to_string(bound.join("written")).unwrap(),
        "from the jail"
    );
    assert!(
        !scratch.exists(),
        "the scratch directory lives only in the jail"
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("secret")).unwrap(),
        "precious"
    );
    println!("jail: {} checks passed:\n{stdout}", expected.len());
    true
}

fn child(args: &[String]) {
    let [bound, kernel, outside, scratch, build_at, port] = args else {
        panic!("child BOUND KERNEL OUTSIDE SCRATCH BUILD_AT PORT");
    };
    let build_at = PathBuf::from(build_at);
    let (bound, kernel, outside, scratch) = (
        PathBuf::from(bound),
        PathBuf::from(kernel),
        PathBuf::from(outside),
        PathBuf::from(scratch),
    );
    let mut jail = Jail::new(&build_at);
    jail.bind(&bound, true)
        .bind(&kernel, false)
        .scratch(&scratch);
    match jail.enter() {
        Err(JailError::Unavailable(e)) => {
            println!("unavailable: {e}");
            return;
        }
        Err(e) => panic!("{e}: {:?}", std::error::Error::source(&e)),
        Ok(()) => {}
    }
    let say = |check: &str, r: std::io::Result<String>| match r {
        Ok(detail) => println!("{check} ok {detail}"),
        Err(e) => println!("{check} denied ({e})"),
    };
    say(
        "read the read-only kernel",
        std::fs::read_to_string(&kernel),
    );
    say(
        "write the read-only kernel",
        std::fs::write(&kernel, "evil").map(|_| String::new()),
    );
    say(
        "write in the writable directory",
        std::fs::write(bound.join("written"), "from the jail").map(|_| String::new()),
    );
    say(
        "write in the scratch directory",
        std::fs::write(scratch.join("s"), "x").map(|_| String::new()),
    );
    say(
        "write at the jail's root",
        std::fs::write("/planted", "x").map(|_| String::new()),
    );
    say(
        "read a file outside",
        std::fs::read_to_string(outside.join("secret")),
    );
    say("read /etc/passwd", std::fs::read_to_string("/etc/passwd"));
    say(
        "connect to a socket in the bound directory",
        connect(&bound.join("in.sock")),
    );
    say(
        "connect to a socket outside",
        connect(&outside.join("out.sock")),
    );
    say(
        "connect to the host's loopback",
        std::net::TcpStream::connect(format!("127.0.0.1:{port}")).map(|_| String::new()),
    );
    say("mount a tmpfs", mount_tmpfs(&scratch));
    // SAFETY: a NUL-terminated path.
    let chrooted = unsafe { libc::chroot(c".".as_ptr()) };
    say(
        "chroot",
        match chrooted {
            0 => Ok(String::new()),
            _ => Err(std::io::Error::last_os_error()),
        },
    );
}

fn connect(path: &Path) -> std::io::Result<String> {
    let mut s = UnixStream::connect(path)?;
    let _ = s.write_all(b"");
    let _ = s.set_nonblocking(true);
    let _ = s.read(&mut [0; 1]);
    Ok(String::new())
}

fn mount_tmpfs(at: &Path) -> std::io::Result<String> {
    let target = std::ffi::CString::new(at.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: NUL-terminated strings that outlive the call.
    let rc = unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    match rc {
        0 => Ok(String::new()),
        _ => Err(std::io::Error::last_os_error()),
    }
}
