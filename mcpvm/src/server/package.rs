//! `--package npm:NAME@VERSION` / `pypi:NAME==VERSION`: a server named by
//! its package, like `npx`/`uvx` but pinned and sandboxed. Its layer is
//! built into the image store on first use (its install scripts in a
//! microVM, as for any layer) and found there after; the command is the
//! package's own executable, which the store remembers. The build is
//! `mcpvm image build --package`'s, run as `mcpvm-tools` (`crate::exe`):
//! the binary a VM runs in holds no image builder.

use std::io::{BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use mcpvm_images::store::{self, Index};

use crate::host::lines::read_line_bounded;
use crate::server::{ServerError, ServerPlan};

/// Why `--package SPEC` names no server to run.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error("{0}")]
    Spec(String),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error("--package {spec}: its layer was built but is not in {dir}")]
    NotStored { spec: String, dir: PathBuf },
    #[error("--package {spec}: cannot run {tools}")]
    Spawn {
        spec: String,
        tools: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--package {spec}: cannot read the image builder's report")]
    Report {
        spec: String,
        #[source]
        source: std::io::Error,
    },
    #[error("--package {spec}: {why}")]
    Build { spec: String, why: String },
    #[error("--package {spec}: building its layer failed ({status})")]
    BuildStatus {
        spec: String,
        status: std::process::ExitStatus,
    },
    #[error(transparent)]
    Tools(std::io::Error),
}

/// The server `spec` names, its layer built first if the store has none.
pub fn plan(
    spec: &str,
    as_released: bool,
    images: &Option<PathBuf>,
) -> Result<ServerPlan, PackageError> {
    let (name, mut entry) = match as_released {
        true => mcpvm_images::package::entry_as_released(spec),
        false => mcpvm_images::package::entry(spec),
    }
    .map_err(PackageError::Spec)?;
    let dir = images.clone().unwrap_or_else(store::default_dir);
    let built = |entry: &mcpvm_images::catalogue::Entry| {
        let index = Index::load(&dir).ok()?;
        let key = index.key_of(&name, entry);
        index.resolve(&dir, &name, &key).ok()?;
        index.servers.get(&name)?.command.clone()
    };
    let command = match built(&entry) {
        Some(command) => command,
        None => {
            eprintln!(
                "package: {spec}: building its layer in {} (first use; cached after)",
                dir.display()
            );
            build_layer(spec, as_released, &dir)?;
            built(&entry).ok_or_else(|| PackageError::NotStored {
                spec: spec.to_string(),
                dir: dir.clone(),
            })?
        }
    };
    // The layer's key is of the entry as given (no command); the guest
    // runs the command the build found.
    let mut plan = crate::server::plan_entry(&name, &entry, &dir)?;
    entry.command = command;
    plan.argv = entry.argv(&name);
    Ok(plan)
}

/// Builds `spec`'s layer into `dir` with `mcpvm-tools image build`, its
/// progress passed on as it comes and its error, if any, made this one's.
fn build_layer(spec: &str, as_released: bool, dir: &Path) -> Result<(), PackageError> {
    let tools = crate::exe::tools().map_err(PackageError::Tools)?;
    let mut child = Command::new(&tools)
        .arg0("mcpvm")
        .args(["image", "build", "--json", "--package", spec])
        .args(as_released.then_some("--as-released"))
        .arg("--images")
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| PackageError::Spawn {
            spec: spec.to_string(),
            tools: tools.clone(),
            source,
        })?;
    // Its lines carry what installers and the sandbox VM printed: each
    // is cut at the builder's own line limit, the report at 1 MiB.
    let mut cause = None;
    let mut reader = BufReader::new(child.stderr.take().expect("piped"));
    let mut bytes = Vec::new();
    while read_line_bounded(
        &mut reader,
        &mut bytes,
        mcpvm_images::sandbox::MAX_OUTPUT_LINE,
    ) {
        let line = String::from_utf8_lossy(&bytes);
        match line.strip_prefix("mcpvm: ") {
            Some(error) => cause = Some(error.to_owned()),
            None => eprintln!("{line}"),
        }
    }
    let mut report = String::new();
    let status = child
        .stdout
        .take()
        .expect("piped")
        .take(1 << 20)
        .read_to_string(&mut report)
        .and_then(|_| child.wait())
        .map_err(|source| PackageError::Report {
            spec: spec.to_string(),
            source,
        })?;
    let failed = serde_json::from_str::<mcpvm_images::build::Report>(&report)
        .ok()
        .and_then(|r| r.failed.into_iter().next().map(|f| f.error));
    let spec = spec.to_string();
    match (failed.or(cause), status.success()) {
        (Some(why), _) => Err(PackageError::Build { spec, why }),
        (None, true) => Ok(()),
        (None, false) => Err(PackageError::BuildStatus { spec, status }),
    }
}
