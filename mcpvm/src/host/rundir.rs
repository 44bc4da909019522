//! Per-run directory for the VM's host sockets, removed when the run ends.
//! A VMM killed with SIGKILL cannot clean up, so every start first removes
//! the directories of runs whose process is gone.
//!
//! The base directory (`$XDG_RUNTIME_DIR/mcpvm`, else
//! `/tmp/mcpvm-<uid>`) holds sockets that reach the server and its
//! credentials: another local user who made it first could swap them. It
//! is made 0700 and, whoever made it, used only when it is a real
//! directory (not a symlink) owned by us; one of ours that is open to
//! others is closed first.

use std::io;
use std::path::{Path, PathBuf};

pub struct RunDir {
    path: PathBuf,
}

/// Where run directories are made.
pub fn base() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) => PathBuf::from(d).join("mcpvm"),
        // SAFETY: getuid has no preconditions.
        None => std::env::temp_dir().join(format!("mcpvm-{}", unsafe { libc::getuid() })),
    }
}

fn alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// Removes run directories left by processes that no longer exist.
pub fn clean_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        if let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) {
            if !alive(pid) {
                log::debug!("removing stale run directory {}", e.path().display());
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

/// Makes `base` (0700) if it is missing, and checks that it is ours
/// alone whoever made it.
fn secure_base(base: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    if let Some(parent) = base.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(base) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let m = std::fs::symlink_metadata(base)?;
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let why = if m.file_type().is_symlink() {
        Some("is a symbolic link".to_string())
    } else if !m.is_dir() {
        Some("is not a directory".to_string())
    } else if m.uid() != uid {
        Some(format!(
            "belongs to uid {}, not to this user ({uid})",
            m.uid()
        ))
    } else {
        None
    };
    if why.is_none() && m.permissions().mode() & 0o077 != 0 {
        // Ours, made open by an older mcpvm or a umask: close it. What
        // another user may have put there meanwhile is a stale entry or
        // a pid directory, both removed before use.
        log::debug!("closing {} to other users", base.display());
        std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o700))?;
    }
    match why {
        None => Ok(()),
        Some(why) => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} {why}; another user could reach the run's sockets through it: remove it, or set XDG_RUNTIME_DIR",
                base.display()
            ),
        )),
    }
}

/// The base directory, made safe and cleared of stale runs: a jailed run
/// builds its jail there and keeps its run directory inside the jail.
pub fn prepare_base() -> io::Result<PathBuf> {
    let base = base();
    secure_base(&base)?;
    clean_stale(&base);
    Ok(base)
}

impl RunDir {
    pub fn create() -> io::Result<Self> {
        Self::create_in(&base())
    }

    fn create_in(base: &Path) -> io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        secure_base(base)?;
        clean_stale(base);
        let path = base.join(std::process::id().to_string());
        let _ = std::fs::remove_dir_all(&path);
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(Self { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_directories_of_dead_processes_are_removed() {
        let base = tempfile::tempdir().unwrap();
        let dead = base.path().join("999999999");
        let mine = base.path().join(std::process::id().to_string());
        let other = base.path().join("not-a-pid");
        for d in [&dead, &mine, &other] {
            std::fs::create_dir(d).unwrap();
        }
        clean_stale(base.path());
        assert!(!dead.exists());
        assert!(mine.exists());
        assert!(other.exists());
    }

    #[test]
    fn a_base_another_user_could_reach_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        // Made here: 0700, ours, used.
        let fresh = t.path().join("mcpvm-fresh");
        let run = RunDir::create_in(&fresh).unwrap();
        let mode = std::fs::metadata(&fresh).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(run.path().is_dir());
        drop(run);
        // Ours but open to others (an older mcpvm made it so): closed,
        // and a pid directory someone planted there is replaced.
        let open = t.path().join("mcpvm-open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let planted = open.join(std::process::id().to_string());
        std::fs::create_dir(&planted).unwrap();
        std::fs::write(planted.join("vsock.sock_1025"), "not a socket").unwrap();
        let run = RunDir::create_in(&open).unwrap();
        let mode = std::fs::metadata(&open).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert_eq!(std::fs::read_dir(run.path()).unwrap().count(), 0);
        drop(run);
        // A symlink to a directory of ours: refused.
        let link = t.path().join("mcpvm-link");
        std::os::unix::fs::symlink(&fresh, &link).unwrap();
        let e = RunDir::create_in(&link).err().unwrap().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        // Someone else's (as root, a test can make one).
        // SAFETY: getuid has no preconditions.
        if unsafe { libc::getuid() } == 0 {
            let theirs = t.path().join("mcpvm-theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            let e = RunDir::create_in(&theirs).err().unwrap().to_string();
            assert!(e.contains("belongs to uid 65534"), "{e}");
        }
    }
}
