//! `--workspace DIR[,rw]`: a host directory handed to the server at
//! /workspace in the guest, read-only by default (the guest's changes stay
//! in the guest). With `rw`, the directory the guest sends back when the
//! server exits replaces DIR, whole or not at all.
//!
//! Transport: a tar stream on the WORKSPACE vsock port (see
//! `mcpvm_protocol::ports`). What comes back is hostile input: tar-rs
//! skips paths that would leave the destination, special permission bits are
//! masked, and the stream is cut at `--workspace-limit` MiB.

use std::io::{self, Read};
use std::net::Shutdown;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspaceArg {
    pub path: PathBuf,
    pub writable: bool,
    pub text: String,
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
    #[error("Cannot confine the workspace thread")]
    Confine(#[source] vmm::host_seccomp::SeccompError),
}

pub fn check(ws: &WorkspaceArg) -> Result<(), WorkspaceError> {
    if ws.path.is_dir() {
        Ok(())
    } else {
        Err(WorkspaceError::NotDir(ws.path.clone()))
    }
}

/// The host side of the workspace port, running on its own thread.
pub struct Transfer {
    connected: Arc<AtomicBool>,
    done: mpsc::Receiver<Result<bool, WorkspaceError>>,
}

/// Serves the workspace on `listener`: sends DIR, and for a writable
/// workspace takes the guest's copy back (up to `limit` bytes).
/// The thread confines itself to host-file work in `seccomp` mode first;
/// if it cannot, the transfer ends with that error.
pub fn serve(
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
        if let Err(e) = vmm::host_seccomp::confine(vmm::ThreadKind::HostFiles, seccomp) {
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
            b.append_dir_all(".", &ws.path)?;
            b.finish()?;
            stream.shutdown(Shutdown::Write)
        })()
        .map_err(send_err);
        let result = match sent {
            Err(e) => Err(e),
            Ok(()) if !ws.writable => Ok(false),
            Ok(()) => take_back(&stream, &ws.path, limit).map(|()| true),
        };
        let _ = tx.send(result);
    });
    Transfer { connected, done }
}

impl Transfer {
    /// After the VM ended: the outcome (true: the guest's copy replaced
    /// DIR), or None when the guest never asked for the workspace.
    pub fn finish(self) -> Option<Result<bool, WorkspaceError>> {
        if !self.connected.load(Ordering::SeqCst) {
            return None;
        }
        // The stream is complete once the VM is gone; this only waits for
        // the unpacking to finish.
        self.done.recv_timeout(Duration::from_secs(600)).ok()
    }
}

fn sibling(dir: &Path, tag: &str) -> PathBuf {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    dir.with_file_name(format!(".{name}.mcpvm-{tag}-{}", std::process::id()))
}

/// Unpacks the guest's tar next to DIR, then swaps it in.
fn take_back(stream: impl Read, dir: &Path, limit: u64) -> Result<(), WorkspaceError> {
    let fresh = sibling(dir, "new");
    let refused = |why: String| WorkspaceError::Refused {
        path: dir.to_path_buf(),
        why,
    };
    let _ = std::fs::remove_dir_all(&fresh);
    std::fs::create_dir(&fresh).map_err(|e| refused(e.to_string()))?;
    let mut limited = stream.take(limit + 1);
    let unpacked = {
        let mut archive = tar::Archive::new(&mut limited);
        archive.set_preserve_permissions(true);
        // No setuid, setgid or sticky bits from the guest.
        archive.set_mask(0o7000);
        archive.set_unpack_xattrs(false);
        archive.set_preserve_ownerships(false);
        archive.unpack(&fresh)
    };
    let over = limited.limit() == 0;
    if let Err(e) = unpacked {
        let _ = std::fs::remove_dir_all(&fresh);
        return Err(refused(if over {
            format!("more than {} MiB", limit >> 20)
        } else {
            e.to_string()
        }));
    }
    let old = sibling(dir, "old");
    let replace = |source| WorkspaceError::Replace {
        path: dir.to_path_buf(),
        kept: fresh.clone(),
        source,
    };
    std::fs::rename(dir, &old).map_err(replace)?;
    if let Err(e) = std::fs::rename(&fresh, dir) {
        let _ = std::fs::rename(&old, dir);
        return Err(replace(e));
    }
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("ws");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("old.txt"), "old").unwrap();
        let tar = tar_of(&[("./new.txt", b"from guest"), ("./sub/x", b"x")]);
        take_back(&tar[..], &dir, 1 << 20).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("new.txt")).unwrap(),
            "from guest"
        );
        assert!(dir.join("sub/x").exists());
        // Deleted in the guest: gone here too.
        assert!(!dir.join("old.txt").exists());
        // The setuid bit did not survive.
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("new.txt"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o755);
        // Nothing else left next to it.
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 1);
    }

    #[test]
    fn oversized_or_broken_streams_leave_the_directory_unchanged_and_nothing_escapes() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("ws");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("keep.txt"), "keep").unwrap();
        // A raw header naming ../escape (Builder refuses to write one).
        let mut evil = tar_of(&[("./placeholder", b"evil")]);
        evil[..11].copy_from_slice(b"../escape\0\0");
        let mut h = tar::Header::from_byte_slice(&evil[..512]).clone();
        h.set_cksum();
        evil[..512].copy_from_slice(h.as_bytes());
        let big = tar_of(&[("./big", &vec![0u8; 2 << 20])]);
        for (stream, why) in [(&big[..], "MiB"), (&b"garbage"[..], "")] {
            let e = take_back(stream, &dir, 1 << 20);
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
        take_back(&evil[..], &dir, 1 << 20).unwrap();
        assert!(!t.path().join("escape").exists());
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 1);
    }
}
