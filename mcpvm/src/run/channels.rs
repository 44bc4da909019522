//! The host ends of a run's vsock channels, opened in one place.
//!
//! The guest agent connects to the host on fixed ports
//! (`mcpvm_protocol::ports`); the VMM's hybrid vsock turns each into a
//! connection to `<run dir>/vsock.sock_<port>`, where [`HostChannels`]
//! listens. One thread (the VMM's `channels` thread kind) accepts them in
//! the order the agent connects (CONTROL, then STDIO and STDERR), says
//! the host's first line on CONTROL, and starts one relay per direction,
//! handing each its socket as it starts: no socket changes hands between
//! running threads. It then reads the agent's events itself. The
//! workspace channel has its own thread (`crate::workspace`), the only
//! one with host file access.
//!
//! Each relay confines itself with the relay filter; the channels
//! thread's filter allows starting threads and stacking a filter, and
//! nothing else beyond a relay's calls (docs/security.md).

use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::host::seccomp::{confine, HostThread};
use mcpvm_protocol::messages::{HostMessage, RunSpec};
use mcpvm_protocol::ports::{CONTROL_PORT, GUEST_CID, STDERR_PORT, STDIO_PORT, WORKSPACE_PORT};
use vmm::{SeccompMode, VsockConfig};

use super::events::{EventSink, FirstSeen};
use super::pump;
use super::template::{self, Answer};
use super::RunError;

/// What the host says first on CONTROL.
pub enum FirstLine {
    /// The run spec (a booting VM).
    Spec(RunSpec),
    /// A [`HostMessage::Resume`], made when the agent connects (a
    /// restored VM).
    Resume,
}

impl FirstLine {
    fn line(&self) -> String {
        match self {
            FirstLine::Spec(spec) => spec.line(),
            FirstLine::Resume => resume_message().line(),
        }
    }
}

/// What must differ between a snapshot and each VM restored from it:
/// the clock, the entropy pool, the hostname.
fn resume_message() -> HostMessage {
    let mut entropy = [0u8; 64];
    let mut random = [0u8; 4];
    fill_random(&mut entropy);
    fill_random(&mut random);
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    HostMessage::Resume {
        unix_ns: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        entropy: hex(&entropy),
        hostname: format!("mcpvm-{}", hex(&random)),
    }
}

/// Fills `buf` from the kernel's CSPRNG.
fn fill_random(buf: &mut [u8]) {
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: getrandom writes at most the len bytes we pass.
        let n = unsafe { libc::getrandom(buf[got..].as_mut_ptr().cast(), buf.len() - got, 0) };
        if n > 0 {
            got += n as usize;
        } else if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            panic!("getrandom failed: {}", io::Error::last_os_error());
        }
    }
}

/// What the relays do with the server's stdio.
pub enum Stdio {
    /// Our stdin to the server, the server's stdout to ours.
    Relay,
    /// The template client drives the server before a snapshot.
    Template(Answer),
}

/// The listeners of one run, in its run directory.
pub struct HostChannels {
    vsock: VsockConfig,
    control: UnixListener,
    stdio: UnixListener,
    stderr: UnixListener,
    workspace: Option<UnixListener>,
}

impl HostChannels {
    /// Listens on each channel's socket in `dir` (and the workspace's if
    /// the run has one).
    pub fn open(dir: &Path, workspace: bool) -> Result<HostChannels, RunError> {
        let vsock = VsockConfig {
            guest_cid: GUEST_CID.into(),
            uds_path: dir.join("vsock.sock"),
        };
        let listen = |port| {
            let path = vsock.port_path(port);
            UnixListener::bind(&path).map_err(|source| RunError::Listen { path, source })
        };
        Ok(HostChannels {
            control: listen(CONTROL_PORT)?,
            stdio: listen(STDIO_PORT)?,
            stderr: listen(STDERR_PORT)?,
            workspace: workspace.then(|| listen(WORKSPACE_PORT)).transpose()?,
            vsock,
        })
    }

    /// The VM's vsock device, bridged to these sockets.
    pub fn vsock(&self) -> VsockConfig {
        self.vsock.clone()
    }

    /// The workspace's listener, for its own thread.
    pub fn take_workspace(&mut self) -> Option<UnixListener> {
        self.workspace.take()
    }

    /// Starts the channels thread: it accepts the agent's connections,
    /// sends `first`, starts the relays, and reads events into `sink`.
    pub fn serve(
        self,
        first: FirstLine,
        stdio: Stdio,
        sink: EventSink,
        mode: SeccompMode,
    ) -> Result<Relays, RunError> {
        let (confined_tx, confined) = mpsc::channel();
        let (done_tx, done) = mpsc::channel::<()>();
        let connected = Arc::new(AtomicBool::new(false));
        let flag = connected.clone();
        let first_seen = sink.first_seen.clone();
        std::thread::spawn(move || {
            let result = confine(HostThread::Channels, mode);
            let ok = result.is_ok();
            let _ = confined_tx.send(result);
            if ok {
                self.accept_and_relay(first, stdio, sink, mode, &flag, done_tx);
            }
        });
        confined
            .recv()
            .unwrap_or(Err(vmm::host_seccomp::SeccompError::Thread))?;
        Ok(Relays {
            connected,
            done,
            first_seen,
        })
    }

    fn accept_and_relay(
        self,
        first: FirstLine,
        stdio: Stdio,
        mut sink: EventSink,
        mode: SeccompMode,
        connected: &AtomicBool,
        done: mpsc::Sender<()>,
    ) {
        // The agent connects CONTROL, reads the first line, then connects
        // STDIO and STDERR: accept in that order.
        let Ok((control, _)) = self.control.accept() else {
            return;
        };
        connected.store(true, Ordering::SeqCst);
        if (&control).write_all(first.line().as_bytes()).is_err() {
            return;
        }
        let (Ok((stdio_s, _)), Ok((stderr_s, _))) = (self.stdio.accept(), self.stderr.accept())
        else {
            return;
        };
        drop(self);
        // Held by the relays to the client's stdout and stderr.
        let (delivering, delivered) = mpsc::channel::<()>();
        let held = delivering.clone();
        match stdio {
            Stdio::Relay => {
                // Both relays share the socket's flags: set before either runs.
                if let Err(e) = pump::channel_socket(&stdio_s) {
                    log::error!("the stdio channel cannot be made non-blocking: {e}");
                    return;
                }
                // Not waited for: it reads our stdin, which may never end.
                if let Ok(to_guest) = stdio_s.try_clone() {
                    spawn_relay(mode, None, move || {
                        // Held so that nothing else in the process reads it.
                        let stdin = io::stdin().lock();
                        pump::pump(stdin.as_fd(), to_guest.as_fd());
                        // EOF closes the server's stdin.
                        let _ = to_guest.shutdown(std::net::Shutdown::Write);
                    });
                }
                spawn_relay(mode, Some(done.clone()), move || {
                    let _held = held;
                    let stdout = io::stdout().lock();
                    pump::pump(stdio_s.as_fd(), stdout.as_fd());
                    // Every byte is here: let the agent finish.
                    let _ = stdio_s.shutdown(std::net::Shutdown::Both);
                });
            }
            Stdio::Template(answer) => {
                if let Ok(to_agent) = control.try_clone() {
                    spawn_relay(mode, Some(done.clone()), move || {
                        let _held = held;
                        template::drive(&stdio_s, &to_agent, &answer);
                        let _ = stdio_s.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        }
        // So that no splice waits on it (pump.rs), on any kernel; the
        // events below are still read if it cannot be.
        if let Err(e) = pump::channel_socket(&stderr_s) {
            log::error!("the stderr channel cannot be made non-blocking: {e}");
        }
        // A person's terminal gets the server's stderr with its control
        // characters escaped (pump.rs); a file or a client's pipe, as is.
        let terminal = pump::is_terminal(io::stderr().as_fd());
        let held = delivering;
        spawn_relay(mode, Some(done.clone()), move || {
            let _held = held;
            let stderr = io::stderr().lock();
            match terminal {
                true => pump::pump_printable(stderr_s.as_fd(), stderr.as_fd()),
                false => pump::pump(stderr_s.as_fd(), stderr.as_fd()),
            }
            let _ = stderr_s.shutdown(std::net::Shutdown::Both);
        });
        sink.read_from(&control);
        // The agent powers off once CONTROL ends: not before the client
        // has every byte of stdout and stderr, or a slow client would
        // lose the tail still in the VM (its VMM's buffers, its socket).
        let _ = delivered.recv();
        let _ = control.shutdown(std::net::Shutdown::Both);
        // Held to here: a drain also waits for the agent's last events.
        drop(done);
    }
}

/// Starts `body` on a thread that confines itself to the relay filter
/// first; it holds `done` (if given) until it ends.
fn spawn_relay(
    mode: SeccompMode,
    done: Option<mpsc::Sender<()>>,
    body: impl FnOnce() + Send + 'static,
) {
    std::thread::spawn(move || {
        let _done = done;
        match confine(HostThread::Relay, mode) {
            Ok(()) => body(),
            Err(e) => log::error!("a relay cannot confine itself: {e}"),
        }
    });
}

/// The running relays, seen from the run.
pub struct Relays {
    connected: Arc<AtomicBool>,
    /// Disconnected once every waited-for relay (and the channels
    /// thread) has ended.
    done: mpsc::Receiver<()>,
    pub first_seen: FirstSeen,
}

impl Relays {
    /// Once the VM is gone its sockets are closed, so a connected relay
    /// sees EOF and finishes its copy: wait for that, at most until
    /// `until`. Relays the agent never reached (a run stopped during
    /// boot) would wait in accept forever and are not waited for.
    pub fn drain(&self, until: Instant) {
        if !self.connected.load(Ordering::SeqCst) {
            return;
        }
        while let Ok(()) | Err(mpsc::RecvTimeoutError::Timeout) = self
            .done
            .recv_timeout(until.saturating_duration_since(Instant::now()))
        {
            if Instant::now() >= until {
                return;
            }
        }
    }
}

/// How long the relays get, all together, to pass on the last bytes once
/// the VM is gone.
pub const RELAY_DRAIN: Duration = Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn the_agent_gets_the_spec_first_and_events_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let channels = HostChannels::open(dir.path(), false).unwrap();
        let vsock = channels.vsock();
        let spec = RunSpec {
            argv: vec!["/bin/server".into()],
            ..RunSpec::default()
        };
        let relays = channels
            .serve(
                FirstLine::Spec(spec.clone()),
                Stdio::Relay,
                EventSink::new(Instant::now(), None, None),
                SeccompMode::Off,
            )
            .unwrap();
        // As the agent does.
        let control = UnixStream::connect(vsock.port_path(CONTROL_PORT)).unwrap();
        let mut line = String::new();
        io::BufRead::read_line(&mut io::BufReader::new(&control), &mut line).unwrap();
        assert_eq!(serde_json::from_str::<RunSpec>(&line).unwrap(), spec);
        let stdio = UnixStream::connect(vsock.port_path(STDIO_PORT)).unwrap();
        let stderr = UnixStream::connect(vsock.port_path(STDERR_PORT)).unwrap();
        (&control)
            .write_all(b"{\"event\":\"agent_start\",\"uptime_ms\":5}\n")
            .unwrap();
        for s in [&control, &stdio, &stderr] {
            s.shutdown(std::net::Shutdown::Both).unwrap();
        }
        relays.drain(Instant::now() + Duration::from_secs(5));
        assert!(relays
            .first_seen
            .lock()
            .unwrap()
            .contains_key("agent_start"));
    }
}
