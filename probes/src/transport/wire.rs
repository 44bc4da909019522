//! The wire to one server process: its stdin, stdout and stderr, with
//! every line recorded in the [`Exchange`].
//!
//! The wire outlives any one client on it: rmcp's client speaks through a
//! [`WireTransport`] for the real-client steps, then the robustness probes
//! write raw (sometimes malformed) lines on the same wire. Reading stdout
//! and stderr never stops, so a server that floods either cannot stall on
//! a full pipe, and memory stays bounded (long lines are cut, stderr keeps
//! a tail).

use std::collections::VecDeque;
use std::io;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use crate::transport::exchange::{ms_since, Direction, Exchange};

/// A stdout line longer than this is garbage: it is dropped up to its
/// newline, so a server cannot exhaust the probe's memory.
const MAX_LINE: usize = 64 << 20;
/// JSON values one stdout line may hold. Parsed, each costs the probe tens
/// of bytes whatever its size on the wire (two bytes for `0,`): a 64 MiB
/// line of `[0,0,…]` would be over a GiB, parsed again by rmcp. A line
/// with more is treated as garbage, never parsed.
const MAX_LINE_VALUES: usize = 1 << 20;
/// How much of the server's stderr a report keeps.
const STDERR_TAIL: usize = 8192;
/// What is kept of stderr's end before secrets are redacted and the
/// tail cut from it: room for the longest forms of a secret before the
/// tail's start.
const STDERR_WINDOW: usize = 4 * STDERR_TAIL;
/// How much of stderr's start a report keeps, and what is read of it
/// first (room to redact a secret the cut falls inside).
pub const STDERR_HEAD: usize = 4096;
const STDERR_HEAD_WINDOW: usize = 4 * STDERR_HEAD;

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("No command to probe")]
    NoCommand,
    #[error("Cannot start {command}")]
    Spawn {
        command: String,
        #[source]
        source: io::Error,
    },
}

enum Out {
    Line(Vec<u8>),
    Close,
}

/// What the server wrote to stderr: the byte count, the first bytes
/// (why a server failed is often printed first, then buried under a
/// stack trace) and the last.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Stderr {
    pub bytes: u64,
    /// The first [`STDERR_HEAD`] bytes, when stderr was longer than the
    /// tail holds (else the tail has it all).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub head: String,
    pub tail: String,
}

/// What is read of stderr as it comes: its start and a window of its end.
#[derive(Debug, Default)]
struct StderrBuf {
    bytes: u64,
    head: Vec<u8>,
    window: VecDeque<u8>,
}

/// How the server process ended.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ExitSummary {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// It exited by itself within the grace time after its stdin closed
    /// (or had exited before).
    pub exited_by_itself: bool,
}

impl ExitSummary {
    fn from_status(s: ExitStatus, exited_by_itself: bool) -> Self {
        use std::os::unix::process::ExitStatusExt;
        ExitSummary {
            code: s.code(),
            signal: s.signal(),
            exited_by_itself,
        }
    }
}

/// What one wait for a message gave.
#[derive(Debug)]
pub enum Recv {
    Message(serde_json::Value),
    /// Stdout closed: the server exited or closed it.
    Closed,
    Timeout,
}

/// Writes lines to the server and records them.
#[derive(Clone)]
struct Outbox {
    tx: mpsc::UnboundedSender<Out>,
    exchange: Exchange,
}

impl Outbox {
    fn send(&self, mut line: Vec<u8>) -> io::Result<()> {
        let parsed = serde_json::from_slice::<serde_json::Value>(&line).ok();
        self.exchange
            .record(Direction::Sent, &line, parsed.as_ref());
        line.push(b'\n');
        self.tx
            .send(Out::Line(line))
            .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))
    }
}

type Incoming = Arc<tokio::sync::Mutex<mpsc::Receiver<serde_json::Value>>>;

/// Messages from the server waiting for the client. A server that prints
/// faster than the probe reads waits on its stdout pipe past this, as it
/// would with any client: the probe's memory does not grow with it.
const INCOMING: usize = 1024;

pub struct Wire {
    child: Child,
    pid: i32,
    outbox: Outbox,
    incoming: Incoming,
    pub exchange: Exchange,
    stderr: Arc<Mutex<StderrBuf>>,
    first_stdout_byte: Arc<OnceLock<f64>>,
    ended: Option<ExitSummary>,
    /// When this process was started (the exchange's clock may be older).
    spawned: Instant,
    /// The server speaks Streamable HTTP: the session's task (its stdout
    /// is then a log).
    http: Option<tokio::task::JoinHandle<()>>,
    /// What the command was started with, again on a respawn.
    extras: Arc<Extras>,
}

/// What a command gets besides its argv.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// Added to its environment (where secrets go: never its argv,
    /// which every local user can read).
    pub env: Vec<(String, String)>,
    /// It speaks Streamable HTTP here, not on its stdio.
    pub http: Option<crate::transport::http::Endpoint>,
    /// Handed to it as descriptor 3 (`mcpvm run --listen-fd 3`: a
    /// listening socket the probe bound, so that its port is held from
    /// choice to use).
    pub fd3: Option<Arc<std::os::fd::OwnedFd>>,
    /// Values kept out of its stderr tail: redacted before the tail is
    /// cut, so a cut never leaves part of one behind.
    pub secrets: crate::report::redact::Secrets,
}

impl Wire {
    /// Spawns `command` in its own process group (so that a server that
    /// forks, like `npx` starting node, is ended whole).
    pub fn spawn(command: &[String]) -> Result<Wire, WireError> {
        Self::spawn_with(command, Extras::default())
    }

    /// [`Wire::spawn`] with [`Extras`]: more environment, a Streamable
    /// HTTP endpoint, a descriptor handed over.
    pub fn spawn_with(command: &[String], extras: Extras) -> Result<Wire, WireError> {
        Self::spawn_recording(
            command,
            Exchange::new(Instant::now()),
            Arc::default(),
            Arc::new(extras),
        )
    }

    /// Starts `command` again as a new server process whose lines and
    /// stderr join this one's record (one timeline for a whole probe run).
    pub fn respawn(&self, command: &[String]) -> Result<Wire, WireError> {
        Self::spawn_recording(
            command,
            self.exchange.clone(),
            self.stderr.clone(),
            self.extras.clone(),
        )
    }

    fn spawn_recording(
        command: &[String],
        exchange: Exchange,
        stderr: Arc<Mutex<StderrBuf>>,
        extras: Arc<Extras>,
    ) -> Result<Wire, WireError> {
        let http = extras.http.clone();
        let (program, args) = command.split_first().ok_or(WireError::NoCommand)?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .envs(extras.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // If the probe dies (an audit's wall limit, a signal), the server
        // is told rather than left running: `mcpvm run` stops its VM on
        // SIGTERM.
        // SAFETY: the hook makes only async-signal-safe calls.
        unsafe {
            cmd.pre_exec(die_with_parent(std::process::id()));
        }
        if let Some(fd) = &extras.fd3 {
            use std::os::fd::AsRawFd;
            let raw = fd.as_raw_fd();
            // SAFETY: dup2 and fcntl are async-signal-safe; `raw` stays
            // open in the parent (the Arc) until the spawn returns.
            unsafe {
                cmd.pre_exec(move || {
                    let rc = match raw {
                        3 => libc::fcntl(3, libc::F_SETFD, 0),
                        _ => libc::dup2(raw, 3),
                    };
                    match rc {
                        -1 => Err(io::Error::last_os_error()),
                        _ => Ok(()),
                    }
                });
            }
        }
        let spawned = Instant::now();
        let mut child = cmd.spawn().map_err(|source| WireError::Spawn {
            command: program.clone(),
            source,
        })?;
        let pid = child.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
        let (out_tx, out_rx) = mpsc::unbounded_channel();
        let (in_tx, in_rx) = mpsc::channel(INCOMING);
        let first_stdout_byte = Arc::new(OnceLock::new());
        let mut session = None;
        match &http {
            // The process's stdin stays open (its end is the run's end).
            Some(to) => {
                session = Some(tokio::spawn(post_lines(
                    to.clone(),
                    out_rx,
                    in_tx,
                    exchange.clone(),
                    first_stdout_byte.clone(),
                )));
                if let Some(stdout) = child.stdout.take() {
                    tokio::spawn(read_stderr(stdout, stderr.clone()));
                }
            }
            None => {
                if let Some(stdin) = child.stdin.take() {
                    tokio::spawn(write_stdin(stdin, out_rx));
                }
                if let Some(stdout) = child.stdout.take() {
                    tokio::spawn(read_stdout(
                        stdout,
                        in_tx,
                        exchange.clone(),
                        first_stdout_byte.clone(),
                    ));
                }
            }
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(read_stderr(err, stderr.clone()));
        }
        Ok(Wire {
            extras,
            child,
            pid,
            outbox: Outbox {
                tx: out_tx,
                exchange: exchange.clone(),
            },
            incoming: Arc::new(tokio::sync::Mutex::new(in_rx)),
            exchange,
            stderr,
            first_stdout_byte,
            ended: None,
            spawned,
            http: session,
        })
    }

    /// The start of the run's timeline (the first spawn).
    pub fn start(&self) -> Instant {
        self.exchange.start()
    }

    /// When this server process was started.
    pub fn spawned(&self) -> Instant {
        self.spawned
    }

    /// A transport for rmcp's client over this wire. The wire stays open
    /// when the client is done with it.
    pub fn transport(&self) -> WireTransport {
        WireTransport {
            outbox: self.outbox.clone(),
            incoming: self.incoming.clone(),
        }
    }

    /// Writes one line (a newline is added) as is, valid JSON or not.
    pub fn send_line(&self, line: Vec<u8>) -> io::Result<()> {
        self.outbox.send(line)
    }

    pub fn send_json(&self, v: &serde_json::Value) -> io::Result<()> {
        self.outbox.send(v.to_string().into_bytes())
    }

    /// The next JSON message from the server, waiting until `deadline`.
    pub async fn recv(&self, deadline: Instant) -> Recv {
        let mut rx = self.incoming.lock().await;
        match tokio::time::timeout_at(deadline.into(), rx.recv()).await {
            Ok(Some(v)) => Recv::Message(v),
            Ok(None) => Recv::Closed,
            Err(_) => Recv::Timeout,
        }
    }

    /// ms from the first spawn to this process's first byte on stdout.
    pub fn first_stdout_byte_ms(&self) -> Option<f64> {
        self.first_stdout_byte.get().copied()
    }

    /// The process the probe started (0 if it has none).
    pub fn pid(&self) -> u32 {
        u32::try_from(self.pid).unwrap_or(0)
    }

    /// True once the server process has exited.
    pub fn exited(&mut self) -> bool {
        self.ended.is_some() || matches!(self.child.try_wait(), Ok(Some(_)))
    }

    pub fn stderr(&self) -> Stderr {
        let s = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        let window: Vec<u8> = s.window.iter().copied().collect();
        let began_at_cut = s.bytes > window.len() as u64;
        let head = match s.bytes > STDERR_TAIL as u64 {
            true => self
                .extras
                .secrets
                .head(&String::from_utf8_lossy(&s.head), STDERR_HEAD),
            false => String::new(),
        };
        Stderr {
            bytes: s.bytes,
            head,
            tail: self.extras.secrets.tail(
                &String::from_utf8_lossy(&window),
                began_at_cut,
                STDERR_TAIL,
            ),
        }
    }

    /// Closes the server's stdin and gives it `grace` to exit by itself
    /// (a microVM powers off and writes its reports); then kills its
    /// process group. Idempotent.
    pub async fn shutdown(&mut self, grace: Duration) -> ExitSummary {
        if let Some(e) = &self.ended {
            return e.clone();
        }
        let _ = self.outbox.tx.send(Out::Close);
        // An HTTP server's input is its requests, not stdin: its session
        // is ended (DELETE), briefly waited for, and then the process gets
        // a SIGTERM (`mcpvm run` stops its VM on it).
        if let Some(session) = self.http.take() {
            let _ = tokio::time::timeout(SESSION_END, session).await;
        }
        if self.extras.http.is_some() && self.pid > 0 {
            // SAFETY: signals the process we spawned.
            unsafe { libc::kill(self.pid, libc::SIGTERM) };
        }
        let summary = match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(Ok(status)) => ExitSummary::from_status(status, true),
            _ => {
                self.kill_group();
                match self.child.wait().await {
                    Ok(status) => ExitSummary::from_status(status, false),
                    Err(_) => ExitSummary::default(),
                }
            }
        };
        // Whatever the server left running in its group goes with it.
        self.kill_group();
        self.ended = Some(summary.clone());
        summary
    }

    fn kill_group(&self) {
        if self.pid > 0 {
            // SAFETY: signals the process group we created for the server.
            unsafe { libc::kill(-self.pid, libc::SIGKILL) };
        }
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        if self.ended.is_none() {
            self.kill_group();
            // Reap now: the runtime that would reap it may be gone.
            if self.pid > 0 {
                // SAFETY: waits for our own, just killed, child.
                unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), 0) };
            }
        }
    }
}

/// A `pre_exec` hook for a child that must not outlive its parent
/// `parent` (the caller's pid): the child gets SIGTERM when the thread that
/// started it ends, and does not start at all (ESRCH) if the parent ended
/// between fork and this hook (the signal would never come then).
pub fn die_with_parent(parent: u32) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
    move || {
        // SAFETY: prctl and getppid are async-signal-safe and touch no
        // memory.
        let orphaned = unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            libc::getppid() as u32 != parent
        };
        if orphaned {
            // Only an errno crosses back from a pre_exec hook.
            return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
        }
        Ok(())
    }
}

/// How long an HTTP session's end (its last POST, its DELETE) is waited
/// for at shutdown.
const SESSION_END: Duration = Duration::from_secs(3);

async fn write_stdin(mut stdin: ChildStdin, mut rx: mpsc::UnboundedReceiver<Out>) {
    while let Some(Out::Line(line)) = rx.recv().await {
        if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
    // Dropping stdin is the server's end of input.
}

/// The probe's lines POSTed, one at a time, to a server that speaks
/// Streamable HTTP; each message of each answer recorded and delivered
/// as a stdout line would be, as it arrives (the first answer's time is
/// the "first stdout byte"). Once the session is initialized, the
/// server's own stream (GET) is delivered the same way; the session is
/// ended when the probe is done.
async fn post_lines(
    to: crate::transport::http::Endpoint,
    mut rx: mpsc::UnboundedReceiver<Out>,
    tx: mpsc::Sender<serde_json::Value>,
    exchange: Exchange,
    first_byte: Arc<OnceLock<f64>>,
) {
    let start = exchange.start();
    let where_ = format!("{}{}", to.authority, to.path);
    let mut session = match crate::transport::http::Session::new(to) {
        Ok(s) => s,
        Err(e) => {
            log::info!("http: no client for {where_}: {e}");
            return;
        }
    };
    let mut server_stream: Option<tokio::task::JoinHandle<()>> = None;
    while let Some(Out::Line(mut line)) = rx.recv().await {
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        let mut answer = match session.post(&line).await {
            Ok(a) => a,
            Err(e) => {
                log::info!("http: no answer from {where_}: {e}");
                break;
            }
        };
        first_byte.get_or_init(|| ms_since(start));
        let mut messages = 0;
        loop {
            match answer.next().await {
                Ok(Some(mut m)) => {
                    messages += 1;
                    if !session.has_version() && !values_over(&m, MAX_LINE_VALUES) {
                        if let Ok(v) = serde_json::from_slice(&m) {
                            session.note(&v);
                        }
                    }
                    deliver(&mut m, &tx, &exchange).await;
                }
                Ok(None) => break,
                Err(e) => {
                    log::info!("http: an answer cut short: {e}");
                    break;
                }
            }
        }
        if answer.status >= 300 && messages == 0 {
            let said = answer.without_message();
            log::info!("http: the server answered a POST with {said}");
            exchange.record(Direction::Transport, said.as_bytes(), None);
            // A redirect fails the request it answered, saying where it
            // pointed: the step ends now, not at its timeout.
            if answer.location.is_some() {
                if let Some(id) = request_id(&line) {
                    let failed = serde_json::json!({
                        "jsonrpc": "2.0",
                        "id": id,
                        "error": {"code": -32000, "message": said},
                    });
                    let _ = tx.send(failed).await;
                }
            }
        }
        if server_stream.is_none() && session.id().is_some() && initialized(&line) {
            if let Some(mut stream) = session.listen().await {
                let (tx, exchange) = (tx.clone(), exchange.clone());
                server_stream = Some(tokio::spawn(async move {
                    while let Ok(Some(mut m)) = stream.next().await {
                        deliver(&mut m, &tx, &exchange).await;
                    }
                }));
            }
        }
    }
    if let Some(s) = server_stream {
        s.abort();
    }
    session.end().await;
}

/// The id of the request `line` is (none for a notification or a line
/// that is not JSON).
fn request_id(line: &[u8]) -> Option<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    v.get("method")?;
    v.get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned()
}

/// The probe's line is the `notifications/initialized` notification.
fn initialized(line: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(line)
        .is_ok_and(|v| v["method"] == "notifications/initialized")
}

/// Splits stdout into lines, records each, forwards the JSON ones.
pub async fn read_stdout(
    mut out: impl AsyncRead + Unpin,
    tx: mpsc::Sender<serde_json::Value>,
    exchange: Exchange,
    first_byte: Arc<OnceLock<f64>>,
) {
    let start = exchange.start();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut line = Vec::new();
    let mut oversized = false;
    loop {
        let n = match out.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        first_byte.get_or_init(|| ms_since(start));
        let mut rest = &chunk[..n];
        while !rest.is_empty() {
            let (part, newline) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (&rest[..i], true),
                None => (rest, false),
            };
            rest = &rest[part.len() + usize::from(newline)..];
            if !oversized {
                line.extend_from_slice(part);
                if line.len() > MAX_LINE {
                    exchange.record(Direction::Received, &line, None);
                    line = Vec::new();
                    oversized = true;
                }
            }
            if newline {
                if !oversized {
                    deliver(&mut line, &tx, &exchange).await;
                }
                line.clear();
                oversized = false;
            }
        }
    }
    if !oversized {
        deliver(&mut line, &tx, &exchange).await;
    }
}

async fn deliver(line: &mut Vec<u8>, tx: &mpsc::Sender<serde_json::Value>, x: &Exchange) {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    if line.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    if values_over(line, MAX_LINE_VALUES) {
        log::info!(
            "a stdout line of the server holds over {MAX_LINE_VALUES} JSON values: not parsed"
        );
        x.record(Direction::Received, line, None);
        return;
    }
    match serde_json::from_slice::<serde_json::Value>(line) {
        Ok(v) => {
            x.record(Direction::Received, line, Some(&v));
            let _ = tx.send(v).await;
        }
        Err(_) => x.record(Direction::Received, line, None),
    }
}

/// Whether the JSON text `line` holds more than `max` values: every value
/// but the first follows a `,` or opens an array or object (or is an
/// object's key, after `{` or `,`), outside strings.
fn values_over(line: &[u8], max: usize) -> bool {
    let (mut n, mut in_string, mut escaped) = (1usize, false, false);
    for &b in line {
        match (in_string, b) {
            (true, _) if escaped => escaped = false,
            (true, b'\\') => escaped = true,
            (true, b'"') => in_string = false,
            (true, _) => {}
            (false, b'"') => in_string = true,
            // `{"k":1,"l":2}`: a key and a value per `:`, the `,` and
            // `{` count one of them; `[1,2]`: one per `,` and `[`.
            (false, b',' | b'[' | b'{' | b':') => {
                n += 1;
                if n > max {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

async fn read_stderr(mut err: impl AsyncRead + Unpin, sink: Arc<Mutex<StderrBuf>>) {
    let mut chunk = vec![0u8; 64 * 1024];
    while let Ok(n) = err.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        let mut s = sink.lock().unwrap_or_else(|e| e.into_inner());
        s.bytes += n as u64;
        let room = STDERR_HEAD_WINDOW.saturating_sub(s.head.len());
        s.head.extend_from_slice(&chunk[..n.min(room)]);
        let keep = &chunk[n.saturating_sub(STDERR_WINDOW)..n];
        s.window.extend(keep);
        let excess = s.window.len().saturating_sub(STDERR_WINDOW);
        s.window.drain(..excess);
    }
}

/// rmcp's view of a [`Wire`].
pub struct WireTransport {
    outbox: Outbox,
    incoming: Incoming,
}

impl Transport<RoleClient> for WireTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), io::Error>> + Send + 'static {
        let sent = serde_json::to_vec(&item)
            .map_err(io::Error::other)
            .and_then(|line| self.outbox.send(line));
        std::future::ready(sent)
    }

    fn receive(
        &mut self,
    ) -> impl std::future::Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        let incoming = self.incoming.clone();
        async move {
            let mut rx = incoming.lock().await;
            loop {
                let v = rx.recv().await?;
                // JSON that is no MCP message stays in the exchange only.
                if let Ok(m) = serde_json::from_value(v) {
                    return Some(m);
                }
            }
        }
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), io::Error>> + Send {
        std::future::ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    #[test]
    fn a_line_of_too_many_values_is_not_parsed() {
        let many = format!("[{}0]", "0,".repeat(MAX_LINE_VALUES));
        assert!(values_over(many.as_bytes(), MAX_LINE_VALUES));
        let fine = format!("[{}0]", "0,".repeat(MAX_LINE_VALUES - 2));
        assert!(!values_over(fine.as_bytes(), MAX_LINE_VALUES));
        // Commas and brackets inside strings are text, escapes included.
        let text = format!(
            "{{\"k\":\"{}\\\"{}\"}}",
            ",[".repeat(1000),
            ",{".repeat(1000)
        );
        assert!(
            serde_json::from_str::<serde_json::Value>(&text).is_ok(),
            "{text}"
        );
        assert!(!values_over(text.as_bytes(), 10));
        assert!(values_over(br#"{"a":1,"b":[2,3]}"#, 5));
        assert!(!values_over(br#"{"a":1,"b":[2,3]}"#, 8));
        // The reader delivers the small one and drops the big one.
        rt().block_on(async {
            let (tx, mut rx) = mpsc::channel(4);
            let x = Exchange::new(Instant::now());
            let input = format!("{many}\n{{\"ok\":1}}\n").into_bytes();
            read_stdout(&input[..], tx, x.clone(), Arc::new(OnceLock::new())).await;
            assert_eq!(rx.recv().await.unwrap(), serde_json::json!({"ok": 1}));
            assert!(rx.recv().await.is_none());
        });
    }

    /// Set in the middle process of the parent-death test.
    const MIDDLE: &str = "MCPVM_WIRE_DEATH_MIDDLE";

    #[test]
    fn a_child_started_with_the_hook_dies_with_its_parent() {
        use std::os::unix::process::CommandExt;
        if std::env::var_os(MIDDLE).is_some() {
            // The middle process: start a long sleep with the hook, say
            // its pid, end.
            let mut cmd = std::process::Command::new("sleep");
            // Not holding the test's pipe open: it reads until EOF.
            cmd.arg("60").stdout(Stdio::null()).stderr(Stdio::null());
            // SAFETY: the hook makes only async-signal-safe calls.
            unsafe { cmd.pre_exec(die_with_parent(std::process::id())) };
            println!("grandchild {}", cmd.spawn().unwrap().id());
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "transport::wire::tests::a_child_started_with_the_hook_dies_with_its_parent",
            ])
            .arg("--nocapture")
            .env(MIDDLE, "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let pid: i32 = text
            .lines()
            .find_map(|l| l.strip_prefix("grandchild "))
            .unwrap_or_else(|| panic!("no pid in: {text}"))
            .trim()
            .parse()
            .unwrap();
        // Reparented to init (or a subreaper) and signalled: gone soon.
        let t0 = Instant::now();
        let alive = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
        };
        while alive() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let left = alive();
        if left {
            // SAFETY: the sleep this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        assert!(!left, "the grandchild outlived its parent");
    }

    #[test]
    fn a_child_whose_parent_is_already_gone_does_not_start() {
        use std::os::unix::process::CommandExt;
        // Told that its parent was pid 1 while getppid() says this
        // process: as if the parent had ended and the child been adopted.
        let mut cmd = std::process::Command::new("true");
        // SAFETY: the hook makes only async-signal-safe calls.
        unsafe { cmd.pre_exec(die_with_parent(1)) };
        let e = cmd.spawn().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ESRCH), "{e}");
    }

    #[test]
    fn lines_split_across_reads_and_garbage_are_recorded() {
        rt().block_on(async {
            let script = r#"printf '{"a":'; sleep 0.1; printf '1}\nnot json\r\n\n{"b":2}'"#;
            let mut w = Wire::spawn(&sh(script)).unwrap();
            let until = Instant::now() + Duration::from_secs(5);
            assert!(matches!(w.recv(until).await, Recv::Message(v) if v["a"] == 1));
            assert!(matches!(w.recv(until).await, Recv::Message(v) if v["b"] == 2));
            assert!(matches!(w.recv(until).await, Recv::Closed));
            assert_eq!(w.exchange.garbage_lines(), 1);
            assert!(w.first_stdout_byte_ms().is_some());
            let e = w.shutdown(Duration::from_secs(5)).await;
            assert_eq!(e.code, Some(0));
        });
    }

    #[test]
    fn stdin_round_trip_and_close() {
        rt().block_on(async {
            let mut w = Wire::spawn(&sh("cat")).unwrap();
            w.send_json(&serde_json::json!({"x": 1})).unwrap();
            let until = Instant::now() + Duration::from_secs(5);
            assert!(matches!(w.recv(until).await, Recv::Message(v) if v["x"] == 1));
            let e = w.shutdown(Duration::from_secs(5)).await;
            assert!(e.exited_by_itself);
            assert_eq!(e.code, Some(0));
        });
    }

    /// A server that prints its key and then just enough that the 8 KiB
    /// tail's cut falls inside the key: none of the key is in the tail
    /// (before, its last characters were).
    #[test]
    fn the_stderr_tail_keeps_no_part_of_a_secret_its_cut_fell_inside() {
        rt().block_on(async {
            let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
            let after = STDERR_TAIL - 20;
            let script = format!(
                "printf 'key={secret}' >&2; head -c {after} /dev/zero | tr '\\0' y >&2; exec sleep 0"
            );
            let extras = Extras {
                secrets: crate::report::redact::Secrets::new([("GITHUB_TOKEN".to_string(), secret.to_string())]),
                ..Extras::default()
            };
            let mut w = Wire::spawn_with(&sh(&script), extras).unwrap();
            w.shutdown(Duration::from_secs(5)).await;
            let s = w.stderr();
            assert_eq!(s.bytes, (4 + secret.len() + after) as u64);
            assert!(s.tail.len() <= STDERR_TAIL, "{}", s.tail.len());
            assert!(s.tail.contains("GITHUB_TOKEN]"), "{}", &s.tail[..60]);
            for piece in secret.as_bytes().windows(4) {
                let piece = std::str::from_utf8(piece).unwrap();
                assert!(!s.tail.contains(piece), "{piece} in {}", &s.tail[..60]);
            }
        });
    }

    #[test]
    fn stderr_flood_keeps_a_bounded_tail_and_a_hung_server_is_killed() {
        rt().block_on(async {
            let script = "head -c 3000000 /dev/zero | tr '\\0' x >&2; echo END >&2; \
                          trap '' TERM; exec sleep 600";
            let mut w = Wire::spawn(&sh(script)).unwrap();
            let until = Instant::now() + Duration::from_secs(10);
            while w.stderr().bytes < 3_000_004 && Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let s = w.stderr();
            assert_eq!(s.bytes, 3_000_004);
            assert_eq!(s.tail.len(), STDERR_TAIL);
            assert!(s.tail.ends_with("END\n"));
            let t0 = Instant::now();
            let e = w.shutdown(Duration::from_millis(200)).await;
            assert!(!e.exited_by_itself);
            assert_eq!(e.signal, Some(libc::SIGKILL));
            assert!(t0.elapsed() < Duration::from_secs(5));
        });
    }

    #[test]
    fn spawn_failure_names_the_command() {
        let r = rt().block_on(async { Wire::spawn(&["/nonexistent/srv".to_string()]).err() });
        let e = r.unwrap();
        assert!(e.to_string().contains("/nonexistent/srv"), "{e}");
    }
}
