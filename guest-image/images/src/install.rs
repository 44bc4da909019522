//! One installer per ecosystem, behind one trait: each puts a server's
//! package into its layer's directory (`/opt/mcp/<name>` under the
//! stage), resolving it to a lock on the first build and installing
//! exactly that lock on every build, with no package code run on the
//! host. [`crate::npm`] (node), [`crate::pip`] (python, wheels only) and
//! [`crate::cargo`] (a crate's binaries, built in a microVM) implement
//! it; `build::installer` picks one by the entry's runtime.

use std::path::{Path, PathBuf};

use crate::catalogue::Entry;
use crate::process::{io_err, BuildError};
use crate::sandbox::ScriptSandbox;

/// What an installer is handed for one server.
pub struct Job<'a> {
    pub name: &'a str,
    pub entry: &'a Entry,
    /// The layer's root, and the server's directory under it.
    pub stage: &'a Path,
    pub target: &'a Path,
    /// The node the server runs on (its directory): its npm installs.
    pub node: &'a Path,
    /// The embedded fetcher scripts' directory (runtimes/fetch-*).
    pub fetchers: &'a Path,
    /// The runtime image and the microVM that install scripts run in.
    pub scripts: (&'a Path, &'a dyn ScriptSandbox),
    /// A kept lock's directory: install exactly it.
    pub locked: Option<&'a Path>,
}

/// What was installed: the spec said to a person, and where its commands
/// are.
pub struct Installed {
    pub what: String,
    pub bin_dir: PathBuf,
    /// What its install scripts did, where they ran and were recorded.
    pub record: Option<crate::sandbox::InstallRecord>,
}

pub trait Installer {
    fn install(&self, job: &Job, progress: &mut dyn FnMut(&str)) -> Result<Installed, BuildError>;
}

/// A kept lock's files copied into the server's directory.
pub fn copy_lock(lock: &Path, target: &Path, e: &Entry) -> Result<(), BuildError> {
    for f in crate::lock::files(e.runtime) {
        std::fs::copy(lock.join(f), target.join(f)).map_err(io_err(target))?;
    }
    Ok(())
}
