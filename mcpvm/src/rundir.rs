//! Per-run directory for the VM's host sockets, removed when the run ends.
//! A VMM killed with SIGKILL cannot clean up, so every start first removes
//! the directories of runs whose process is gone.

use std::io;
use std::path::{Path, PathBuf};

pub struct RunDir {
    path: PathBuf,
}

fn base() -> PathBuf {
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

impl RunDir {
    pub fn create() -> io::Result<Self> {
        let base = base();
        std::fs::create_dir_all(&base)?;
        clean_stale(&base);
        let path = base.join(std::process::id().to_string());
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path)?;
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
}
