//! `--workspace DIR[,rw]`: a host directory handed to the server at
//! /workspace in the guest, read-only by default (the guest's changes stay
//! in the guest). With `rw`, the directory the guest sends back when the
//! server exits replaces DIR, whole or not at all.
//!
//! Transport: a tar stream on the WORKSPACE vsock port (see
//! `mcpvm_protocol::ports`). What comes back is hostile input, judged
//! entry by entry ([`judge`]) before anything lands: the next `git status`
//! or `cd` in DIR must not run guest code on the host. Refused, with the
//! host's own copy kept where there is one: paths that leave DIR, symbolic
//! links that point out of it, hard links, devices and FIFOs, GNU sparse
//! entries (a TiB apparent size from a few bytes), and the configuration
//! the host's tools act on ([`protected_name`]): anything under a hidden
//! name (`.git`, `.envrc`, `.vscode`, `.cargo`, `.npmrc`, …) or a build,
//! test or task file (`pyproject.toml`, `package.json`, `mise.toml`, …)
//! at any depth (a gitfile, `.git/commondir` pointing at a planted
//! directory, a nested `sub/.git/config` all make `git status` run the
//! guest's `core.fsmonitor`), symbolic links that lead into one, and directories
//! laid out as a bare git repository (git takes one for a repository when
//! run inside it). The host's own copies of those stay. Files come back
//! without setuid/setgid/sticky bits, without group or world write, and
//! executable only if the host's file was. The stream is cut at
//! `--workspace-limit` MiB, and so is the sum of the files' sizes. What
//! came back and what was refused is said on stderr.
//!
//! The guest's copy is unpacked into a scratch directory inside DIR and
//! swapped in entry by entry (moved back if a move fails), so nothing
//! beside DIR is ever written: neither the VMM's jail nor this thread's
//! rules hold DIR's parent (which for `~/project` is the user's home).
//! Names beginning with [`SCRATCH`] are mcpvm's own: never sent, never
//! taken from the guest, never moved.
//!
//! The thread that does this is the one VMM thread with host file access,
//! so besides its seccomp filter (file calls, no network but its socket)
//! it jails itself with Landlock ([`jail`]) before it reads anything from
//! the guest: it may read DIR and, for a writable workspace, write
//! beneath it, nothing else. A memory bug in the tar reader cannot write
//! `$HOME/.bashrc`. Where the kernel has no Landlock the jail is partial
//! or absent, and `--verbose` says so.

use std::io::{self, Read};
use std::net::Shutdown;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// A `--workspace`: as a request carries it, the text it came from.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct WorkspaceArg {
    pub path: PathBuf,
    pub writable: bool,
    pub text: String,
}

impl TryFrom<String> for WorkspaceArg {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        parse_workspace(&s)
    }
}

impl From<WorkspaceArg> for String {
    fn from(w: WorkspaceArg) -> String {
        w.text
    }
}

pub fn parse_workspace(s: &str) -> Result<WorkspaceArg, String> {
    let (path, writable) = match s.rsplit_once(',') {
        Some((p, "rw")) => (p, true),
        Some((p, "ro")) => (p, false),
        Some((_, other)) => {
            return Err(format!(
                "unknown workspace option '{other}'; use DIR, DIR,ro or DIR,rw"
            ))
        }
        None => (s, false),
    };
    if path.is_empty() {
        return Err("the workspace needs a directory: DIR[,rw]".into());
    }
    Ok(WorkspaceArg {
        path: PathBuf::from(path),
        writable,
        text: s.to_string(),
    })
}

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("The workspace {0} is not a directory")]
    NotDir(PathBuf),
    #[error("Cannot send the workspace {path} to the guest")]
    Send {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("The workspace the guest sent back was refused ({why}); {path} is unchanged")]
    Refused { path: PathBuf, why: String },
    #[error("Cannot put the guest's workspace in place of {path} (the guest's copy is in {kept})")]
    Replace {
        path: PathBuf,
        kept: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "The workspace {0} is itself a git repository directory (HEAD beside objects, refs or \
         commondir): the guest could write the configuration the host's git runs; hand it over \
         read-only, or a directory with a checkout of it, with `--workspace DIR,rw`"
    )]
    Repository(PathBuf),
    #[error("Cannot confine the workspace thread")]
    Confine(#[source] vmm::host_seccomp::SeccompError),
}

pub fn check(ws: &WorkspaceArg) -> Result<(), WorkspaceError> {
    if !ws.path.is_dir() {
        return Err(WorkspaceError::NotDir(ws.path.clone()));
    }
    // Its top-level `config` and `hooks` would be the guest's to write.
    if ws.writable && repository_layout(&ws.path) {
        return Err(WorkspaceError::Repository(ws.path.clone()));
    }
    Ok(())
}

/// The host side of the workspace port, running on its own thread.
pub struct Transfer {
    connected: Arc<AtomicBool>,
    done: mpsc::Receiver<Result<Option<TakenBack>, WorkspaceError>>,
}

/// What a writable workspace brought back.
#[derive(Debug, Default, PartialEq)]
pub struct TakenBack {
    /// Entries unpacked.
    pub entries: usize,
    /// Entries refused, each with why (guest text, made printable).
    pub refused: Vec<String>,
}

impl std::fmt::Display for TakenBack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} entries back", self.entries)?;
        if !self.refused.is_empty() {
            write!(
                f,
                "; refused {}: {}",
                self.refused.len(),
                self.refused.join("; ")
            )?;
        }
        Ok(())
    }
}

/// Serves the workspace on `listener`: sends DIR, and for a writable
/// workspace takes the guest's copy back (up to `limit` bytes).
/// The thread confines itself to host-file work in `seccomp` mode first;
/// if it cannot, the transfer ends with that error.
pub fn start_transfer(
    listener: UnixListener,
    ws: WorkspaceArg,
    limit: u64,
    seccomp: vmm::SeccompMode,
) -> Transfer {
    let connected = Arc::new(AtomicBool::new(false));
    let (tx, done) = mpsc::channel();
    let flag = connected.clone();
    std::thread::spawn(move || {
        // Resolved while unconfined: a relative path would have tar ask
        // for the working directory (getcwd) on every entry.
        let mut ws = ws;
        if let Ok(abs) = std::path::absolute(&ws.path) {
            ws.path = abs;
        }
        // The guest's copy lands in a scratch directory inside DIR, made
        // once the tree has been sent.
        let fresh = ws.writable.then(|| scratch(&ws.path, "new"));
        if let Err(e) = jail(&ws.path, ws.writable) {
            log::warn!("workspace: cannot jail the workspace thread with Landlock: {e}");
        }
        if let Err(e) =
            crate::host::seccomp::confine(crate::host::seccomp::HostThread::HostFiles, seccomp)
        {
            flag.store(true, Ordering::SeqCst);
            let _ = tx.send(Err(WorkspaceError::Confine(e)));
            return;
        }
        let Ok((stream, _)) = listener.accept() else {
            return;
        };
        flag.store(true, Ordering::SeqCst);
        let send_err = |source| WorkspaceError::Send {
            path: ws.path.clone(),
            source,
        };
        let sent = (|| {
            let mut b = tar::Builder::new(&stream);
            b.follow_symlinks(false);
            append_tree(&mut b, &ws.path)?;
            b.finish()?;
            // A read-only workspace is done. For a writable one our write
            // side stays open until the guest's copy is all here: its end
            // of stream tells the agent it may power the VM off (before
            // that, what was still in flight was lost with the VM).
            match fresh {
                None => stream.shutdown(Shutdown::Write),
                Some(_) => Ok(()),
            }
        })()
        .map_err(send_err);
        let result = match (sent, &fresh) {
            (Err(e), _) => Err(e),
            (Ok(()), None) => Ok(None),
            (Ok(()), Some(fresh)) => {
                let back = std::fs::create_dir(fresh)
                    .map_err(|e| WorkspaceError::Refused {
                        path: ws.path.clone(),
                        why: format!("cannot make {}: {e}", fresh.display()),
                    })
                    .and_then(|()| take_back(&stream, &ws.path, fresh, limit));
                // The tar's padding after its end (a little; a guest that
                // sends more is cut off), so that ending the stream is an
                // orderly close, not a reset.
                let _ = io::copy(&mut (&stream).take(1 << 20), &mut io::sink());
                let _ = stream.shutdown(Shutdown::Both);
                back.map(Some)
            }
        };
        // A copy that could not be put in place is kept where the error
        // says it is.
        let kept = matches!(result, Err(WorkspaceError::Replace { .. }));
        if let (Some(f), Err(_) | Ok(None), false) = (&fresh, &result, kept) {
            let _ = std::fs::remove_dir_all(f);
        }
        let _ = tx.send(result);
    });
    Transfer { connected, done }
}

impl Transfer {
    /// After the VM ended: the outcome (Some: the guest's copy replaced
    /// DIR, with what was refused), or None when the guest never asked for
    /// the workspace.
    pub fn finish(self) -> Option<Result<Option<TakenBack>, WorkspaceError>> {
        if !self.connected.load(Ordering::SeqCst) {
            return None;
        }
        // The agent waits for the guest's copy to be read before the VM
        // goes (or gives up): this only waits for the unpacking to finish.
        self.done.recv_timeout(Duration::from_secs(600)).ok()
    }
}

/// The start of the names mcpvm keeps for itself inside a writable
/// workspace: the guest's copy while it is unpacked, DIR's entries while
/// they are swapped out.
pub const SCRATCH: &str = ".mcpvm-take-back-";

fn scratch(dir: &Path, tag: &str) -> PathBuf {
    dir.join(format!("{SCRATCH}{tag}-{}", std::process::id()))
}

fn is_scratch(name: &std::ffi::OsStr) -> bool {
    name.as_encoded_bytes().starts_with(SCRATCH.as_bytes())
}

/// DIR's tree as the tar's `.`, without mcpvm's own scratch entries.
fn append_tree(b: &mut tar::Builder<impl io::Write>, dir: &Path) -> io::Result<()> {
    b.append_dir(".", dir)?;
    let mut names: Vec<_> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<io::Result<_>>()?;
    names.sort();
    for name in names.into_iter().filter(|n| !is_scratch(n)) {
        let path = dir.join(&name);
        let rel = Path::new(".").join(&name);
        match std::fs::symlink_metadata(&path)?.is_dir() {
            true => b.append_dir_all(&rel, &path)?,
            false => b.append_path_with_name(&path, &rel)?,
        }
    }
    Ok(())
}

/// Why the workspace's thread could not be confined.
#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    #[error("{}: {why}", path.display())]
    Path {
        path: PathBuf,
        why: landlock::PathFdError,
    },
    #[error(transparent)]
    Ruleset(#[from] landlock::RulesetError),
}

/// Confines the calling thread with Landlock: read beneath `dir`, and
/// write beneath it too when `writable` (the scratch directory and the
/// swap are inside it). Best effort: returns how much the kernel
/// enforced, and logs a partial jail.
pub fn jail(dir: &Path, writable: bool) -> Result<landlock::RulesetStatus, LandlockError> {
    use landlock::{
        Access, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, ABI,
    };
    let abi = ABI::V5;
    let all = AccessFs::from_all(abi);
    let fd = |p: &Path| {
        PathFd::new(p).map_err(|why| LandlockError::Path {
            path: p.to_path_buf(),
            why,
        })
    };
    let mut ruleset = Ruleset::default()
        .handle_access(all)
        .and_then(|r| r.create())?;
    let add = |r: landlock::RulesetCreated, p: &Path, access| {
        Ok::<_, LandlockError>(r.add_rule(PathBeneath::new(fd(p)?, access))?)
    };
    ruleset = match writable {
        false => add(ruleset, dir, AccessFs::from_read(abi))?,
        true => add(ruleset, dir, all)?,
    };
    let status = ruleset.restrict_self()?;
    if status.ruleset != landlock::RulesetStatus::FullyEnforced {
        log::info!(
            "workspace: Landlock jail {:?} on this kernel",
            status.ruleset
        );
    }
    Ok(status.ruleset)
}

/// The rule for what comes back: the guest's files do, its
/// configuration of the host's tools does not. Nothing at or under a
/// path component that is hidden (a name starting with `.`: where tools
/// keep the configuration, hooks and environment they act on when a
/// folder is opened or entered: `.git`, `.hg`, `.envrc`, `.env`,
/// `.vscode/tasks.json`, `.idea`, `.cargo/config.toml`, `.npmrc`,
/// `.yarnrc.yml`, `.tool-versions`, `.mise.toml`, `.pre-commit-config.yaml`,
/// `.devcontainer`, …) or one of [`COMMAND_FILES`] is taken from the
/// guest, at any depth; the host's copies are kept, and each one the
/// guest changed or added is said (docs/security.md, "Workspaces").
/// Compared ignoring case, as git itself does for `.git`.
///
/// The files that name the commands a project's tools run, not hidden:
/// mise's (its `[hooks]` and `_.source` run on `cd`), Python's build and
/// test configuration (`pyproject.toml` build backends and hooks,
/// `setup.py`, `setup.cfg`, `tox.ini`, `noxfile.py`, and `conftest.py`,
/// which test discovery imports when an editor opens the folder),
/// npm's scripts (`package.json`), cargo's (`Cargo.toml` and `build.rs`:
/// rust-analyzer runs build scripts when it opens a workspace), make,
/// just and task files, and the Nix and devbox environments.
const COMMAND_FILES: [&str; 19] = [
    "mise.toml",
    "mise.local.toml",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "tox.ini",
    "noxfile.py",
    "conftest.py",
    "package.json",
    "Cargo.toml",
    "build.rs",
    "Makefile",
    "GNUmakefile",
    "justfile",
    "Taskfile.yml",
    "flake.nix",
    "shell.nix",
    "default.nix",
    "devbox.json",
];

/// Whether `name` is hidden or one of [`COMMAND_FILES`].
fn protected_name(name: &std::ffi::OsStr) -> bool {
    let n = name.as_encoded_bytes();
    n.starts_with(b".")
        || COMMAND_FILES
            .iter()
            .any(|p| n.eq_ignore_ascii_case(p.as_bytes()))
}

/// Whether any component of `rel` is protected.
fn protected(rel: &Path) -> bool {
    rel.components().any(|c| protected_name(c.as_os_str()))
}

/// What happens to one entry of the guest's tar.
#[derive(Debug, PartialEq)]
enum Disposition {
    /// Unpack it with this permission mask.
    Take {
        mask: u32,
    },
    Refuse(String),
    /// Configuration of the host's tools: the host's copy stays; said
    /// only where the guest's differs from it.
    Keep(String),
}

/// Judges one entry: `rel` its path inside DIR (already checked not to
/// leave it), `kind` its type, `link` a symlink's target, `size` its
/// declared size against `room` bytes left, `host_exec` whether the host's
/// file at that path is executable.
fn judge(
    rel: &Path,
    kind: tar::EntryType,
    link: Option<&Path>,
    size: u64,
    room: u64,
    host_exec: bool,
) -> Disposition {
    use tar::EntryType as T;
    let refuse = |why: &str| Disposition::Refuse(format!("{}: {why}", rel.display()));
    if protected(rel) {
        return Disposition::Keep(format!(
            "{}: configuration the host's tools act on (hidden, or a build, test or task file); the host's copy is kept",
            rel.display()
        ));
    }
    match kind {
        T::Regular | T::Continuous if size > room => refuse("over the size limit"),
        T::Regular | T::Continuous => Disposition::Take {
            // No special bits, no group/world write, exec only as before.
            mask: 0o7022 | if host_exec { 0 } else { 0o111 },
        },
        T::Directory => Disposition::Take { mask: 0o7022 },
        T::Symlink => match link.map(|target| resolve_link(rel, target)) {
            Some(Some(to)) if protected(&to) => {
                refuse("a symbolic link into a path the host's tools run code from")
            }
            Some(Some(_)) => Disposition::Take { mask: 0o7022 },
            _ => refuse("a symbolic link that leaves the workspace"),
        },
        T::GNUSparse => refuse("a sparse file"),
        T::Link => refuse("a hard link"),
        _ => refuse("a device, FIFO or other special file"),
    }
}

/// `rel` without `.` parts, if no part leaves DIR.
fn inside(rel: &Path) -> Option<PathBuf> {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

/// Where a symlink at `rel` pointing at `target` leads, as a path inside
/// DIR, or None when it leaves DIR. Lexical: the links it passes through
/// were judged the same way when they came, and none leads out or into a
/// protected path.
fn resolve_link(rel: &Path, target: &Path) -> Option<PathBuf> {
    use std::path::Component;
    if target.is_absolute() {
        return None;
    }
    let mut to: Vec<&std::ffi::OsStr> = rel
        .parent()
        .map(|p| p.components().map(|c| c.as_os_str()).collect())
        .unwrap_or_default();
    for c in target.components() {
        match c {
            Component::ParentDir => {
                to.pop()?;
            }
            Component::Normal(n) => to.push(n),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(to.iter().collect())
}

/// Unpacks the guest's tar next to DIR, entry by entry as [`judge`]s,
/// keeps the host's protected files, then swaps it in.
pub fn take_back(
    stream: impl Read,
    dir: &Path,
    fresh: &Path,
    limit: u64,
) -> Result<TakenBack, WorkspaceError> {
    let refused = |why: String| WorkspaceError::Refused {
        path: dir.to_path_buf(),
        why,
    };
    let mut limited = stream.take(limit + 1);
    let unpacked = unpack_judged(&mut limited, fresh, dir, limit);
    let over = limited.limit() == 0;
    let summary = match unpacked {
        Ok(s) if !over => s,
        result => {
            let _ = std::fs::remove_dir_all(fresh);
            return Err(refused(match result {
                Err(e) if !over => e.to_string(),
                _ => format!("more than {} MiB", limit >> 20),
            }));
        }
    };
    let mut summary = summary;
    if let Err(e) = refuse_repositories(fresh, Path::new(""), &mut summary.refused) {
        let _ = std::fs::remove_dir_all(fresh);
        return Err(refused(e.to_string()));
    }
    // The host's own protected entries are moved, not copied, into the
    // new copy (a repository can be large): whatever fails after, they
    // go back to DIR before the new copy is given up.
    let mut kept = Vec::new();
    if let Err(e) = keep_protected(dir, fresh, Path::new(""), &mut kept) {
        put_back(dir, fresh, &kept);
        let _ = std::fs::remove_dir_all(fresh);
        return Err(refused(e.to_string()));
    }
    if let Err(source) = swap_contents(dir, fresh) {
        put_back(dir, fresh, &kept);
        return Err(WorkspaceError::Replace {
            path: dir.to_path_buf(),
            kept: fresh.to_path_buf(),
            source,
        });
    }
    Ok(summary)
}

/// Puts the entries of `fresh` (inside `dir`) in place of `dir`'s own:
/// DIR's entries are moved aside into a scratch directory, the new ones
/// moved in, the old ones removed. If a move fails, what was moved goes
/// back and DIR is as it was. Every rename stays inside DIR, so nothing
/// beside it is written (DIR keeps its own inode, mode and owner).
fn swap_contents(dir: &Path, fresh: &Path) -> io::Result<()> {
    let old = scratch(dir, "old");
    std::fs::create_dir(&old)?;
    let entries = |d: &Path| -> io::Result<Vec<std::ffi::OsString>> {
        std::fs::read_dir(d)?
            .map(|e| e.map(|e| e.file_name()))
            .filter(|n| n.as_ref().map_or(true, |n| !is_scratch(n)))
            .collect()
    };
    // Moves `names` from `a` to `b`; on a failure moves back what it
    // moved and says which error.
    let shift = |names: &[std::ffi::OsString], a: &Path, b: &Path| -> io::Result<()> {
        for (i, n) in names.iter().enumerate() {
            if let Err(e) = std::fs::rename(a.join(n), b.join(n)) {
                for back in &names[..i] {
                    let _ = std::fs::rename(b.join(back), a.join(back));
                }
                return Err(e);
            }
        }
        Ok(())
    };
    let result = (|| {
        let mine = entries(dir)?;
        let theirs = entries(fresh)?;
        shift(&mine, dir, &old)?;
        if let Err(e) = shift(&theirs, fresh, dir) {
            let _ = shift(&mine, &old, dir);
            return Err(e);
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&old);
    if result.is_ok() {
        let _ = std::fs::remove_dir(fresh);
    }
    result
}

fn unpack_judged(stream: impl Read, fresh: &Path, dir: &Path, limit: u64) -> io::Result<TakenBack> {
    use std::os::unix::fs::PermissionsExt;
    let mut summary = TakenBack::default();
    let mut room = limit;
    let mut archive = tar::Archive::new(stream);
    // Owned by the user who runs mcpvm, whatever the guest says.
    archive.set_preserve_ownerships(false);
    for entry in archive.entries()? {
        let mut e = entry?;
        let raw = e.path()?.into_owned();
        let Some(rel) = inside(&raw) else {
            summary.refused.push(format!(
                "{}: a path that leaves the workspace",
                crate::logger::printable(&raw.to_string_lossy())
            ));
            continue;
        };
        if rel.as_os_str().is_empty() {
            continue; // the archive's "./"
        }
        if rel
            .components()
            .next()
            .is_some_and(|c| is_scratch(c.as_os_str()))
        {
            summary.refused.push(format!(
                "{}: a name mcpvm keeps for itself",
                crate::logger::printable(&rel.to_string_lossy())
            ));
            continue;
        }
        let kind = e.header().entry_type();
        let link = e.link_name()?.map(|l| l.into_owned());
        let size = e.header().size().unwrap_or(u64::MAX);
        let host_exec = std::fs::symlink_metadata(dir.join(&rel))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
        match judge(&rel, kind, link.as_deref(), size, room, host_exec) {
            Disposition::Refuse(why) => {
                summary
                    .refused
                    .push(crate::logger::printable(&why).into_owned());
            }
            Disposition::Keep(why) => {
                if changed(&mut e, kind, link.as_deref(), &dir.join(&rel))? {
                    summary
                        .refused
                        .push(crate::logger::printable(&why).into_owned());
                }
            }
            Disposition::Take { mask } => {
                if matches!(kind, tar::EntryType::Regular | tar::EntryType::Continuous) {
                    room -= size;
                }
                e.set_preserve_permissions(true);
                e.set_mask(mask);
                e.set_unpack_xattrs(false);
                if e.unpack_in(fresh)? {
                    summary.entries += 1;
                }
            }
        }
    }
    Ok(summary)
}

/// Whether the guest's entry `e` differs from the host's `host` (added,
/// another kind, another link target, other bytes): the entries kept
/// from the host are said only where the guest changed something. The
/// entry's data is compared as it is read, never held whole.
fn changed(
    e: &mut impl Read,
    kind: tar::EntryType,
    link: Option<&Path>,
    host: &Path,
) -> io::Result<bool> {
    use tar::EntryType as T;
    // A directory is said through what is in it.
    if kind == T::Directory {
        return Ok(false);
    }
    let Ok(m) = std::fs::symlink_metadata(host) else {
        return Ok(true);
    };
    Ok(match kind {
        T::Symlink => {
            !m.file_type().is_symlink() || std::fs::read_link(host).ok().as_deref() != link
        }
        T::Regular | T::Continuous if m.is_file() => {
            let mut theirs = io::BufReader::new(std::fs::File::open(host)?);
            let (mut a, mut b) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
            loop {
                let n = e.read(&mut a)?;
                if n == 0 {
                    break theirs.read(&mut b[..1])? != 0;
                }
                if theirs.read_exact(&mut b[..n]).is_err() || a[..n] != b[..n] {
                    break true;
                }
            }
        }
        _ => true,
    })
}

/// Whether `d` is laid out as a git repository directory (git's own test,
/// `is_git_directory`, asks for `HEAD` and either `commondir` or both
/// `objects` and `refs`; any one of those three beside a `HEAD` is taken
/// as one here, the stricter side). Run inside such a directory, git reads
/// its `config` as the repository's.
fn repository_layout(d: &Path) -> bool {
    let has = |n: &str| std::fs::symlink_metadata(d.join(n)).is_ok();
    has("HEAD") && (has("commondir") || has("objects") || has("refs"))
}

/// Removes the guest's directories laid out as git repositories beneath
/// `fresh` (`rel` the one looked at now), saying so in `refused`; a
/// workspace that came back as one whole is refused (Err).
fn refuse_repositories(fresh: &Path, rel: &Path, refused: &mut Vec<String>) -> io::Result<()> {
    let here = fresh.join(rel);
    if repository_layout(&here) {
        if rel.as_os_str().is_empty() {
            return Err(io::Error::other(
                "it came back laid out as a bare git repository, which git run in it would take \
                 its configuration from",
            ));
        }
        std::fs::remove_dir_all(&here)?;
        refused.push(format!(
            "{}: laid out as a bare git repository (the host's git would run its configuration); \
             the host's copy is kept",
            crate::logger::printable(&rel.to_string_lossy())
        ));
        return Ok(());
    }
    for e in std::fs::read_dir(&here)? {
        let e = e?;
        if e.file_type()?.is_dir() {
            refuse_repositories(fresh, &rel.join(e.file_name()), refused)?;
        }
    }
    Ok(())
}

/// Moves the host's own protected paths and repository directories
/// beneath `rel` (if any) into the new copy: the guest's were refused,
/// the host's stay what they were. Symbolic links the guest left on the
/// way are replaced by directories: the host's tree decides where its
/// repositories are.
fn keep_protected(
    dir: &Path,
    fresh: &Path,
    rel: &Path,
    moved: &mut Vec<PathBuf>,
) -> io::Result<()> {
    let Ok(entries) = std::fs::read_dir(dir.join(rel)) else {
        return Ok(());
    };
    for e in entries {
        let e = e?;
        if rel.as_os_str().is_empty() && is_scratch(&e.file_name()) {
            continue;
        }
        let rel = rel.join(e.file_name());
        let is_dir = e.file_type()?.is_dir();
        if protected_name(&e.file_name()) || (is_dir && repository_layout(&e.path())) {
            let to = fresh.join(&rel);
            make_real_dirs(fresh, rel.parent().unwrap_or(Path::new("")))?;
            let _ = std::fs::remove_dir_all(&to);
            let _ = std::fs::remove_file(&to);
            std::fs::rename(e.path(), &to)?;
            moved.push(rel);
        } else if is_dir {
            keep_protected(dir, fresh, &rel, moved)?;
        }
    }
    Ok(())
}

/// Moves the host's entries [`keep_protected`] moved into `fresh` back to
/// where they were in `dir` (DIR is as it was when this is called).
fn put_back(dir: &Path, fresh: &Path, moved: &[PathBuf]) {
    for rel in moved.iter().rev() {
        let to = dir.join(rel);
        if let Some(parent) = to.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        if let Err(e) = std::fs::rename(fresh.join(rel), &to) {
            log::error!(
                "workspace: cannot put {} back in place: {e}; it is in {}",
                to.display(),
                fresh.join(rel).display()
            );
        }
    }
}

/// Makes `fresh/rel` a real directory all the way down, replacing
/// whatever the guest left on the way that is not one.
fn make_real_dirs(fresh: &Path, rel: &Path) -> io::Result<()> {
    let mut at = fresh.to_path_buf();
    for c in rel.components() {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => continue,
            Ok(_) => std::fs::remove_file(&at)?,
            Err(_) => {}
        }
        std::fs::create_dir(&at)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The take-back as the workspace thread does it: into a scratch
    /// directory inside DIR.
    fn back(stream: &[u8], dir: &Path, limit: u64) -> Result<TakenBack, WorkspaceError> {
        let fresh = scratch(dir, "new");
        std::fs::create_dir(&fresh).unwrap();
        let r = take_back(stream, dir, &fresh, limit);
        let _ = std::fs::remove_dir_all(&fresh);
        r
    }

    /// A fresh temporary directory holding an empty workspace `ws`.
    fn workspace_dir() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("ws");
        std::fs::create_dir(&dir).unwrap();
        (t, dir)
    }

    #[test]
    fn workspace_syntax() {
        let w = parse_workspace("/srv/ws").unwrap();
        assert!(!w.writable && w.path == Path::new("/srv/ws"));
        assert!(parse_workspace("/srv/ws,rw").unwrap().writable);
        assert!(!parse_workspace("ws,ro").unwrap().writable);
        assert!(parse_workspace("ws,wr")
            .unwrap_err()
            .contains("unknown workspace option 'wr'"));
        assert!(parse_workspace(",rw").is_err());
    }

    fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, data) in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o4755);
            h.set_cksum();
            b.append_data(&mut h, name, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn the_guests_copy_replaces_the_directory_whole() {
        let (t, dir) = workspace_dir();
        std::fs::write(dir.join("old.txt"), "old").unwrap();
        let tar = tar_of(&[("./new.txt", b"from guest"), ("./sub/x", b"x")]);
        let back = back(&tar[..], &dir, 1 << 20).unwrap();
        assert_eq!(back.entries, 2, "{back}");
        assert!(back.refused.is_empty(), "{back}");
        assert_eq!(
            std::fs::read_to_string(dir.join("new.txt")).unwrap(),
            "from guest"
        );
        assert!(dir.join("sub/x").exists());
        // Deleted in the guest: gone here too.
        assert!(!dir.join("old.txt").exists());
        // Neither the setuid bit nor exec (no such file was executable
        // on the host) came back.
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("new.txt"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o644);
        // Nothing else left next to it.
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 1);
    }

    #[test]
    fn oversized_or_broken_streams_leave_the_directory_unchanged_and_nothing_escapes() {
        let (t, dir) = workspace_dir();
        std::fs::write(dir.join("keep.txt"), "keep").unwrap();
        // A raw header naming ../escape (Builder refuses to write one).
        let mut evil = tar_of(&[("./placeholder", b"evil")]);
        evil[..11].copy_from_slice(b"../escape\0\0");
        let mut h = tar::Header::from_byte_slice(&evil[..512]).clone();
        h.set_cksum();
        evil[..512].copy_from_slice(h.as_bytes());
        let big = tar_of(&[("./big", &vec![0u8; 2 << 20])]);
        for (stream, why) in [(&big[..], "MiB"), (&b"garbage"[..], "")] {
            let e = back(stream, &dir, 1 << 20);
            assert!(e.is_err(), "{why}");
            assert!(e.unwrap_err().to_string().contains("is unchanged"));
            assert_eq!(
                std::fs::read_to_string(dir.join("keep.txt")).unwrap(),
                "keep"
            );
            assert!(!t.path().join("escape").exists());
            assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 1, "{why}");
        }
        // An entry that climbs out is skipped: nothing lands outside.
        back(&evil[..], &dir, 1 << 20).unwrap();
        assert!(!t.path().join("escape").exists());
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 1);
    }

    /// One raw entry: `kind`, `path`, an optional link target, `data`.
    fn append(
        b: &mut tar::Builder<Vec<u8>>,
        kind: tar::EntryType,
        path: &str,
        link: Option<&str>,
        mode: u32,
        data: &[u8],
    ) {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_size(data.len() as u64);
        h.set_mode(mode);
        if let Some(l) = link {
            h.set_link_name(l).unwrap();
        }
        h.set_path(path).unwrap();
        h.set_cksum();
        b.append(&h, data).unwrap();
    }

    #[test]
    fn what_would_run_guest_code_on_the_host_does_not_come_back() {
        use std::os::unix::fs::PermissionsExt;
        use tar::EntryType as T;
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("ws");
        std::fs::create_dir_all(dir.join(".git/hooks")).unwrap();
        std::fs::write(dir.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(dir.join("build.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(dir.join("build.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let mut b = tar::Builder::new(Vec::new());
        append(&mut b, T::Directory, "./.git", None, 0o755, b"");
        append(
            &mut b,
            T::Regular,
            "./.git/config",
            None,
            0o644,
            b"[core]\n\tfsmonitor = /tmp/evil\n",
        );
        append(&mut b, T::Directory, "./.git/hooks", None, 0o755, b"");
        append(
            &mut b,
            T::Regular,
            "./.git/hooks/pre-commit",
            None,
            0o755,
            b"#!/bin/sh\nevil\n",
        );
        append(&mut b, T::Regular, "./.envrc", None, 0o644, b"evil\n");
        append(
            &mut b,
            T::Regular,
            "./build.sh",
            None,
            0o777,
            b"#!/bin/sh\nchanged\n",
        );
        append(&mut b, T::Regular, "./notes.txt", None, 0o777, b"text\n");
        append(
            &mut b,
            T::Symlink,
            "./passwd",
            Some("/etc/passwd"),
            0o777,
            b"",
        );
        append(&mut b, T::Symlink, "./up", Some("sub/../../.."), 0o777, b"");
        append(&mut b, T::Symlink, "./ok", Some("notes.txt"), 0o777, b"");
        append(&mut b, T::Link, "./hard", Some("notes.txt"), 0o644, b"");
        append(&mut b, T::Fifo, "./pipe", None, 0o644, b"");
        let tar = b.into_inner().unwrap();
        let back = back(&tar[..], &dir, 1 << 20).unwrap();
        let said = back.to_string();
        // The host's git config stays, no hook or .envrc from the guest.
        assert_eq!(
            std::fs::read_to_string(dir.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert!(!dir.join(".git/hooks/pre-commit").exists());
        assert!(!dir.join(".envrc").exists());
        // Links out of the workspace, hard links and FIFOs: refused.
        for name in ["passwd", "up", "hard", "pipe"] {
            assert!(std::fs::symlink_metadata(dir.join(name)).is_err(), "{name}");
            assert!(said.contains(name), "{said}");
        }
        assert_eq!(
            std::fs::read_link(dir.join("ok")).unwrap(),
            Path::new("notes.txt")
        );
        // Modes: exec only where the host had it, nobody else may write.
        let mode = |n: &str| std::fs::metadata(dir.join(n)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode("build.sh"), 0o755);
        assert_eq!(mode("notes.txt"), 0o644);
        for refused in [".git/config", ".git/hooks/pre-commit", ".envrc"] {
            assert!(said.contains(refused), "{said}");
        }
    }

    /// Each file the issue of round 4 named runs code on the host when
    /// the user's tools open the folder: none comes back, the host's copy
    /// of each stays, each change is said; what the guest left as it was
    /// is not; the guest's ordinary files come back.
    #[test]
    fn configuration_the_hosts_tools_run_stays_the_hosts() {
        use tar::EntryType as T;
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("ws");
        std::fs::create_dir_all(dir.join(".vscode")).unwrap();
        std::fs::write(dir.join(".vscode/tasks.json"), "{}\n").unwrap();
        std::fs::write(dir.join("pyproject.toml"), "[project]\nname = \"x\"\n").unwrap();
        std::fs::write(dir.join(".gitignore"), "target\n").unwrap();
        let mut b = tar::Builder::new(Vec::new());
        let evil: &[(&str, &[u8])] = &[
            (
                "./.vscode/tasks.json",
                br#"{"tasks":[{"runOptions":{"runOn":"folderOpen"},"command":"evil"}]}"#,
            ),
            (
                "./.cargo/config.toml",
                b"[target.x86_64-unknown-linux-gnu]\nrunner = \"evil\"\n",
            ),
            ("./mise.toml", b"[hooks]\nenter = \"evil\"\n"),
            ("./.tool-versions", b"evil-plugin 1.0\n"),
            ("./.npmrc", b"script-shell=/tmp/evil\n"),
            (
                "./pyproject.toml",
                b"[build-system]\nbuild-backend = \"evil\"\n",
            ),
            (
                "./sub/package.json",
                br#"{"scripts":{"postinstall":"evil"}}"#,
            ),
            ("./sub/.env", b"NODE_OPTIONS=--require /tmp/evil.js\n"),
            ("./crate/build.rs", b"fn main() { evil() }\n"),
        ];
        append(&mut b, T::Directory, "./.vscode", None, 0o755, b"");
        append(&mut b, T::Directory, "./.cargo", None, 0o755, b"");
        append(&mut b, T::Directory, "./sub", None, 0o755, b"");
        append(&mut b, T::Directory, "./crate", None, 0o755, b"");
        for (path, data) in evil {
            append(&mut b, T::Regular, path, None, 0o644, data);
        }
        // Unchanged: kept without a word.
        append(&mut b, T::Regular, "./.gitignore", None, 0o644, b"target\n");
        append(
            &mut b,
            T::Regular,
            "./notes.md",
            None,
            0o644,
            b"written by the server\n",
        );
        let tar = b.into_inner().unwrap();
        let back = back(&tar[..], &dir, 1 << 20).unwrap();
        let said = back.to_string();
        for (path, _) in evil {
            let rel = path.trim_start_matches("./");
            assert!(
                said.contains(&format!("{rel}: configuration the host's tools act on")),
                "{rel}: {said}"
            );
        }
        assert!(!said.contains(".gitignore"), "{said}");
        assert_eq!(back.refused.len(), evil.len(), "{said}");
        assert_eq!(
            std::fs::read_to_string(dir.join(".vscode/tasks.json")).unwrap(),
            "{}\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("pyproject.toml")).unwrap(),
            "[project]\nname = \"x\"\n"
        );
        for gone in [
            ".cargo/config.toml",
            "mise.toml",
            ".tool-versions",
            ".npmrc",
            "sub/package.json",
            "sub/.env",
            "crate/build.rs",
        ] {
            assert!(!dir.join(gone).exists(), "{gone}");
        }
        assert_eq!(
            std::fs::read_to_string(dir.join(".gitignore")).unwrap(),
            "target\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("notes.md")).unwrap(),
            "written by the server\n"
        );
    }

    /// Runs `git status` in `at` as a user would (a prompt does it on
    /// `cd`); whatever it says, only its side effects matter here.
    fn git_status(at: &Path) {
        let _ = std::process::Command::new("git")
            .arg("-C")
            .arg(at)
            .args(["status", "--short"])
            .env("GIT_CEILING_DIRECTORIES", at.parent().unwrap_or(at))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }

    /// The guest plants a repository configuration whose `core.fsmonitor`
    /// makes a marker, every way git finds one: `.git/commondir` pointing
    /// at a planted directory, a gitfile, a nested `sub/.git`, a bare
    /// layout, a symlink into `.git`. `git status` in each place, after
    /// the take-back, runs nothing.
    #[test]
    fn a_planted_repository_configuration_runs_nothing_when_the_host_runs_git() {
        use tar::EntryType as T;
        let (t, dir) = workspace_dir();
        let init = std::process::Command::new("git")
            .args(["init", "-q"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(init.success());
        let host_config = std::fs::read(dir.join(".git/config")).unwrap();
        let marker = t.path().join("fsmonitor-ran");
        let config = format!("[core]\n\tfsmonitor = \"touch {}\"\n", marker.display());
        // The exploit works on a repository laid out like this.
        let proof = t.path().join("proof");
        std::fs::create_dir(&proof).unwrap();
        std::process::Command::new("git")
            .args(["init", "-q"])
            .arg(&proof)
            .status()
            .unwrap();
        std::fs::write(proof.join(".git/config"), &config).unwrap();
        git_status(&proof);
        assert!(
            marker.exists(),
            "git runs core.fsmonitor: the exploit works"
        );
        std::fs::remove_file(&marker).unwrap();

        let mut b = tar::Builder::new(Vec::new());
        let bare = |b: &mut tar::Builder<Vec<u8>>, at: &str| {
            append(b, T::Directory, at, None, 0o755, b"");
            append(
                b,
                T::Regular,
                &format!("{at}/HEAD"),
                None,
                0o644,
                b"ref: refs/heads/main\n",
            );
            append(
                b,
                T::Regular,
                &format!("{at}/config"),
                None,
                0o644,
                config.as_bytes(),
            );
            append(b, T::Directory, &format!("{at}/objects"), None, 0o755, b"");
            append(b, T::Directory, &format!("{at}/refs"), None, 0o755, b"");
        };
        bare(&mut b, "./planted");
        append(&mut b, T::Directory, "./.git", None, 0o755, b"");
        append(
            &mut b,
            T::Regular,
            "./.git/commondir",
            None,
            0o644,
            b"../planted\n",
        );
        append(
            &mut b,
            T::Regular,
            "./.git/config",
            None,
            0o644,
            config.as_bytes(),
        );
        append(&mut b, T::Directory, "./sub", None, 0o755, b"");
        append(
            &mut b,
            T::Regular,
            "./sub/.git",
            None,
            0o644,
            b"gitdir: ../planted\n",
        );
        append(&mut b, T::Directory, "./nested", None, 0o755, b"");
        bare(&mut b, "./nested/.git");
        append(&mut b, T::Directory, "./cased", None, 0o755, b"");
        bare(&mut b, "./cased/.GIT");
        bare(&mut b, "./bare.git");
        append(&mut b, T::Symlink, "./link", Some(".git"), 0o777, b"");
        append(
            &mut b,
            T::Symlink,
            "./sub/up",
            Some("../nested/./.git"),
            0o777,
            b"",
        );
        append(&mut b, T::Regular, "./notes.txt", None, 0o644, b"kept\n");
        let tar = b.into_inner().unwrap();
        let back = back(&tar[..], &dir, 1 << 20).unwrap();
        let said = back.to_string();
        for at in [
            "", "sub", "nested", "cased", "planted", "bare.git", "link", "sub/up",
        ] {
            git_status(&dir.join(at));
            assert!(
                !marker.exists(),
                "git status in {at:?} ran the guest's command"
            );
        }
        // The host's repository is what it was; the rest came back.
        assert_eq!(std::fs::read(dir.join(".git/config")).unwrap(), host_config);
        assert!(!dir.join(".git/commondir").exists());
        assert_eq!(
            std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
            "kept\n"
        );
        for gone in [
            "planted",
            "bare.git",
            "sub/.git",
            "nested/.git",
            "cased/.GIT",
            "link",
            "sub/up",
        ] {
            assert!(std::fs::symlink_metadata(dir.join(gone)).is_err(), "{gone}");
            assert!(said.contains(gone), "{gone}: {said}");
        }
    }

    #[test]
    fn a_workspace_laid_out_as_a_repository_is_refused_whole() {
        let (t, dir) = workspace_dir();
        let mut b = tar::Builder::new(Vec::new());
        append(
            &mut b,
            tar::EntryType::Regular,
            "./HEAD",
            None,
            0o644,
            b"ref: refs/heads/main\n",
        );
        append(
            &mut b,
            tar::EntryType::Directory,
            "./refs",
            None,
            0o755,
            b"",
        );
        let tar = b.into_inner().unwrap();
        let e = back(&tar[..], &dir, 1 << 20).unwrap_err().to_string();
        assert!(
            e.contains("bare git repository") && e.contains("is unchanged"),
            "{e}"
        );
        assert!(!dir.join("HEAD").exists());
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 1);
        // And a writable workspace that is one is refused before the run.
        std::fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::create_dir(dir.join("objects")).unwrap();
        let ws = parse_workspace(&format!("{},rw", dir.display())).unwrap();
        let e = check(&ws).unwrap_err().to_string();
        assert!(
            e.contains("git repository directory") && e.contains("read-only"),
            "{e}"
        );
        assert!(check(&parse_workspace(dir.to_str().unwrap()).unwrap()).is_ok());
    }

    /// The swap happens inside DIR: its inode stays, mcpvm's scratch
    /// names are neither sent nor taken, and a copy kept from an earlier
    /// failed take-back is left where the user was told it is.
    #[test]
    fn the_swap_stays_inside_the_workspace_and_keeps_its_own_names() {
        use std::os::unix::fs::MetadataExt;
        let (t, dir) = workspace_dir();
        std::fs::write(dir.join("old.txt"), "old").unwrap();
        let kept = dir.join(format!("{SCRATCH}new-1"));
        std::fs::create_dir(&kept).unwrap();
        std::fs::write(kept.join("copy.txt"), "an earlier guest copy").unwrap();
        let inode = std::fs::metadata(&dir).unwrap().ino();
        // What the guest is sent holds no scratch entry.
        let mut b = tar::Builder::new(Vec::new());
        append_tree(&mut b, &dir).unwrap();
        let sent = b.into_inner().unwrap();
        let names: Vec<String> = tar::Archive::new(&sent[..])
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert!(names.iter().any(|n| n.ends_with("old.txt")), "{names:?}");
        assert!(!names.iter().any(|n| n.contains(SCRATCH)), "{names:?}");
        // A guest that sends a scratch name gets it refused.
        let tar = tar_of(&[
            ("./new.txt", b"new"),
            (&format!("./{SCRATCH}old-1/x"), b"x"),
        ]);
        let back = back(&tar[..], &dir, 1 << 20).unwrap();
        assert!(
            back.to_string().contains("a name mcpvm keeps for itself"),
            "{back}"
        );
        assert_eq!(std::fs::metadata(&dir).unwrap().ino(), inode);
        assert_eq!(std::fs::read_to_string(dir.join("new.txt")).unwrap(), "new");
        assert!(!dir.join("old.txt").exists());
        assert_eq!(
            std::fs::read_to_string(kept.join("copy.txt")).unwrap(),
            "an earlier guest copy"
        );
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, [format!("{SCRATCH}new-1"), "new.txt".to_string()]);
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 1);
    }

    /// The host's repositories are moved into the new copy, not copied:
    /// when the take-back is given up after that, they go back first.
    #[test]
    fn the_hosts_repositories_go_back_when_a_take_back_is_given_up() {
        let (_t, dir) = workspace_dir();
        std::fs::create_dir_all(dir.join("sub/.git")).unwrap();
        std::fs::write(dir.join("sub/.git/config"), "host").unwrap();
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::write(dir.join(".git/HEAD"), "host").unwrap();
        let fresh = scratch(&dir, "new");
        std::fs::create_dir(&fresh).unwrap();
        let mut moved = Vec::new();
        keep_protected(&dir, &fresh, Path::new(""), &mut moved).unwrap();
        moved.sort();
        assert_eq!(moved, [PathBuf::from(".git"), PathBuf::from("sub/.git")]);
        assert!(!dir.join(".git").exists() && fresh.join("sub/.git/config").exists());
        put_back(&dir, &fresh, &moved);
        assert_eq!(
            std::fs::read_to_string(dir.join("sub/.git/config")).unwrap(),
            "host"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join(".git/HEAD")).unwrap(),
            "host"
        );
    }

    #[test]
    fn a_sparse_file_does_not_come_back() {
        let (_t, dir) = workspace_dir();
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        // One byte stored at the end of a 1 TiB file: its apparent size.
        h.set_entry_type(tar::EntryType::GNUSparse);
        h.set_size(1);
        h.set_path("./huge").unwrap();
        let gnu = h.as_gnu_mut().unwrap();
        gnu.set_real_size(1 << 40);
        gnu.sparse[0].set_offset((1 << 40) - 1);
        gnu.sparse[0].set_length(1);
        h.set_cksum();
        b.append(&h, &[7u8][..]).unwrap();
        append(&mut b, tar::EntryType::Regular, "./a", None, 0o644, b"a");
        let tar = b.into_inner().unwrap();
        let back = back(&tar[..], &dir, 1 << 20).unwrap();
        assert!(back.to_string().contains("huge: a sparse file"), "{back}");
        assert!(!dir.join("huge").exists());
        assert!(dir.join("a").exists());
    }

    #[test]
    fn the_jailed_thread_writes_only_where_the_workspace_is() {
        let (t, dir) = workspace_dir();
        std::fs::write(dir.join("a.txt"), "a").unwrap();
        let home = t.path().join("home");
        std::fs::create_dir(&home).unwrap();
        let fresh = scratch(&dir, "new");
        let (d, f, h) = (dir.clone(), fresh.clone(), home.clone());
        let outcome = std::thread::spawn(move || {
            let status = jail(&d, true).unwrap();
            let outside = std::fs::write(h.join("x"), "guest code");
            // Nothing beside DIR: neither a file nor a directory.
            let beside = std::fs::write(d.parent().unwrap().join("x"), "guest code")
                .and_then(|()| std::fs::create_dir(d.parent().unwrap().join("y")));
            std::fs::create_dir(&f).unwrap();
            let mut tar = tar::Builder::new(Vec::new());
            let mut hd = tar::Header::new_gnu();
            hd.set_size(1);
            hd.set_mode(0o644);
            hd.set_cksum();
            tar.append_data(&mut hd, "./b.txt", &b"b"[..]).unwrap();
            let back = take_back(&tar.into_inner().unwrap()[..], &d, &f, 1 << 20);
            (status, outside, beside, back.map(|b| b.entries))
        })
        .join()
        .unwrap();
        let (status, outside, beside, back) = outcome;
        if status == landlock::RulesetStatus::NotEnforced {
            eprintln!("no Landlock on this kernel: the jail is not tested here");
            return;
        }
        assert_eq!(
            outside.unwrap_err().kind(),
            std::io::ErrorKind::PermissionDenied
        );
        assert_eq!(
            beside.unwrap_err().kind(),
            std::io::ErrorKind::PermissionDenied
        );
        assert_eq!(back.unwrap(), 1, "the swap still works inside the jail");
        assert_eq!(std::fs::read_to_string(dir.join("b.txt")).unwrap(), "b");
        assert!(!home.join("x").exists());
    }
}
