//! Run mode: take the run spec from the host over vsock, spawn the server,
//! relay its stdio, report events, and return its exit status.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::links::{self, Channels, Links, Which};
use crate::vsock;
use guest_agent::channels::*;
use guest_agent::seccomp;

/// The longest run spec we accept (one JSON line).
const MAX_SPEC: u64 = 1 << 20;
/// How long draining a stream may take once the server has exited (its
/// grandchildren may hold a pipe open forever).
const DRAIN: Duration = Duration::from_secs(3);
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";

type Events = Arc<Mutex<File>>;

fn send(events: &Events, e: &Event) {
    let mut line = serde_json::to_string(e).expect("events serialize");
    line.push('\n');
    let _ = events
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .write_all(line.as_bytes());
}

/// A read position in the kernel log (/dev/kmsg), to see what the kernel
/// said while the server ran. (Our kernel has no VM event counters, so
/// /proc/vmstat has no oom_kill count; the log has the OOM killer's record.)
struct KernelLog(Option<File>);

impl KernelLog {
    /// Opens the log positioned at its end.
    fn from_now() -> Self {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open("/dev/kmsg")
            .ok();
        if let Some(f) = &f {
            // SAFETY: lseek on an fd we own; SEEK_END on kmsg skips old records.
            unsafe { libc::lseek(f.as_raw_fd(), 0, libc::SEEK_END) };
        }
        KernelLog(f)
    }

    /// True when the OOM killer acted since `from_now`.
    fn oom_killed(&mut self) -> bool {
        let Some(f) = &mut self.0 else { return false };
        let mut record = vec![0u8; 8192];
        let mut seen = false;
        loop {
            // Each read returns one record; EAGAIN at the end, EPIPE when a
            // record was overwritten (keep reading).
            match f.read(&mut record) {
                Ok(0) => return seen,
                Ok(n) => {
                    seen |= String::from_utf8_lossy(&record[..n])
                        .contains("Out of memory: Killed process")
                }
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
                Err(_) => return seen,
            }
        }
    }
}

pub fn uptime_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the struct we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

/// Runs `f` on a thread; returns a receiver that fires when it is done.
fn spawn_done(f: impl FnOnce() + Send + 'static) -> mpsc::Receiver<()> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    rx
}

/// Waits for any child until `pid` exits, reaping orphans on the way
/// (we are PID 1). Returns the raw wait status.
fn wait_for(pid: libc::pid_t) -> i32 {
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes the status we pass.
        let got = unsafe { libc::waitpid(-1, &mut status, 0) };
        if got == pid {
            return status;
        }
        if got < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
            return 0;
        }
    }
}

pub fn run_over_vsock() -> io::Result<u8> {
    let control = vsock::connect(HOST_CID, CONTROL_PORT)?;
    let events: Events = Arc::new(Mutex::new(control.try_clone()?));
    send(
        &events,
        &Event::AgentStart {
            uptime_ms: uptime_ms(),
        },
    );

    let mut line = String::new();
    BufReader::new(control.try_clone()?.take(MAX_SPEC)).read_line(&mut line)?;
    let spec: RunSpec = serde_json::from_str(&line)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("bad run spec: {e}")))?;
    let Some((program, args)) = spec.argv.split_first() else {
        send(
            &events,
            &Event::SpawnFailed {
                error: "empty argv".into(),
            },
        );
        return Ok(127);
    };

    let stdio = vsock::connect(HOST_CID, STDIO_PORT)?;
    let stderr_ch = vsock::connect(HOST_CID, STDERR_PORT)?;

    // The workspace is in place before the server starts.
    let workspace = match spec.workspace {
        Some(ws) => {
            let conn = vsock::connect(HOST_CID, WORKSPACE_PORT)?;
            if let Err(e) = crate::workspace::receive(&conn) {
                let msg = format!("cannot unpack the workspace into {WORKSPACE_DIR}: {e}");
                return Ok(not_started(
                    &events, &control, &stdio, &stderr_ch, &msg, 126,
                ));
            }
            Some((ws, conn))
        }
        None => None,
    };

    if let Some(setup) = &spec.setup {
        if let Err(msg) = run_setup(setup, &spec, &stderr_ch) {
            return Ok(not_started(
                &events, &control, &stdio, &stderr_ch, &msg, 126,
            ));
        }
    }
    let policy = &spec.policy;
    if let Err(e) = crate::withhold::apply_mounts(policy) {
        return Ok(not_started(
            &events,
            &control,
            &stdio,
            &stderr_ch,
            &e.to_string(),
            126,
        ));
    }
    let (confine, supervise) = match seccomp::prepare(&policy.rlimits, policy.seccomp.as_ref()) {
        Ok(halves) => halves,
        Err(e) => {
            let msg = format!("cannot apply the policy: {e}");
            return Ok(not_started(
                &events, &control, &stdio, &stderr_ch, &msg, 126,
            ));
        }
    };
    let mut cmd = Command::new(program);
    cmd.args(args).env_clear();
    if !policy.bare_env {
        cmd.env("PATH", DEFAULT_PATH).env("HOME", "/root");
    }
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
    // SAFETY: pre_exec makes only async-signal-safe calls (seccomp's docs).
    unsafe { cmd.pre_exec(move || confine.pre_exec()) };
    // Before the spawn: the server's own execve may be a notified call.
    let supervisor = policy.seccomp.as_ref().and_then(|p| supervise.supervise(p));
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let spawned = cmd.spawn();
    drop(cmd); // the child's end of the listener socketpair
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let msg = format!("cannot run {program}: {e}");
            return Ok(not_started(
                &events, &control, &stdio, &stderr_ch, &msg, 127,
            ));
        }
    };
    let mut kernel_log = KernelLog::from_now();
    send(&events, &Event::Spawned { pid: child.id() });

    // From here on the host channels may be replaced (a restore).
    let links = Arc::new(Links::new(Channels {
        control: control.try_clone()?,
        stdio: stdio.try_clone()?,
        stderr: stderr_ch.try_clone()?,
    }));
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    // Host -> server stdin; EOF from the host closes the server's stdin.
    let l = links.clone();
    let stdin_done = spawn_done(move || {
        if let Some(stdin) = stdin {
            links::relay_in(&l, stdin);
        }
    });
    let l = links.clone();
    let stdout_done = spawn_done(move || {
        if let Some(out) = stdout {
            links::relay_out(&l, out, Which::Stdio, || l.send(&Event::FirstStdoutByte));
        }
    });
    let l = links.clone();
    let stderr_done = spawn_done(move || {
        if let Some(err) = stderr {
            links::relay_out(&l, err, Which::Stderr, || {});
        }
    });
    if spec.snapshot {
        let l = links.clone();
        std::thread::spawn(move || links::serve_control(&l));
    }

    let status = wait_for(child.id() as libc::pid_t);
    if kernel_log.oom_killed() {
        links.send(&Event::OomKilled);
    }
    if let Some(sup) = supervisor {
        // Bounded: processes the server left behind keep the filter alive.
        let (denied, used) = sup.finish(Duration::from_millis(200));
        links.send(&Event::Syscalls { denied, used });
    }
    let _ = stdout_done.recv_timeout(DRAIN);
    let _ = stderr_done.recv_timeout(DRAIN);
    let (code, signal) = if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else if libc::WIFSIGNALED(status) {
        (None, Some(libc::WTERMSIG(status)))
    } else {
        (None, None)
    };
    let byte = match (code, signal) {
        (Some(c), _) => c as u8,
        (None, Some(s)) => 128u8.wrapping_add(s as u8),
        _ => 255,
    };
    let _ = stdin_done; // the host closes stdio after our EOF; finish waits for it
                        // The channels of the last generation (a restored VM's).
    let (Ok((_, control)), Ok((_, stdio)), Ok((_, stderr_ch))) = (
        links.get(Which::Control),
        links.get(Which::Stdio),
        links.get(Which::Stderr),
    ) else {
        return Ok(byte);
    };
    let events: Events = Arc::new(Mutex::new(control.try_clone()?));
    if let Some((ws, conn)) = &workspace {
        if ws.writable {
            if let Err(e) = crate::workspace::send_back(conn) {
                let msg = format!("cannot send the workspace back: {e}\n");
                let _ = (&stderr_ch).write_all(msg.as_bytes());
            }
        }
        vsock::shutdown_write(conn);
    }
    Ok(finish(
        &events, &control, &stdio, &stderr_ch, byte, code, signal,
    ))
}

/// Runs the setup line with the server's environment; its output goes to
/// the server's stderr channel (never to stdout, which is MCP's).
fn run_setup(setup: &str, spec: &RunSpec, stderr_ch: &File) -> Result<(), String> {
    let err = |e: io::Error| format!("cannot run the setup line: {e}");
    let out = stderr_ch.try_clone().map_err(err)?;
    let out2 = stderr_ch.try_clone().map_err(err)?;
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", setup])
        .env_clear()
        .env("PATH", DEFAULT_PATH)
        .env("HOME", "/root")
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(out2));
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    let child = cmd.spawn().map_err(err)?;
    // We are PID 1: wait_for reaps whatever else ends meanwhile.
    let status = wait_for(child.id() as libc::pid_t);
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else {
        Err(format!(
            "the setup line failed (wait status {status}): {setup}"
        ))
    }
}

/// The server could not start: say why on its stderr and as an event,
/// then end the run with `status`.
fn not_started(
    events: &Events,
    control: &File,
    stdio: &File,
    stderr_ch: &File,
    msg: &str,
    status: u8,
) -> u8 {
    let _ = (&*stderr_ch).write_all(format!("{msg}\n").as_bytes());
    send(events, &Event::SpawnFailed { error: msg.into() });
    finish(events, control, stdio, stderr_ch, status, None, None)
}

/// Ends every stream so that the host has all bytes: shut our write
/// sides, wait (bounded) for the host to close its own, report the exit.
fn finish(
    events: &Events,
    control: &File,
    stdio: &File,
    stderr_ch: &File,
    status: u8,
    code: Option<i32>,
    signal: Option<i32>,
) -> u8 {
    vsock::shutdown_write(stdio);
    vsock::shutdown_write(stderr_ch);
    for s in [stdio, stderr_ch] {
        if let Ok(s) = s.try_clone() {
            let _ = spawn_done(move || drain(s)).recv_timeout(DRAIN);
        }
    }
    send(
        events,
        &Event::Exited {
            code,
            signal,
            status,
        },
    );
    vsock::shutdown_write(control);
    if let Ok(c) = control.try_clone() {
        let _ = spawn_done(move || drain(c)).recv_timeout(DRAIN);
    }
    status
}

fn drain(mut s: File) {
    let mut buf = [0u8; 4096];
    while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
}
