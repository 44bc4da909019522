//! Pin files (`mcpvm pin`, `--pinned FILE`): who a pin is of, reading
//! one, holding a probe's listing to it, writing one whole. The
//! comparison itself is `probes::judge::pin`; the commands are `commands::pin`
//! and `commands::probe`.

use std::path::{Path, PathBuf};

use probes::judge::pin::{PinFile, Pinned, SCHEMA};

use mcpvm::commands::run::VmRequest;

#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("Cannot read the pin file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a pin file ({why}); give a file `mcpvm pin --out` wrote")]
    NotPin { path: PathBuf, why: String },
    #[error("{path} holds no pin of {key}; pin it first: mcpvm pin --out {path} …")]
    NoEntry { path: PathBuf, key: String },
    #[error("Nothing to pin: the server did not list its definitions (see the probe's steps with mcpvm probe)")]
    NoListing,
    #[error("Cannot write the pin file {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Who a pin is of: its key in the file, and what the catalogue or the
/// package spec says of it (package, version, layer file, lock digest).
pub struct Identity {
    pub key: String,
    pub pinned: Pinned,
}

/// The identity of the server `vm` and `command` name.
pub fn identity(vm: &VmRequest, command: &[String]) -> Identity {
    let stored = mcpvm::server::stored(
        vm.server.as_deref(),
        vm.package.as_deref(),
        &vm.catalogue,
        &vm.images,
    );
    match stored {
        Some(s) => Identity {
            key: s.key,
            pinned: Pinned {
                package: Some(s.entry.package),
                version: Some(s.entry.version),
                layer: s.record.as_ref().map(|r| r.layer.clone()),
                lock: s.record.and_then(|r| r.lock),
                definitions: Vec::new(),
            },
        },
        None => Identity {
            key: command.join(" ").chars().take(512).collect(),
            pinned: Pinned::default(),
        },
    }
}

/// A pin file, read and checked.
pub fn read(path: &Path) -> Result<PinFile, PinError> {
    let bytes = std::fs::read(path).map_err(|source| PinError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let file: PinFile = serde_json::from_slice(&bytes).map_err(|e| PinError::NotPin {
        path: path.to_path_buf(),
        why: e.to_string(),
    })?;
    if file.schema != SCHEMA {
        return Err(PinError::NotPin {
            path: path.to_path_buf(),
            why: format!("schema {}, this mcpvm reads {SCHEMA}", file.schema),
        });
    }
    Ok(file)
}

/// `--pinned FILE` for the server `vm` and `command` name: its pin, and the version
/// it runs now when the catalogue or the package spec says (else its
/// `serverInfo` version, read by the probe).
pub fn pinned_for(
    path: &Path,
    vm: &VmRequest,
    command: &[String],
) -> Result<(Pinned, Option<String>), PinError> {
    let file = read(path)?;
    let id = identity(vm, command);
    let pinned = file
        .servers
        .get(&id.key)
        .cloned()
        .ok_or_else(|| PinError::NoEntry {
            path: path.to_path_buf(),
            key: id.key.clone(),
        })?;
    Ok((pinned, id.pinned.version))
}

/// Writes the pin of what the probe listed into `out` (merged with the
/// servers already there), whole or not at all.
pub fn write(
    out: &Path,
    vm: &VmRequest,
    command: &[String],
    result: &probes::ProbeResult,
) -> Result<String, PinError> {
    if result.lifecycle.is_none() || result.definitions.is_empty() && result.tools.is_empty() {
        return Err(PinError::NoListing);
    }
    let mut file = match out.exists() {
        true => read(out)?,
        false => PinFile {
            schema: SCHEMA,
            ..PinFile::default()
        },
    };
    let mut id = identity(vm, command);
    // A bare command is known by what it says it is.
    if id.pinned.package.is_none() {
        id.pinned.package = result.server_name.clone();
        id.pinned.version = result.server_version.clone();
    }
    id.pinned.definitions = result.definitions.clone();
    let summary = format!(
        "pinned {}: {} definitions of {} {}",
        id.key,
        id.pinned.definitions.len(),
        id.pinned.package.as_deref().unwrap_or("?"),
        id.pinned.version.as_deref().unwrap_or("?")
    );
    file.servers.insert(id.key, id.pinned);
    let text = serde_json::to_string_pretty(&file).unwrap_or_default() + "\n";
    mcpvm::host::files::write_whole(out, text.as_bytes()).map_err(|source| PinError::Write {
        path: out.to_path_buf(),
        source,
    })?;
    Ok(summary)
}
