//! Tools layers: what a build needs in the install microVM and a server
//! never gets at run time (a compiler, headers), as an EROFS layer over
//! the runtime image for that microVM only. Debian packages are unpacked
//! as a server's `apt` packages are ([`crate::apt`]); the rest (a Rust
//! toolchain, node's headers) is copied in by the caller. Each layer is
//! made once per runtime and inputs, and kept in the store.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::process::{io_err, BuildError};

/// One tools layer to make or find.
pub struct Tools<'a> {
    /// `rust`, `node`: the layer's file is `tools-FAMILY-RUNTIME-KEY.erofs`.
    pub family: &'a str,
    /// Said once when the layer is made ("Rust toolchain, gcc, libc6-dev").
    pub what: String,
    /// Debian packages, unpacked with what they need that the runtime lacks.
    pub apt: Vec<String>,
    /// Everything else the layer is made from (a recipe version, a
    /// toolchain's version, a node's): part of its key.
    pub inputs: Vec<String>,
    /// The directory in the layer that holds the caller's files and the
    /// packages' `apt.lock`.
    pub dir: &'a str,
    /// Whether a newer layer of the family replaces every other (a
    /// toolchain), or several live side by side (one per entry's set of
    /// build packages), only those of another runtime removed.
    pub one_per_store: bool,
}

/// The layer `tools` describes for `runtime` in `store`, made when
/// missing: the Debian packages, then `fill` on the layer's `dir`.
pub fn layer(
    store: &Path,
    runtime: &Path,
    tools: &Tools,
    fill: &dyn Fn(&Path) -> Result<(), BuildError>,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, BuildError> {
    let runtime_key = runtime_id(runtime);
    let rt = &runtime_key[..runtime_key.len().min(8)];
    let mut h = Sha256::new();
    for part in tools.inputs.iter().chain(&tools.apt) {
        h.update(part.as_bytes());
        h.update([0]);
    }
    h.update(runtime_key.as_bytes());
    let key = crate::key::hex(&h.finalize()[..8]);
    let prefix = format!("tools-{}-", tools.family);
    let file = format!("{prefix}{rt}-{key}.erofs");
    let path = store.join(&file);
    if path.is_file() {
        return Ok(path);
    }
    progress(&format!(
        "tools layer for builds ({}): making it once",
        tools.what
    ));
    let tree = store.join(format!(".tools-{}-{}", tools.family, std::process::id()));
    let tmp = store.join(format!(".{file}.tmp"));
    let _ = std::fs::remove_dir_all(&tree);
    let r = (|| {
        let dir = tree.join(tools.dir);
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        if !tools.apt.is_empty() {
            crate::apt::unpack(
                &tools.apt,
                runtime,
                &store.join(".apt"),
                &tree,
                &dir,
                progress,
            )?;
        }
        fill(&dir)?;
        crate::erofs::erofs(&tree, &tmp)?;
        std::fs::rename(&tmp, &path).map_err(io_err(&path))
    })();
    let _ = std::fs::remove_dir_all(&tree);
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r?;
    // Layers this one supersedes: of an older toolchain, or of a runtime
    // the store no longer builds on.
    for e in std::fs::read_dir(store).into_iter().flatten().flatten() {
        let n = e.file_name().to_string_lossy().to_string();
        let stale = n.starts_with(&prefix)
            && n.ends_with(".erofs")
            && n != file
            && (tools.one_per_store || !n.starts_with(&format!("{prefix}{rt}-")));
        if stale {
            let _ = std::fs::remove_file(e.path());
        }
    }
    Ok(path)
}

/// The runtime image's key: from its name in a store
/// (`runtime-KEY.erofs`), else its cache directory's.
fn runtime_id(runtime: &Path) -> String {
    runtime
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("runtime-")?.strip_suffix(".erofs"))
        .map(str::to_string)
        .unwrap_or_else(|| crate::key::runtime_key(runtime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tools_layer_is_named_after_the_runtime_it_is_for() {
        assert_eq!(
            runtime_id(Path::new("/s/runtime-0123abcd4567ef89.erofs")),
            "0123abcd4567ef89"
        );
        assert_eq!(
            runtime_id(Path::new("/c/rootfs/fedcba9876543210/runtime.erofs")),
            "fedcba9876543210"
        );
    }
}
