//! What a jailed `mcpvm run` may still reach (`vmm::jail`): `/dev/kvm`,
//! the kernel, initrd and disk images read-only (a disk given `,rw`
//! writable), the snapshot it restores read-only, the directory a snapshot
//! is written into, the workspace (writable for `,rw`: the guest's copy is
//! swapped in inside it), and a private directory for the run's sockets
//! that vanishes with the process, even under SIGKILL.
//!
//! Every path the run names after the jail is made canonical first: the
//! jail holds each path at its canonical place only.

use mcpvm_protocol::messages::HostEvent;
use std::io;
use std::path::{Path, PathBuf};

use vmm::jail::{Jail, JailError, JailMode};

use super::RunError;

/// The paths of a run, resolved and jailed.
pub struct RunPaths<'a> {
    /// What the VM opens (`Start::paths_mut`: kernel, initrd, disks, the
    /// snapshot it restores), with whether it writes each.
    pub vm: Vec<(&'a mut PathBuf, bool)>,
    pub snapshot_to: Option<&'a mut PathBuf>,
    pub workspace: Option<(&'a mut PathBuf, bool)>,
}

/// Jails the run as `mode` asks; Ok says whether it is jailed, and why
/// not. Call while the process has one thread.
pub fn enter(mode: JailMode, paths: RunPaths) -> Result<HostEvent, RunError> {
    let not = |why: String| HostEvent::Jail {
        jailed: false,
        reason: Some(why),
    };
    if mode == JailMode::Off {
        return Ok(not("--jail off".into()));
    }
    // Runs killed earlier left their directories on the host, where the
    // jail no longer looks; the jail is built over the base directory.
    let base = crate::host::rundir::prepare_base().map_err(RunError::RunDir)?;
    let mut jail = Jail::for_vmm(&base);
    // A path that is missing stays as it is and out of the jail: the step
    // that reads it says so, as it would unjailed.
    let mut hold = |p: &mut PathBuf, writable: bool| {
        if let Ok(real) = std::fs::canonicalize(&*p) {
            *p = real;
            jail.bind(p, writable);
        }
    };
    for (path, writable) in paths.vm {
        hold(path, writable);
    }
    if let Some((dir, writable)) = paths.workspace {
        // Writable, it is written beneath only: the guest's copy is
        // unpacked and swapped in inside it (workspace.rs), never beside.
        hold(dir, writable);
    }
    if let Some(dir) = paths.snapshot_to {
        // Written beside and renamed into place: its parent is writable.
        let (mut parent, name) = split(dir)?;
        hold(&mut parent, true);
        *dir = parent.join(name);
    }
    jail.scratch(&base);
    match jail.enter() {
        Ok(()) => {
            log::debug!("jailed: user, mount, network, IPC and UTS namespaces; no capabilities");
            Ok(HostEvent::Jail {
                jailed: true,
                reason: None,
            })
        }
        Err(JailError::Unavailable(e)) if mode == JailMode::Auto => {
            // The normal case on hosts that restrict unprivileged user
            // namespaces (Ubuntu's AppArmor): said at default verbosity.
            log::warn!(
                "not jailed: the host refuses a jail ({e}); the VMM runs with your own file access \
                 (docs/security.md, \"The jail\"; --jail on makes this an error)"
            );
            Ok(not(format!("the host refuses a jail: {e}")))
        }
        Err(e) => Err(RunError::Jail(e)),
    }
}

/// A path that need not exist yet, as its directory and its name.
fn split(path: &Path) -> Result<(PathBuf, std::ffi::OsString), RunError> {
    let abs = std::path::absolute(path).map_err(|source| RunError::File {
        path: path.to_path_buf(),
        source,
    })?;
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => Ok((parent.to_path_buf(), name.to_os_string())),
        _ => Err(RunError::File {
            path: path.to_path_buf(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "not a file or directory name"),
        }),
    }
}
