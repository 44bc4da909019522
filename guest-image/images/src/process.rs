//! Programs the image builder runs on the host (installers, packers):
//! how one is run ([`run`], from an environment [`crate::host_env`]
//! clears), what is said when it fails ([`cause`]: the end of its output
//! that means something), and the build's errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("Cannot run {what}")]
    Spawn {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} failed: {tail}")]
    Failed { what: String, tail: String },
    #[error("Package {package} has no executable '{command}' (it has: {found}); fix `command` in the catalogue")]
    NoCommand {
        package: String,
        command: String,
        found: String,
    },
    #[error("Cannot write in the image store {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub(crate) fn io_err(path: &Path) -> impl Fn(std::io::Error) -> BuildError + '_ {
    move |source| BuildError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The last lines of an installer's output that say something: not its
/// stack frames, lone braces, the fields of an error object, where its
/// own log went, or the usage text npm prints after a usage error (and
/// the command's one-line description before it).
pub fn cause(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.trim_start_matches("npm error").trim())
        .collect();
    let lines = match lines.iter().position(|l| *l == "Usage:") {
        Some(usage) => {
            let before = &lines[..usage];
            let description = before.iter().rposition(|l| !l.is_empty());
            &before[..description.unwrap_or(0)]
        }
        None => &lines[..],
    };
    let said: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with("at ")
                && !matches!(*l, "{" | "}" | "]")
                && !l.starts_with("A complete log of this run")
                && !is_error_field(l)
        })
        .collect();
    said[said.len().saturating_sub(8)..].join(" | ")
}

/// `errno: -3001,`: a field of an error object node printed.
fn is_error_field(line: &str) -> bool {
    line.ends_with(',')
        && line.split_once(": ").is_some_and(|(k, _)| {
            !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        })
}

/// Runs a command; on failure the error carries the end of its output.
pub(crate) fn run(what: &str, cmd: &mut Command) -> Result<String, BuildError> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|source| BuildError::Spawn {
            what: what.to_string(),
            source,
        })?;
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stderr).to_string()
            + &String::from_utf8_lossy(&out.stdout);
        return Err(BuildError::Failed {
            what: what.to_string(),
            tail: cause(&text),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}
