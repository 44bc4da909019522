//! Run mode: take the run spec from the host over vsock, spawn the server,
//! relay its stdio, report events, and return its exit status.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::exit::Exit;
use crate::links::{self, Channels, Links, Which};
use crate::tail::{self, Progress};
use crate::vsock;
use guest_agent::calls::{Calls, Lines};
use guest_agent::server_seccomp;
use guest_agent::server_seccomp::effects::{Recorded, Recorder};
use mcpvm_protocol::messages::{Counter, Event, RunSpec};
use mcpvm_protocol::ports::*;

/// The longest run spec we accept (one JSON line on CONTROL).
const MAX_SPEC: u64 = MAX_CONTROL_LINE as u64;
/// How long the recorder's last effects may take to go out once the
/// server has exited.
const DRAIN: Duration = Duration::from_secs(3);
/// How long the host may take to read a writable workspace's copy (its
/// unpacking keeps pace with the stream; this bounds a host that hangs).
const WORKSPACE_DRAIN: Duration = Duration::from_secs(120);
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

use guest_agent::uptime_ms;

/// Runs `f` on a thread; returns a receiver that fires when it is done.
fn spawn_done(f: impl FnOnce() + Send + 'static) -> mpsc::Receiver<()> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    rx
}

/// What the wait for the server's exit hears of.
#[derive(Clone, Copy)]
enum Seen {
    StdinClosed,
    /// The raw wait status.
    Exited(i32),
}

/// How long after its stdin closes a server that has not exited has its
/// calls so far sent: well inside the exit grace after which the host
/// stops the VM (10 s for `mcpvm probe`, 20 s in an audit's cells), long enough that a server
/// that does exit sends only its final count.
const TALLY_AFTER_STDIN_CLOSED: Duration = Duration::from_secs(4);

/// Waits for the server's exit (its raw wait status); once its stdin has
/// closed and `after` has passed without the exit, calls `so_far` once.
fn wait_reporting(seen: &mpsc::Receiver<Seen>, after: Duration, so_far: impl FnOnce()) -> i32 {
    let exited = |s| match s {
        Seen::Exited(status) => Some(status),
        Seen::StdinClosed => None,
    };
    // The wait thread always sends the exit; a lost channel is a status 0.
    match seen.recv() {
        Ok(Seen::Exited(status)) => return status,
        Ok(Seen::StdinClosed) => {}
        Err(_) => return 0,
    }
    match seen.recv_timeout(after) {
        Ok(Seen::Exited(status)) => return status,
        Ok(Seen::StdinClosed) | Err(mpsc::RecvTimeoutError::Timeout) => so_far(),
        Err(mpsc::RecvTimeoutError::Disconnected) => return 0,
    }
    seen.iter().find_map(exited).unwrap_or(0)
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

/// A run, as the recipe: connect and read the spec, put the workspace in
/// place, run the setup line, start the server under its policy, relay
/// its stdio until it exits, send a writable workspace back, finish.
pub fn run_over_vsock() -> io::Result<u8> {
    let (session, spec) = Session::open()?;
    let workspace = match spec.workspace {
        Some(ws) => {
            let conn = vsock::connect(HOST_CID, WORKSPACE_PORT)?;
            if let Err(e) = crate::workspace::receive(&conn) {
                let msg = format!("cannot unpack the workspace into {WORKSPACE_DIR}: {e}");
                return Ok(session.fail(&msg, 126));
            }
            Some((ws, conn))
        }
        None => None,
    };
    let mut started = match start_server(&spec, &session.stderr) {
        Ok(s) => s,
        Err(Failure { msg, status }) => return Ok(session.fail(&msg, status)),
    };
    session.send(&Event::Spawned {
        pid: started.child.id(),
    });
    if let Some(c) = &started.canaries {
        session.send(&Event::Canaries {
            files: c.tokens.keys().cloned().collect(),
            tokens: c.tokens.clone(),
            env: crate::canaries::ENV.to_string(),
            env_token: c.env_token.clone(),
            sibling: c.sibling.clone(),
            link: c.link.clone(),
        });
    }
    let canaries = started.canaries.take();
    let (links, exit) = serve(session, started, spec.snapshot)?;
    if let Some(c) = &canaries {
        crate::canaries::remove_link(c);
    }
    // The channels of the last generation (a restored VM's).
    let Some(session) = Session::from_links(&links)? else {
        return Ok(exit.byte());
    };
    if let Some((ws, conn)) = &workspace {
        if ws.writable {
            if let Err(e) = crate::workspace::send_back(conn) {
                let msg = format!("cannot send the workspace back: {e}\n");
                let _ = (&session.stderr).write_all(msg.as_bytes());
            }
        }
        vsock::shutdown_write(conn);
        // The host ends its side once it has read all of it: until then
        // part of it may still be in flight (in our socket, in the VMM),
        // and powering off would cut it.
        if ws.writable {
            if let Ok(c) = conn.try_clone() {
                let _ = spawn_done(move || drain(c)).recv_timeout(WORKSPACE_DRAIN);
            }
        }
    }
    Ok(session.finish(exit))
}

/// Why the server did not start, and the status the run ends with.
struct Failure {
    msg: String,
    status: u8,
}

impl Failure {
    fn new(msg: impl Into<String>, status: u8) -> Failure {
        Failure {
            msg: msg.into(),
            status,
        }
    }
}

/// A spawned server and what watches it.
struct Started {
    child: std::process::Child,
    supervisor: Option<server_seccomp::Watch>,
    kernel_log: KernelLog,
    /// What the server is doing (under a recording policy or with a
    /// network).
    calls: Option<Arc<Calls>>,
    /// Under a recording policy: what the recorder hands on.
    recording: Option<mpsc::Receiver<Recorded>>,
    canaries: Option<crate::canaries::Planted>,
}

/// Runs the setup line, applies the filesystem policy, and spawns the
/// server with its rlimits and seccomp filter.
fn start_server(spec: &RunSpec, stderr_ch: &File) -> Result<Started, Failure> {
    let Some((program, args)) = spec.argv.split_first() else {
        return Err(Failure::new("empty argv", 127));
    };
    let policy = &spec.policy;
    // What the server is doing, for recorded calls and network requests.
    let calls = (spec.network || policy.seccomp.as_ref().is_some_and(|s| s.record))
        .then(|| Arc::new(Calls::default()));
    if spec.network {
        crate::egress::start(calls.clone())
            .map_err(|e| Failure::new(format!("cannot bring up the guest's network: {e}"), 126))?;
    } else {
        // Every machine has a loopback, network or not: a server may talk
        // to a helper of its own on 127.0.0.1, and one that expects a
        // database there should hear "refused", not "unreachable".
        crate::egress::loopback_up()
            .map_err(|e| Failure::new(format!("cannot bring up the loopback: {e}"), 126))?;
    }
    if let Some(port) = spec.inbound {
        crate::inbound::start(port).map_err(|e| {
            Failure::new(
                format!("cannot forward the host's connections to port {port}: {e}"),
                126,
            )
        })?;
    }
    let user = crate::user::of(policy);
    crate::user::prepare(&user).map_err(|e| {
        Failure::new(
            format!("cannot prepare {}'s home {}: {e}", user.name, user.home),
            126,
        )
    })?;
    if let Some(setup) = &spec.setup {
        run_setup(setup, spec, &user, stderr_ch).map_err(|msg| Failure::new(msg, 126))?;
    }
    // Before the mounts: a read-only root would keep them out.
    let canaries = policy
        .canaries
        .then(|| crate::canaries::plant(user.home))
        .transpose()
        .map_err(|e| Failure::new(format!("cannot plant the canaries: {e}"), 126))?;
    let sibling = canaries.as_ref().map_or("", |c| c.sibling.as_str());
    crate::user::hand_over(&user, &[user.home, WORKSPACE_DIR, sibling]).map_err(|e| {
        Failure::new(
            format!("cannot give the workspace and home to {}: {e}", user.name),
            126,
        )
    })?;
    crate::withholding::apply_mounts(policy).map_err(|e| Failure::new(e.to_string(), 126))?;
    let (confine, supervise) = server_seccomp::prepare(
        &policy.rlimits,
        policy.seccomp.as_ref(),
        Counter::KernelTrace,
    )
    .map_err(|e| Failure::new(format!("cannot apply the policy: {e}"), 126))?;
    let confine = match user.uid {
        0 => confine,
        uid => confine.as_user(uid, user.gid),
    };
    let mut cmd = Command::new(program);
    cmd.args(args).env_clear();
    if !policy.bare_env {
        cmd.env("PATH", DEFAULT_PATH).envs(crate::user::env(&user));
    }
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
    if let Some(c) = &canaries {
        cmd.env(crate::canaries::ENV, &c.env_token);
    }
    // SAFETY: pre_exec makes only async-signal-safe calls (seccomp's docs).
    unsafe { cmd.pre_exec(move || confine.pre_exec()) };
    // Before the spawn: the server's own execve may be a notified call.
    let recording = policy
        .seccomp
        .as_ref()
        .filter(|s| s.record)
        .and(calls.clone())
        .map(|calls| (calls, mpsc::channel()));
    let recorder = recording
        .as_ref()
        .map(|(calls, (tx, _))| Recorder::new(calls.clone(), tx.clone()));
    let supervisor = supervise.supervise(recorder);
    let recording = recording.map(|(_, (_, rx))| rx);
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let spawned = cmd.spawn();
    drop(cmd); // the child's end of the listener socketpair
    let child = spawned.map_err(|e| Failure::new(format!("cannot run {program}: {e}"), 127))?;
    Ok(Started {
        child,
        supervisor,
        kernel_log: KernelLog::from_now(),
        calls,
        recording,
        canaries,
    })
}

/// Relays the server's stdio over the session's channels (which a restore
/// may replace) until it exits; reports OOM kills and system calls.
fn serve(session: Session, mut started: Started, snapshot: bool) -> io::Result<(Arc<Links>, Exit)> {
    let links = Arc::new(Links::new(Channels {
        control: session.control,
        stdio: session.stdio,
        stderr: session.stderr,
    }));
    let child = &mut started.child;
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let calls = started.calls.clone();
    // Host -> server stdin; EOF from the host closes the server's stdin.
    // Not waited for: the host closes stdio after our EOF. Its end is
    // told to the wait below, with the server's exit.
    let (seen_tx, seen) = mpsc::channel();
    let l = links.clone();
    let tap = calls.clone();
    let closed = seen_tx.clone();
    std::thread::spawn(move || {
        if let Some(stdin) = stdin {
            let mut lines = Lines::default();
            links::relay_in(&l, stdin, |chunk| {
                if let Some(c) = &tap {
                    lines.feed(chunk, |line| c.sent(line));
                }
            });
        }
        let _ = closed.send(Seen::StdinClosed);
    });
    let l = links.clone();
    let tap = calls.clone();
    let (stdout_moved, stderr_moved) =
        (Arc::new(Progress::default()), Arc::new(Progress::default()));
    let moved = stdout_moved.clone();
    let stdout_done = spawn_done(move || {
        if let Some(out) = stdout {
            let mut lines = Lines::default();
            let first = || l.send(&Event::FirstStdoutByte);
            links::relay_out(&l, out, Which::Stdio, &moved, first, |chunk| {
                if let Some(c) = &tap {
                    lines.feed(chunk, |line| c.answered(line));
                }
            });
        }
    });
    let l = links.clone();
    let moved = stderr_moved.clone();
    let stderr_done = spawn_done(move || {
        if let Some(err) = stderr {
            links::relay_out(&l, err, Which::Stderr, &moved, || {}, |_| {});
        }
    });
    // What the recorder saw, sent as it comes, then its tally.
    let effects_done = started.recording.take().map(|rx| {
        let l = links.clone();
        spawn_done(move || {
            for r in rx {
                match r {
                    Recorded::Effect(e) => l.send(&Event::Effect(e)),
                    Recorded::End { counts, dropped } => {
                        l.send(&Event::Effects { counts, dropped });
                        return;
                    }
                }
            }
        })
    });
    if snapshot {
        let l = links.clone();
        std::thread::spawn(move || links::serve_control(&l));
    }

    let pid = started.child.id() as libc::pid_t;
    std::thread::spawn(move || {
        let _ = seen_tx.send(Seen::Exited(wait_for(pid)));
    });
    let supervisor = &mut started.supervisor;
    let status = wait_reporting(&seen, TALLY_AFTER_STDIN_CLOSED, || {
        if let Some(sup) = supervisor.as_mut() {
            let t = sup.so_far();
            links.send(&Event::Syscalls {
                denied: t.denied,
                used: t.used,
                counted_by: t.counted_by,
                while_running: true,
            });
        }
    });
    let exit = Exit::from_wait_status(status);
    if let Some(c) = &calls {
        c.exited();
    }
    if started.kernel_log.oom_killed() {
        links.send(&Event::OomKilled);
    }
    if let Some(sup) = started.supervisor {
        // Bounded: processes the server left behind keep the filter alive.
        let t = sup.finish(Duration::from_millis(200));
        links.send(&Event::Syscalls {
            denied: t.denied,
            used: t.used,
            counted_by: t.counted_by,
            while_running: false,
        });
    }
    if let Some(done) = effects_done {
        let _ = done.recv_timeout(DRAIN);
    }
    // The server's last output, as long as the host takes it (tail.rs).
    let deadline = std::time::Instant::now() + tail::LIMIT;
    tail::wait_relay(&stdout_done, &stdout_moved, deadline);
    tail::wait_relay(&stderr_done, &stderr_moved, deadline);
    Ok((links, exit))
}

/// Runs the setup line with the server's environment; its output goes to
/// the server's stderr channel (never to stdout, which is MCP's).
/// It runs as root (the machine's owner installing what the server
/// expects) in the server user's home.
fn run_setup(
    setup: &str,
    spec: &RunSpec,
    user: &GuestUser,
    stderr_ch: &File,
) -> Result<(), String> {
    let err = |e: io::Error| format!("cannot run the setup line: {e}");
    let out = stderr_ch.try_clone().map_err(err)?;
    let out2 = stderr_ch.try_clone().map_err(err)?;
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", setup])
        .env_clear()
        .env("PATH", DEFAULT_PATH)
        .envs(crate::user::env(user))
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

/// The host channels of a run: CONTROL (events), STDIO and STDERR.
struct Session {
    events: Events,
    control: File,
    stdio: File,
    stderr: File,
}

impl Session {
    /// Connects CONTROL, says the agent is up, reads the run spec, and
    /// connects STDIO and STDERR.
    fn open() -> io::Result<(Session, RunSpec)> {
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
        let spec: RunSpec = serde_json::from_str(&line).map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidData, format!("bad run spec: {e}"))
        })?;
        let session = Session {
            events,
            control,
            stdio: vsock::connect(HOST_CID, STDIO_PORT)?,
            stderr: vsock::connect(HOST_CID, STDERR_PORT)?,
        };
        Ok((session, spec))
    }

    /// The channels the links hold now, if every one is connected.
    fn from_links(links: &Links) -> io::Result<Option<Session>> {
        let (Ok((_, control)), Ok((_, stdio)), Ok((_, stderr))) = (
            links.get(Which::Control),
            links.get(Which::Stdio),
            links.get(Which::Stderr),
        ) else {
            return Ok(None);
        };
        Ok(Some(Session {
            events: Arc::new(Mutex::new(control.try_clone()?)),
            control,
            stdio,
            stderr,
        }))
    }

    fn send(&self, e: &Event) {
        send(&self.events, e);
    }

    /// The server could not start: say why on its stderr and as an event,
    /// then end the run with `status`.
    fn fail(self, msg: &str, status: u8) -> u8 {
        let _ = (&self.stderr).write_all(format!("{msg}\n").as_bytes());
        self.send(&Event::SpawnFailed { error: msg.into() });
        self.finish(Exit {
            code: None,
            signal: None,
            status,
        })
    }

    /// Ends every stream so that the host has all bytes: shut our write
    /// sides, wait for the host to close its own, report the exit, wait
    /// for the host to end CONTROL. The host ends CONTROL only once its
    /// client has every byte of stdout and stderr, however slowly it
    /// reads (STDIO's own end may have come long before, with the
    /// client's stdin); all of it bounded by [`tail::LIMIT`]. Returns the
    /// status the VM powers off with.
    fn finish(self, exit: Exit) -> u8 {
        vsock::shutdown_write(&self.stdio);
        vsock::shutdown_write(&self.stderr);
        let deadline = std::time::Instant::now() + tail::LIMIT;
        for s in [&self.stdio, &self.stderr] {
            if let Ok(s) = s.try_clone() {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                let _ = spawn_done(move || drain(s)).recv_timeout(left);
            }
        }
        self.send(&Event::Exited {
            code: exit.code,
            signal: exit.signal,
            status: exit.status,
        });
        vsock::shutdown_write(&self.control);
        if let Ok(c) = self.control.try_clone() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let _ = spawn_done(move || drain(c)).recv_timeout(left);
        }
        exit.status
    }
}

fn drain(mut s: File) {
    let mut buf = [0u8; 4096];
    while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waited(seen: &[(u64, Seen)], after_ms: u64) -> (i32, bool) {
        let (tx, rx) = mpsc::channel();
        let plan = seen.to_vec();
        std::thread::spawn(move || {
            for (ms, s) in plan {
                std::thread::sleep(Duration::from_millis(ms));
                let _ = tx.send(s);
            }
        });
        let mut reported = false;
        let status = wait_reporting(&rx, Duration::from_millis(after_ms), || reported = true);
        (status, reported)
    }

    /// A server that exits on its own, before or soon after its stdin
    /// closes, has only its final count sent.
    #[test]
    fn a_server_that_exits_sends_only_its_final_count() {
        assert_eq!(waited(&[(0, Seen::Exited(7))], 50), (7, false));
        assert_eq!(
            waited(&[(0, Seen::StdinClosed), (10, Seen::Exited(3))], 2000),
            (3, false)
        );
    }

    /// One that keeps running after its stdin closed has its calls so
    /// far sent once, and its exit is still waited for.
    #[test]
    fn a_server_still_running_after_stdin_closed_has_its_calls_sent_once() {
        assert_eq!(
            waited(&[(0, Seen::StdinClosed), (300, Seen::Exited(9))], 50),
            (9, true)
        );
        // Stdin that never closes: only the exit.
        assert_eq!(waited(&[(100, Seen::Exited(1))], 10), (1, false));
    }
}
