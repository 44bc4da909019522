//! Layer keys: a layer is rebuilt when anything it is made of changes
//! (the recipe, the package and its pins, how it is installed, the runtime
//! image, the node a layer carries, a crate's compiler) and only then.

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::catalogue::{Entry, Runtime};

/// The runtimes' pins: a layer carrying its own node is rebuilt when that
/// pin moves.
pub(crate) const NODE_LOCK: &str = include_str!("../../runtimes/node.lock");

/// Bump when the way layers are made changes.
const LAYER_RECIPE: &str = "layer-recipe-4";

/// The layer key: recipe, what is installed, and the runtime it runs on;
/// for a crate, also this host's compiler (a new compiler rebuilds).
pub fn layer_key(name: &str, e: &Entry, runtime_key: &str) -> String {
    layer_key_built_with(name, e, runtime_key, &toolchain_for(e))
}

/// The compiler a layer of `e` is built with here: a crate's `rustc -vV`,
/// nothing for the others (no process is started for them).
pub fn toolchain_for(e: &Entry) -> String {
    match e.runtime {
        Runtime::Cargo => toolchain_version(),
        _ => String::new(),
    }
}

/// [`layer_key`] of a layer built with `toolchain` ([`toolchain_for`] on
/// the host that built it). A run checks a layer with the toolchain its
/// record names, so that a crate's layer runs on a host with another
/// compiler or none (a deployment host, the testbed).
pub fn layer_key_built_with(name: &str, e: &Entry, runtime_key: &str, toolchain: &str) -> String {
    let mut h = Sha256::new();
    for part in [
        LAYER_RECIPE,
        name,
        &e.package,
        &e.version,
        &e.command,
        runtime_key,
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    for pin in &e.pins {
        h.update(pin.as_bytes());
        h.update([1]);
    }
    // A local package is what its file holds (unreadable: its path, and
    // the build says why).
    if let Some(src) = &e.source {
        match std::fs::read(src) {
            Ok(bytes) => h.update(Sha256::digest(bytes)),
            Err(_) => h.update(src.to_string_lossy().as_bytes()),
        }
        h.update([5]);
    }
    for (k, v) in &e.install_env {
        h.update(format!("{k}={v}").as_bytes());
        h.update([3]);
    }
    if e.ignore_scripts {
        h.update(b"ignore-scripts");
    }
    if e.as_released {
        h.update(b"as-released");
    }
    for x in &e.extras {
        h.update(x.as_bytes());
        h.update([4]);
    }
    for p in &e.apt {
        h.update(p.as_bytes());
        h.update([6]);
    }
    for p in &e.sdists {
        h.update(p.as_bytes());
        h.update([11]);
    }
    for p in &e.build_apt {
        h.update(p.as_bytes());
        h.update([10]);
    }
    // Since node-gyp builds run with a compiler in the install microVM,
    // a tree with native modules comes out differently: node layers
    // made before then are made again.
    if e.runtime.is_node() {
        h.update(b"native-modules-built");
    }
    for (path, text) in &e.dummy_files {
        h.update(path.as_bytes());
        h.update(text.as_bytes());
        h.update([9]);
    }
    for need in &e.needs {
        for (path, text) in need.files() {
            h.update(path.as_bytes());
            h.update(text.as_bytes());
            h.update([8]);
        }
    }
    // A layer carrying its own node is rebuilt when that pin moves.
    if let Some(major) = e.runtime.own_node() {
        h.update(locked_node_version(major).as_bytes());
        h.update([2]);
    }
    // A crate's binaries are rebuilt by a new compiler.
    if e.runtime == Runtime::Cargo {
        h.update(toolchain.as_bytes());
        h.update([7]);
    }
    h.update(format!("{:?}", e.runtime).as_bytes());
    hex(&h.finalize())[..16].to_string()
}

/// The runtime image's key: the directory name the rootfs script caches
/// it under.
pub fn runtime_key(path: &Path) -> String {
    path.parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default()
}

/// The version node.lock pins for `major`, for layer keys.
pub(crate) fn locked_node_version(major: &str) -> String {
    toml::from_str::<toml::Table>(NODE_LOCK)
        .ok()
        .and_then(|t| {
            Some(
                t.get("node")?
                    .get(major)?
                    .get("version")?
                    .as_str()?
                    .to_string(),
            )
        })
        .unwrap_or_default()
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The toolchain's version, for layer keys: a new compiler rebuilds.
pub fn toolchain_version() -> String {
    crate::host_env::command("rustc")
        .arg("-vV")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default()
}
