//! Counts the server's system calls in the guest kernel, not through one
//! user notification per call: a histogram trigger on the
//! `raw_syscalls:sys_enter` tracepoint keyed by call number
//! (Documentation/trace/histogram.rst), limited to the server and all it
//! forks (`set_event_pid` with the `event-fork` option). The kernel adds
//! one to a hash table entry per call; the agent reads the table once,
//! when the server has exited. A notification costs two context switches
//! and a round trip through the agent per call: with every call notified
//! the first response took 3.9× as long.
//!
//! The trigger is created paused. The child ([`super::ChildSide`]) writes
//! its own pid to `set_event_pid` before its filter, and `cont` to the
//! trigger as its last call before `execve` (the filter lets that one
//! `write` through), so the table holds the server's calls from its exec
//! on and none of the agent's.
//!
//! Calls the filter denies never reach the tracepoint (seccomp runs
//! first), so the agent adds the supervisor's denials to the table.
//! This is observation, not enforcement: a server that is root in the
//! guest and may mount tracefs could pause the trigger; a profile that
//! withholds `mount` takes that away.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The trigger, as written; `pause`/`cont` name it by the same keys.
const TRIGGER: &str = "hist:keys=id:vals=hitcount:size=2048";
pub const CONT: &[u8] = b"hist:keys=id:vals=hitcount:cont";

/// A paused histogram of the calls of one process tree.
pub struct SyscallTrace {
    pid_filter: OwnedFd,
    trigger: OwnedFd,
    hist: File,
}

/// What the child writes before its `execve` (raw fds it inherits).
#[derive(Clone, Copy)]
pub struct ChildTrace {
    pub pid_filter: RawFd,
    pub trigger: RawFd,
}

impl SyscallTrace {
    /// Mounts tracefs (once), clears the event pid filter, follows forks
    /// and creates the trigger paused. Fails on a kernel without
    /// `CONFIG_HIST_TRIGGERS`/`CONFIG_FTRACE_SYSCALLS`; the caller then
    /// counts by notification.
    pub fn arm() -> io::Result<SyscallTrace> {
        let root = Path::new("/sys/kernel/tracing");
        let events = root.join("events/raw_syscalls/sys_enter");
        if !events.exists() {
            mount_tracefs(root)?;
        }
        let named = |what: &str, e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
        write_file(&root.join("options/event-fork"), b"1").map_err(|e| named("event-fork", e))?;
        // O_TRUNC empties the list: no pids yet, and until the child's
        // write nothing is counted because the trigger is paused.
        let pid_filter =
            open_write(&root.join("set_event_pid"), true).map_err(|e| named("set_event_pid", e))?;
        let trigger = open_write(&events.join("trigger"), true).map_err(|e| named("trigger", e))?;
        let paused = format!("{TRIGGER}:pause");
        write_fd(&trigger, paused.as_bytes()).map_err(|e| named("trigger", e))?;
        let hist = File::open(events.join("hist")).map_err(|e| named("hist", e))?;
        Ok(SyscallTrace {
            pid_filter,
            trigger,
            hist,
        })
    }

    pub fn child(&self) -> ChildTrace {
        ChildTrace {
            pid_filter: self.pid_filter.as_raw_fd(),
            trigger: self.trigger.as_raw_fd(),
        }
    }

    /// The counts so far, by call number: the table read from its start
    /// each time, so it can be read while the server runs and again
    /// when it has exited.
    pub fn counts(&mut self) -> io::Result<BTreeMap<u32, u64>> {
        use std::io::{Seek, SeekFrom};
        self.hist.seek(SeekFrom::Start(0))?;
        let mut text = String::new();
        self.hist.read_to_string(&mut text)?;
        Ok(parse_hist(&text))
    }
}

impl ChildTrace {
    /// In the child after fork: its pid into the filter.
    ///
    /// # Safety
    /// Async-signal-safe: getpid, write, and a stack buffer.
    pub unsafe fn follow_me(&self) -> io::Result<()> {
        let mut buf = [0u8; 20];
        let digits = decimal(libc::getpid() as u64, &mut buf);
        raw_write(self.pid_filter, digits)
    }

    /// In the child, the last call before `execve`: start counting.
    ///
    /// # Safety
    /// Async-signal-safe: one write of a static buffer.
    pub unsafe fn start(&self) -> io::Result<()> {
        raw_write(self.trigger, CONT)
    }
}

/// `n` in decimal, at the end of `buf`.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// The entries of a `hist` file: lines `{ id: 257 } hitcount: 42`.
pub fn parse_hist(text: &str) -> BTreeMap<u32, u64> {
    let field = |line: &str, name: &str| -> Option<u64> {
        let rest = &line[line.find(name)? + name.len()..];
        let rest = rest.trim_start();
        let end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        rest[..end].parse().ok()
    };
    let mut counts = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with('{')) {
        if let (Some(id), Some(n)) = (field(line, "id:"), field(line, "hitcount:")) {
            if let Ok(id) = u32::try_from(id) {
                *counts.entry(id).or_default() += n;
            }
        }
    }
    counts
}

fn mount_tracefs(at: &Path) -> io::Result<()> {
    let target = CString::new(at.as_os_str().as_bytes())?;
    // SAFETY: mount(2) with NUL-terminated strings that outlive the call.
    let rc = unsafe {
        libc::mount(
            c"tracefs".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("mount tracefs: {e}")));
    }
    Ok(())
}

fn open_write(path: &Path, truncate: bool) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())?;
    let flags = libc::O_WRONLY | libc::O_CLOEXEC | if truncate { libc::O_TRUNC } else { 0 };
    // SAFETY: open with a NUL-terminated path; the fd is ours.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just opened.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn write_fd(fd: &OwnedFd, data: &[u8]) -> io::Result<()> {
    // SAFETY: a write of a live buffer to an fd we own.
    unsafe { raw_write(fd.as_raw_fd(), data) }
}

fn write_file(path: &Path, data: &[u8]) -> io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(data)
}

/// One write(2), all of `data` or an error (tracefs files take a
/// command in one write).
unsafe fn raw_write(fd: RawFd, data: &[u8]) -> io::Result<()> {
    let n = libc::write(fd, data.as_ptr().cast(), data.len());
    if n < 0 {
        Err(io::Error::last_os_error())
    } else if n as usize != data.len() {
        Err(io::Error::new(io::ErrorKind::WriteZero, "short write"))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_reads_as_counts_per_call() {
        let text = "# event histogram\n#\n# trigger info: hist:keys=id:vals=hitcount:sort=hitcount:size=2048 [active]\n#\n\n\
{ id:          0 } hitcount:         12\n\
{ id:        257 } hitcount:         30\n\
{ id: 59 } hitcount: 1\n\
{ id: garbage } hitcount: 3\n\n\
Totals:\n    Hits: 43\n    Entries: 3\n    Dropped: 0\n";
        let counts = parse_hist(text);
        assert_eq!(counts, BTreeMap::from([(0, 12), (59, 1), (257, 30)]));
        assert!(parse_hist("").is_empty());
    }

    #[test]
    fn pids_are_written_in_decimal() {
        let mut buf = [0u8; 20];
        assert_eq!(decimal(0, &mut buf), b"0");
        assert_eq!(decimal(4_194_304, &mut buf), b"4194304");
        assert_eq!(decimal(u64::MAX, &mut buf), b"18446744073709551615");
    }
}
