//! Tools layers: what a build needs in the install microVM and a server
//! never gets at run time (a compiler, headers), as an EROFS layer over
//! the runtime image for that microVM only. Debian packages are unpacked
//! as a server's `apt` packages are ([`crate::apt`]); the rest (a Rust
//! toolchain, node's headers) is copied in by the caller. Each layer is
//! made once per runtime and inputs, and kept in the store and in the
//! machine's cache (`$MCPVM_CACHE/tools`), where another store (a
//! corpus's, a test's) takes it from instead of making it again.

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
    let shared = crate::store::cache_dir().join("tools");
    layer_in(store, &shared, runtime, tools, fill, progress)
}

/// [`layer`], with `shared` as the machine's cache of tools layers.
fn layer_in(
    store: &Path,
    shared: &Path,
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
    let stale = |n: &str| {
        n.starts_with(&prefix)
            && n.ends_with(".erofs")
            && n != file
            && (tools.one_per_store || !n.starts_with(&format!("{prefix}{rt}-")))
    };
    if shared.join(&file).is_file() && place(&shared.join(&file), &path).is_ok() {
        progress(&format!(
            "tools layer for builds ({}): from the machine's cache",
            tools.what
        ));
        remove(store, &stale);
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
    remove(store, &stale);
    // Kept for other stores; a cache that cannot be written only costs
    // them the making.
    if std::fs::create_dir_all(shared).is_ok() && place(&path, &shared.join(&file)).is_ok() {
        remove(shared, &stale);
    }
    Ok(path)
}

/// Removes the layers `stale` names in `dir`: of an older toolchain, or
/// of a runtime no longer built on.
fn remove(dir: &Path, stale: &dyn Fn(&str) -> bool) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if stale(&e.file_name().to_string_lossy()) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// `from` at `to`, whole or not at all: a hard link where both are on
/// one filesystem (the layers are never written once made), else a copy,
/// under a temporary name until it is complete.
fn place(from: &Path, to: &Path) -> std::io::Result<()> {
    let name = to.file_name().unwrap_or_default().to_string_lossy();
    let tmp = to.with_file_name(format!(".{name}.{}.place", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let r = std::fs::hard_link(from, &tmp)
        .or_else(|_| std::fs::copy(from, &tmp).map(drop))
        .and_then(|()| std::fs::rename(&tmp, to));
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// The runtime image's key: from its name in a store
/// (`runtime-KEY.erofs`), else its cache directory's.
pub(crate) fn runtime_id(runtime: &Path) -> String {
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

    /// Made once: a second store takes the layer from the machine's
    /// cache without making it, and a newer toolchain replaces the old
    /// one in both.
    #[test]
    fn a_second_store_takes_the_layer_from_the_machines_cache() {
        let d = tempfile::tempdir().unwrap();
        let (a, b, shared) = (d.path().join("a"), d.path().join("b"), d.path().join("c"));
        for s in [&a, &b] {
            std::fs::create_dir_all(s).unwrap();
        }
        let runtime = Path::new("/s/runtime-0123abcd4567ef89.erofs");
        let tools = |version: &str| Tools {
            family: "rust",
            what: "a toolchain".into(),
            apt: Vec::new(),
            inputs: vec![version.into()],
            dir: "opt/t",
            one_per_store: true,
        };
        let made = std::cell::Cell::new(0);
        let fill = |dir: &Path| {
            made.set(made.get() + 1);
            std::fs::write(dir.join("tool"), "v").map_err(io_err(dir))
        };
        let said = std::cell::RefCell::new(Vec::new());
        let mut progress = |s: &str| said.borrow_mut().push(s.to_string());
        let first = layer_in(&a, &shared, runtime, &tools("1"), &fill, &mut progress).unwrap();
        let second = layer_in(&b, &shared, runtime, &tools("1"), &fill, &mut progress).unwrap();
        assert_eq!(made.get(), 1);
        assert_eq!(first.file_name(), second.file_name());
        assert_eq!(
            std::fs::read(&first).unwrap(),
            std::fs::read(&second).unwrap()
        );
        let last = said.borrow().last().cloned().unwrap();
        assert!(last.ends_with("from the machine's cache"), "{last}");
        let newer = layer_in(&b, &shared, runtime, &tools("2"), &fill, &mut progress).unwrap();
        assert_eq!(made.get(), 2);
        for dir in [&b, &shared] {
            let names: Vec<_> = std::fs::read_dir(dir)
                .unwrap()
                .flatten()
                .map(|e| e.file_name())
                .collect();
            assert_eq!(names, [newer.file_name().unwrap()], "{dir:?}");
        }
    }

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
