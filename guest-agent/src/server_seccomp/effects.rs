//! Recording what the server does, with arguments: the calls in
//! [`RECORDED`] are sent to the supervisor as user notifications under a
//! recording policy; while the caller waits, the agent reads the call's
//! paths, flags, argv and socket address from its memory
//! (`/proc/PID/mem`) and its directories from `/proc/PID`, and
//! attributes the call to the MCP request in flight ([`crate::calls`]).
//!
//! Observation, not enforcement: a thread of the caller could change the
//! memory after it was read (seccomp(2)); what is recorded is what the
//! call most likely did. Bounded: at most [`MAX_SENT`] calls are sent as
//! events; the rest are only counted, and the count says so.

use std::collections::BTreeMap;
use std::sync::mpsc::Sender;
use std::sync::Arc;

use mcpvm_protocol::messages::{Effect, SyscallCount};

use crate::calls::Calls;

/// The calls recorded, by x86_64 name.
pub const RECORDED: &[&str] = &[
    "execve",
    "execveat",
    "open",
    "openat",
    "openat2",
    "creat",
    "truncate",
    "unlink",
    "unlinkat",
    "rename",
    "renameat",
    "renameat2",
    "mkdir",
    "mkdirat",
    "rmdir",
    "symlink",
    "symlinkat",
    "link",
    "linkat",
    "chmod",
    "fchmodat",
    "connect",
    "sendto",
    "bind",
    "listen",
    "ptrace",
    "mount",
];

/// The most calls sent as events in one run: enough for a native
/// module's build in the install microVM (mongodb's tree, compiling
/// cpu-features and ssh2's binding, opens some 31,000 files), whose
/// compiler would otherwise use up the bound before a later script's
/// network attempt is seen.
pub const MAX_SENT: u64 = 50_000;
const MAX_STRING: usize = 4096;
const MAX_ARGS: usize = 64;
const AT_FDCWD: i32 = -100;

/// What the recorder hands on: each call, then the tally at the end.
pub enum Recorded {
    Effect(Box<Effect>),
    End {
        counts: Vec<SyscallCount>,
        dropped: u64,
    },
}

pub struct Recorder {
    calls: Arc<Calls>,
    out: Sender<Recorded>,
    counts: BTreeMap<u32, u64>,
    sent: u64,
    dropped: u64,
}

impl Recorder {
    pub fn new(calls: Arc<Calls>, out: Sender<Recorded>) -> Self {
        Recorder {
            calls,
            out,
            counts: BTreeMap::new(),
            sent: 0,
            dropped: 0,
        }
    }

    /// One notified call of `pid` (still waiting): recorded if it is one
    /// of [`RECORDED`]. `denied`: the errno the policy answers instead.
    pub fn record(&mut self, pid: u32, nr: u32, args: [u64; 6], denied: Option<String>) {
        let Some(call) = syscall_table::name(nr).filter(|n| RECORDED.contains(n)) else {
            return;
        };
        let during = self.calls.during();
        let Some(mut effect) = read(pid, call, args) else {
            return;
        };
        *self.counts.entry(nr).or_default() += 1;
        if self.sent >= MAX_SENT {
            self.dropped += 1;
            return;
        }
        effect.during = during;
        effect.denied = denied;
        effect.uptime_ms = crate::uptime_ms();
        self.sent += 1;
        let _ = self.out.send(Recorded::Effect(Box::new(effect)));
    }

    /// Every recorded call counted, and how many were not sent.
    pub fn end(&self) {
        let counts = self
            .counts
            .iter()
            .map(|(&nr, &count)| SyscallCount {
                syscall: super::names::name(nr),
                errno: None,
                count,
            })
            .collect();
        let _ = self.out.send(Recorded::End {
            counts,
            dropped: self.dropped,
        });
    }
}

/// The call's arguments as an [`Effect`]; None for a call with nothing to
/// show (a `sendto` on a connected socket).
fn read(pid: u32, call: &str, a: [u64; 6]) -> Option<Effect> {
    let mem = Memory::of(pid);
    let dir = |fd: u64| match fd as i32 {
        AT_FDCWD => link(pid, "cwd"),
        fd => link(pid, &format!("fd/{fd}")),
    };
    let at = |fd: u64, ptr: u64| mem.string(ptr).map(|p| absolute(&dir(fd), &p));
    let cwd = |ptr: u64| at(AT_FDCWD as u64, ptr);
    let mut e = Effect {
        pid,
        exe: link(pid, "exe"),
        call: call.to_string(),
        ..Effect::default()
    };
    let mut paths = |list: Vec<Option<String>>| e.paths.extend(list.into_iter().flatten());
    match call {
        "execve" => {
            paths(vec![cwd(a[0])]);
            e.argv = mem.strings(a[1]);
        }
        "execveat" => {
            paths(vec![at(a[0], a[1])]);
            e.argv = mem.strings(a[2]);
        }
        "open" => {
            paths(vec![cwd(a[0])]);
            e.access = Some(access(a[1] as i32));
        }
        "openat" => {
            paths(vec![at(a[0], a[1])]);
            e.access = Some(access(a[2] as i32));
        }
        "openat2" => {
            paths(vec![at(a[0], a[1])]);
            // struct open_how starts with its u64 flags.
            let flags = mem
                .bytes(a[2], 8)
                .map(|b| u64::from_ne_bytes(b[..8].try_into().unwrap()));
            e.access = flags.ok().map(|f| access(f as i32));
        }
        "creat" => {
            paths(vec![cwd(a[0])]);
            e.access = Some("write+create+truncate".into());
        }
        "truncate" | "unlink" | "mkdir" | "rmdir" | "chmod" => paths(vec![cwd(a[0])]),
        "unlinkat" | "mkdirat" | "fchmodat" => paths(vec![at(a[0], a[1])]),
        "rename" | "link" => paths(vec![cwd(a[0]), cwd(a[1])]),
        "renameat" | "renameat2" | "linkat" => paths(vec![at(a[0], a[1]), at(a[2], a[3])]),
        // symlink(target, linkpath): the link is made; the target is text.
        "symlink" => paths(vec![cwd(a[1]), mem.string(a[0])]),
        "symlinkat" => paths(vec![at(a[1], a[2]), mem.string(a[0])]),
        "connect" | "bind" => e.address = address(&mem.bytes(a[1], a[2] as usize).ok()?),
        "sendto" => {
            if a[4] == 0 {
                return None;
            }
            e.address = address(&mem.bytes(a[4], a[5] as usize).ok()?);
        }
        "mount" => paths(vec![mem.string(a[0]), cwd(a[1])]),
        _ => {}
    }
    // A call on the name itself (removing, renaming or making a link)
    // touches the link, not where it leads: only its directory is
    // followed, as the kernel does.
    let on_the_name = ON_THE_NAME.contains(&call);
    e.resolved = e
        .paths
        .first()
        .and_then(|p| match on_the_name {
            true => resolve_dir(p),
            false => resolve(p),
        })
        .filter(|r| Some(r) != e.paths.first());
    // Whether the path the call reads, removes or moves away was there:
    // git unlinks MERGE_HEAD on every checkout, there or not.
    let reads =
        e.call.starts_with("open") && e.access.as_deref().is_some_and(|a| !a.contains("create"));
    e.missing =
        (reads || REMOVES.contains(&call)) && e.paths.first().is_some_and(|p| missing(pid, p));
    Some(e)
}

/// Whether `path` does not exist as the process sees it (through its
/// root: a sandboxed helper may have another). Anything but "not
/// found" (a permission, a loop) counts as there.
fn missing(pid: u32, path: &str) -> bool {
    let seen = format!("/proc/{pid}/root{path}");
    matches!(std::fs::symlink_metadata(&seen), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

/// Calls that take their first path away (a rename moves it).
const REMOVES: &[&str] = &[
    "unlink",
    "unlinkat",
    "rmdir",
    "rename",
    "renameat",
    "renameat2",
];

/// Calls that act on a path's last name and never follow a symlink there.
const ON_THE_NAME: &[&str] = &[
    "unlink",
    "unlinkat",
    "rmdir",
    "rename",
    "renameat",
    "renameat2",
    "link",
    "linkat",
    "symlink",
    "symlinkat",
    "mkdir",
    "mkdirat",
];

/// `/proc/PID/<what>` read as a link ("" when it cannot be).
fn link(pid: u32, what: &str) -> String {
    std::fs::read_link(format!("/proc/{pid}/{what}"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `path` joined to `dir` unless it is absolute.
pub fn absolute(dir: &str, path: &str) -> String {
    if path.starts_with('/') || dir.is_empty() {
        return path.to_string();
    }
    format!("{}/{path}", dir.trim_end_matches('/'))
}

/// Where `path` leads after symlinks; for a path that does not exist
/// yet, its directory resolved and its name.
fn resolve(path: &str) -> Option<String> {
    match std::fs::canonicalize(path) {
        Ok(r) => Some(r.to_string_lossy().into_owned()),
        Err(_) => resolve_dir(path),
    }
}

/// `path` with its directory resolved and its last name as it is.
fn resolve_dir(path: &str) -> Option<String> {
    let p = std::path::Path::new(path);
    let dir = std::fs::canonicalize(p.parent()?).ok()?;
    Some(dir.join(p.file_name()?).to_string_lossy().into_owned())
}

/// An open's flags as access words.
pub fn access(flags: i32) -> String {
    let mut s = match flags & libc::O_ACCMODE {
        libc::O_WRONLY => "write",
        libc::O_RDWR => "read-write",
        _ => "read",
    }
    .to_string();
    if flags & libc::O_CREAT != 0 {
        s += "+create";
    }
    if flags & libc::O_TRUNC != 0 {
        s += "+truncate";
    }
    s
}

/// A `struct sockaddr` as text.
pub fn address(b: &[u8]) -> Option<String> {
    let family = u16::from_ne_bytes(b.get(..2)?.try_into().ok()?) as i32;
    match family {
        libc::AF_INET => {
            let port = u16::from_be_bytes(b.get(2..4)?.try_into().ok()?);
            let ip = std::net::Ipv4Addr::from(<[u8; 4]>::try_from(b.get(4..8)?).ok()?);
            Some(format!("inet {ip}:{port}"))
        }
        libc::AF_INET6 => {
            let port = u16::from_be_bytes(b.get(2..4)?.try_into().ok()?);
            let ip = std::net::Ipv6Addr::from(<[u8; 16]>::try_from(b.get(8..24)?).ok()?);
            Some(format!("inet6 [{ip}]:{port}"))
        }
        libc::AF_UNIX => {
            let path = b.get(2..).unwrap_or_default();
            match path.first() {
                None => Some("unix (unnamed)".into()),
                Some(0) => Some(format!("unix @{}", String::from_utf8_lossy(&path[1..]))),
                Some(_) => {
                    let end = path.iter().position(|&c| c == 0).unwrap_or(path.len());
                    Some(format!("unix {}", String::from_utf8_lossy(&path[..end])))
                }
            }
        }
        libc::AF_NETLINK => Some("netlink".into()),
        other => Some(format!("family {other}")),
    }
}

/// Another process's memory, through `/proc/PID/mem` (the guest kernel
/// has no `process_vm_readv`: CONFIG_CROSS_MEMORY_ATTACH is off), opened
/// once per recorded call.
struct Memory(Option<std::fs::File>);

impl Memory {
    fn of(pid: u32) -> Self {
        Memory(std::fs::File::open(format!("/proc/{pid}/mem")).ok())
    }

    /// `len` bytes at `addr` (at most a page).
    fn bytes(&self, addr: u64, len: usize) -> std::io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let Some(f) = &self.0 else {
            return Err(std::io::Error::from(std::io::ErrorKind::NotFound));
        };
        let mut buf = vec![0u8; len.min(4096)];
        let n = f.read_at(&mut buf, addr)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// The NUL-terminated string at `addr`, read a page at a time (a read
    /// may not cross into an unmapped page), at most [`MAX_STRING`].
    fn string(&self, addr: u64) -> Option<String> {
        if addr == 0 {
            return None;
        }
        let mut out = Vec::new();
        let mut at = addr;
        while out.len() < MAX_STRING {
            let to_page_end = 4096 - (at % 4096) as usize;
            let chunk = self
                .bytes(at, to_page_end.min(MAX_STRING - out.len()))
                .ok()?;
            if chunk.is_empty() {
                break;
            }
            match chunk.iter().position(|&c| c == 0) {
                Some(end) => {
                    out.extend_from_slice(&chunk[..end]);
                    return Some(String::from_utf8_lossy(&out).into_owned());
                }
                None => out.extend_from_slice(&chunk),
            }
            at += chunk.len() as u64;
        }
        Some(String::from_utf8_lossy(&out).into_owned())
    }

    /// The NULL-terminated array of strings at `addr` (argv), bounded.
    fn strings(&self, addr: u64) -> Vec<String> {
        let mut out = Vec::new();
        let mut total = 0;
        for i in 0..MAX_ARGS as u64 {
            let Ok(p) = self.bytes(addr + 8 * i, 8) else {
                break;
            };
            let Ok(ptr) = <[u8; 8]>::try_from(p.as_slice()).map(u64::from_ne_bytes) else {
                break;
            };
            let Some(s) = (ptr != 0).then(|| self.string(ptr)).flatten() else {
                break;
            };
            total += s.len();
            out.push(s);
            if total > MAX_STRING {
                break;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_flags_read_as_access_words() {
        assert_eq!(access(libc::O_RDONLY | libc::O_CLOEXEC), "read");
        assert_eq!(
            access(libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC),
            "write+create+truncate"
        );
        assert_eq!(access(libc::O_RDWR), "read-write");
    }

    #[test]
    fn socket_addresses_read_as_text() {
        let mut v4 = vec![0u8; 16];
        v4[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        v4[2..4].copy_from_slice(&80u16.to_be_bytes());
        v4[4..8].copy_from_slice(&[169, 254, 169, 254]);
        assert_eq!(address(&v4).unwrap(), "inet 169.254.169.254:80");
        let mut v6 = vec![0u8; 28];
        v6[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        v6[2..4].copy_from_slice(&22u16.to_be_bytes());
        v6[23] = 1;
        assert_eq!(address(&v6).unwrap(), "inet6 [::1]:22");
        let mut unix = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        unix.extend(b"/run/docker.sock\0");
        assert_eq!(address(&unix).unwrap(), "unix /run/docker.sock");
        let mut abs = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        abs.extend(b"\0bus");
        assert_eq!(address(&abs).unwrap(), "unix @bus");
        assert_eq!(address(&[1]), None, "too short for a family");
        assert_eq!(address(&(libc::AF_INET as u16).to_ne_bytes()), None);
    }

    #[test]
    fn a_path_missing_is_told_through_the_process_s_own_root() {
        let me = std::process::id();
        let dir = tempfile::tempdir().unwrap();
        let there = dir.path().join("there");
        std::fs::write(&there, "x").unwrap();
        assert!(!missing(me, &there.to_string_lossy()));
        assert!(missing(me, &dir.path().join("gone").to_string_lossy()));
        // A link counts as there: where it leads is resolved from our
        // root, not the caller's.
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("gone"), &dangling).unwrap();
        assert!(!missing(me, &dangling.to_string_lossy()));
        assert!(missing(me, "/queue/rotational"));
    }

    #[test]
    fn a_link_removed_is_the_link_and_a_link_opened_is_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        let link = real.join("python3");
        std::os::unix::fs::symlink("/usr/bin/env", &link).unwrap();
        let link = link.to_string_lossy().to_string();
        assert_eq!(resolve(&link).as_deref(), Some("/usr/bin/env"));
        assert_eq!(resolve_dir(&link), Some(link.clone()));
        // Through a linked directory, the directory is followed.
        let via = real.join("via");
        std::os::unix::fs::symlink(&real, &via).unwrap();
        let name = format!("{}/python3", via.display());
        assert_eq!(resolve_dir(&name), Some(link));
        assert!(ON_THE_NAME.contains(&"unlinkat") && !ON_THE_NAME.contains(&"openat"));
    }

    #[test]
    fn relative_paths_join_their_directory() {
        assert_eq!(absolute("/workspace", "a/b.txt"), "/workspace/a/b.txt");
        assert_eq!(absolute("/", "etc"), "/etc");
        assert_eq!(absolute("/srv", "/etc/passwd"), "/etc/passwd");
        assert_eq!(
            absolute("", "x"),
            "x",
            "an unknown directory keeps the path as named"
        );
    }

    #[test]
    fn a_process_memory_reads_back_its_strings_and_argv() {
        // Our own memory, through the same call (a process may read itself).
        let pid = std::process::id();
        let name = std::ffi::CString::new("/workspace/../etc/passwd").unwrap();
        let m = Memory::of(pid);
        assert_eq!(
            m.string(name.as_ptr() as u64).unwrap(),
            "/workspace/../etc/passwd"
        );
        let args: Vec<std::ffi::CString> = ["sh", "-c", "touch /tmp/marker"]
            .iter()
            .map(|s| std::ffi::CString::new(*s).unwrap())
            .collect();
        let mut ptrs: Vec<u64> = args.iter().map(|a| a.as_ptr() as u64).collect();
        ptrs.push(0);
        assert_eq!(
            m.strings(ptrs.as_ptr() as u64),
            vec!["sh", "-c", "touch /tmp/marker"]
        );
        assert_eq!(m.string(0), None);
    }

    #[test]
    fn the_recorder_sends_a_bounded_number_and_counts_the_rest() {
        let (tx, rx) = std::sync::mpsc::channel();
        let calls = Arc::new(Calls::default());
        let mut r = Recorder::new(calls.clone(), tx);
        let path = std::ffi::CString::new("/etc/hostname").unwrap();
        let openat = syscall_table::number("openat").unwrap();
        let read_nr = syscall_table::number("read").unwrap();
        let args = [
            AT_FDCWD as u64,
            path.as_ptr() as u64,
            libc::O_RDONLY as u64,
            0,
            0,
            0,
        ];
        calls.sent(br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami"}}"#);
        for _ in 0..MAX_SENT + 5 {
            r.record(std::process::id(), openat, args, None);
        }
        r.record(std::process::id(), read_nr, [0; 6], None);
        r.end();
        drop(r);
        let got: Vec<Recorded> = rx.iter().collect();
        assert_eq!(got.len() as u64, MAX_SENT + 1);
        let Recorded::Effect(first) = &got[0] else {
            panic!("an effect first")
        };
        assert_eq!(first.call, "openat");
        assert_eq!(first.paths, vec!["/etc/hostname"]);
        assert_eq!(first.access.as_deref(), Some("read"));
        assert!(
            matches!(&first.during, mcpvm_protocol::messages::During::Request { tool: Some(t), .. } if t == "whoami")
        );
        let Recorded::End { counts, dropped } = got.last().unwrap() else {
            panic!("the tally last")
        };
        assert_eq!(*dropped, 5);
        assert_eq!(counts.len(), 1, "read is not recorded: {counts:?}");
        assert_eq!(counts[0].count, MAX_SENT + 5);
    }
}
