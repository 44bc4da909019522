//! The image store: a directory holding the runtime image, the server
//! layers and `index.json`, which says which file belongs to which server
//! and with which key (a hash of everything the layer is built from).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub const INDEX: &str = "index.json";

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Index {
    pub schema: u32,
    /// File name of the runtime image in the store.
    pub runtime: Option<String>,
    pub servers: BTreeMap<String, LayerRecord>,
    /// Servers whose last build failed, with why: an audit quotes it
    /// (its verdict is `install_failed`) instead of stopping.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failed: BTreeMap<String, FailedBuild>,
}

/// A layer build that failed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FailedBuild {
    /// The key the build was for: a changed entry's old failure is not
    /// its own.
    pub key: String,
    pub error: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LayerRecord {
    /// File name of the layer in the store.
    pub layer: String,
    pub key: String,
    pub package: String,
    pub version: String,
    pub bytes: u64,
    /// The digest of the dependency tree's lock (crate::lock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<String>,
    /// The day its tree was frozen at, for a layer built as released
    /// (`lock::released_on`): what it can speak is no newer than that.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_on: Option<String>,
    /// The executable it runs (for `--package`, which names none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The compiler a crate's layer was built with (`rustc -vV`), which
    /// its key includes: a run checks the key with it, not the host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolchain: Option<String>,
    /// What its install scripts did in their microVM, where it ran any
    /// (layers built before this was recorded have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<crate::sandbox::InstallRecord>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("Cannot read the image index {path}; build images with `mcpvm image build`")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("The image index {path} is damaged ({why}); rebuild with `mcpvm image build`")]
    Damaged { path: PathBuf, why: String },
    #[error("Cannot write the image index {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("No image for server '{name}' in {dir}; run `mcpvm image build --servers {name}`")]
    Missing { name: String, dir: PathBuf },
    #[error("The image for server '{name}' in {dir} is out of date with the catalogue; run `mcpvm image build --servers {name}`")]
    Stale { name: String, dir: PathBuf },
}

/// `.stage-<server>-<pid>` left by a build whose process is gone (a
/// running build's is its own).
fn leftover_of_a_gone_build(name: &str) -> bool {
    let pid = match name.strip_prefix(".stage-") {
        Some(rest) => rest.rsplit('-').next().and_then(|p| p.parse::<i32>().ok()),
        // `.layer-….erofs.tmp` names no builder: it may be a running
        // build's, and is left.
        _ => return false,
    };
    pid.is_some_and(|p| p > 0 && !Path::new("/proc").join(p.to_string()).exists())
}

/// Bytes under `path` (a file, or a directory's files).
pub fn du(path: &Path) -> u64 {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::read_dir(path)
            .map(|d| d.flatten().map(|e| du(&e.path())).sum())
            .unwrap_or(0),
        Ok(m) => m.len(),
        Err(_) => 0,
    }
}

/// The machine's cache: $MCPVM_CACHE, else ~/.cache/mcpvm.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("MCPVM_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
                .join(".cache/mcpvm")
        })
}

/// The default store: ~/.cache/mcpvm/images (or $MCPVM_CACHE/images).
pub fn default_dir() -> PathBuf {
    cache_dir().join("images")
}

impl Index {
    /// The runtime image's key, from its file name (`runtime-<key>.erofs`);
    /// empty when none is built. Layer keys include it.
    pub fn runtime_key(&self) -> String {
        self.runtime
            .as_deref()
            .and_then(|f| f.strip_prefix("runtime-")?.strip_suffix(".erofs"))
            .unwrap_or_default()
            .to_string()
    }

    pub fn load(dir: &Path) -> Result<Self, StoreError> {
        let path = dir.join(INDEX);
        let text = std::fs::read_to_string(&path).map_err(|source| StoreError::Read {
            path: path.clone(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| StoreError::Damaged {
            path,
            why: e.to_string(),
        })
    }

    pub fn load_or_new(dir: &Path) -> Result<Self, StoreError> {
        if dir.join(INDEX).exists() {
            Self::load(dir)
        } else {
            Ok(Index {
                schema: 1,
                ..Index::default()
            })
        }
    }

    /// Writes the index whole, through a temporary file: a crash leaves
    /// the old index or the new one, never half of one.
    pub fn save(&self, dir: &Path) -> Result<(), StoreError> {
        let path = dir.join(INDEX);
        let tmp = dir.join(format!(".{INDEX}.{}", std::process::id()));
        let write = |source| StoreError::Write {
            path: path.clone(),
            source,
        };
        let text = serde_json::to_string_pretty(self).expect("index serialises");
        std::fs::write(&tmp, text).map_err(write)?;
        std::fs::rename(&tmp, &path).map_err(write)
    }

    /// The key `name`'s layer has if it was built from `entry`, checked
    /// with the compiler its record names (see `build::layer_key_built_with`).
    pub fn key_of(&self, name: &str, entry: &crate::catalogue::Entry) -> String {
        let toolchain = self
            .servers
            .get(name)
            .and_then(|r| r.toolchain.as_deref())
            .unwrap_or("");
        crate::key::layer_key_built_with(name, entry, &self.runtime_key(), toolchain)
    }

    /// Makes the store hold only what `keep` keeps: the records it
    /// refuses go from the index, and every image file no kept record
    /// names (old layers, other runtime images than the index's) is
    /// removed, as are build leftovers of processes that are gone. Locks
    /// stay (a rebuild installs the same tree). Returns each file removed
    /// (or, with `dry_run`, that would be) and its bytes.
    pub fn prune(
        &mut self,
        dir: &Path,
        keep: impl Fn(&str, &LayerRecord) -> bool,
        dry_run: bool,
    ) -> Result<Vec<(String, u64)>, StoreError> {
        self.servers.retain(|name, r| keep(name, r));
        let named: std::collections::BTreeSet<&str> = self
            .servers
            .values()
            .map(|r| r.layer.as_str())
            .chain(self.runtime.as_deref())
            .collect();
        let read = |source| StoreError::Read {
            path: dir.to_path_buf(),
            source,
        };
        let mut removed = Vec::new();
        for e in std::fs::read_dir(dir).map_err(read)?.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let image = (name.starts_with("layer-") || name.starts_with("runtime-"))
                && name.ends_with(".erofs");
            let leftover = leftover_of_a_gone_build(&name);
            let unnamed_image = image && !named.contains(name.as_str());
            if !unnamed_image && !leftover {
                continue;
            }
            let bytes = du(&e.path());
            if !dry_run {
                let gone = match e.path().is_dir() {
                    true => std::fs::remove_dir_all(e.path()),
                    false => std::fs::remove_file(e.path()),
                };
                if gone.is_err() {
                    continue;
                }
            }
            removed.push((name, bytes));
        }
        if !dry_run {
            self.save(dir)?;
        }
        removed.sort();
        Ok(removed)
    }

    /// The runtime image and the layer of `name`, if the layer was built
    /// from `key`.
    pub fn resolve(
        &self,
        dir: &Path,
        name: &str,
        key: &str,
    ) -> Result<(PathBuf, PathBuf), StoreError> {
        let missing = || StoreError::Missing {
            name: name.to_string(),
            dir: dir.to_path_buf(),
        };
        let rec = self.servers.get(name).ok_or_else(missing)?;
        let runtime = self.runtime.as_ref().ok_or_else(missing)?;
        if rec.key != key {
            return Err(StoreError::Stale {
                name: name.to_string(),
                dir: dir.to_path_buf(),
            });
        }
        let (rt, layer) = (dir.join(runtime), dir.join(&rec.layer));
        if !rt.exists() || !layer.exists() {
            return Err(missing());
        }
        Ok((rt, layer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crate's layer is checked with the compiler it was built with, so
    /// a host with another compiler, or none, runs it; its key still
    /// moves with the compiler for the builds.
    /// Prune keeps what it is told to and the index's runtime; it takes
    /// every other image and the leftovers of dead builds, and a dry run
    /// takes nothing.
    #[test]
    fn prune_removes_what_no_kept_record_names() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let rec = |layer: &str| LayerRecord {
            layer: layer.into(),
            key: "k".into(),
            package: "p".into(),
            version: "1".into(),
            bytes: 3,
            lock: None,
            released_on: None,
            command: None,
            toolchain: None,
            install: None,
        };
        let mut idx = Index {
            schema: 1,
            runtime: Some("runtime-b.erofs".into()),
            ..Index::default()
        };
        idx.servers
            .insert("kept".into(), rec("layer-kept-aa.erofs"));
        idx.servers
            .insert("gone".into(), rec("layer-gone-bb.erofs"));
        for f in [
            "runtime-a.erofs",
            "runtime-b.erofs",
            "layer-kept-aa.erofs",
            "layer-kept-00.erofs",
            "layer-gone-bb.erofs",
            "notes.txt",
        ] {
            std::fs::write(d.join(f), "abc").unwrap();
        }
        // A dead build's stage (no process has that pid) and a running one's.
        std::fs::create_dir(d.join(".stage-x-999999999")).unwrap();
        std::fs::write(d.join(".stage-x-999999999/f"), "abcd").unwrap();
        let mine = format!(".stage-y-{}", std::process::id());
        std::fs::create_dir(d.join(&mine)).unwrap();
        idx.save(d).unwrap();

        let keep = |name: &str, _: &LayerRecord| name == "kept";
        let dry = idx.clone().prune(d, keep, true).unwrap();
        assert_eq!(dry.len(), 4, "{dry:?}");
        assert!(
            d.join("layer-gone-bb.erofs").exists(),
            "a dry run removes nothing"
        );
        let removed = idx.prune(d, keep, false).unwrap();
        assert_eq!(removed, dry);
        let names: Vec<&str> = removed.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                ".stage-x-999999999",
                "layer-gone-bb.erofs",
                "layer-kept-00.erofs",
                "runtime-a.erofs"
            ]
        );
        assert_eq!(removed[0].1, 4, "a directory's bytes are its files'");
        for kept in [
            "runtime-b.erofs",
            "layer-kept-aa.erofs",
            "notes.txt",
            mine.as_str(),
        ] {
            assert!(d.join(kept).exists(), "{kept}");
        }
        let back = Index::load(d).unwrap();
        assert_eq!(back.servers.keys().collect::<Vec<_>>(), ["kept"]);
    }

    #[test]
    fn a_crate_layer_is_checked_with_the_compiler_it_was_built_with() {
        let c = crate::catalogue::Catalogue::parse(
            "[servers.c]\npackage = \"c\"\nversion = \"1.0.0\"\nruntime = \"cargo\"\ncommand = \"c\"\n",
            "test",
        )
        .unwrap();
        let e = c.get("c").unwrap();
        let built_with = "rustc 1.90.0 (build host)";
        let rt = "rt1";
        let key = crate::key::layer_key_built_with("c", e, rt, built_with);
        assert_ne!(
            key,
            crate::key::layer_key_built_with("c", e, rt, "rustc 1.91.0")
        );
        assert_ne!(key, crate::key::layer_key_built_with("c", e, rt, ""));
        let mut idx = Index {
            schema: 1,
            runtime: Some(format!("runtime-{rt}.erofs")),
            ..Index::default()
        };
        idx.servers.insert(
            "c".into(),
            LayerRecord {
                layer: format!("layer-c-{key}.erofs"),
                key: key.clone(),
                package: "c".into(),
                version: "1.0.0".into(),
                bytes: 1,
                lock: None,
                released_on: None,
                command: Some("c".into()),
                toolchain: Some(built_with.into()),
                install: None,
            },
        );
        assert_eq!(idx.runtime_key(), rt);
        assert_eq!(idx.key_of("c", e), key, "whatever this host's rustc is");
        // Other runtimes' keys know no compiler.
        let m = crate::catalogue::Catalogue::built_in();
        let memory = m.get("memory").unwrap();
        assert_eq!(
            idx.key_of("memory", memory),
            crate::key::layer_key("memory", memory, rt)
        );
    }

    #[test]
    fn resolve_finds_fresh_layers_and_names_stale_or_missing_ones() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("runtime-a.erofs"), b"r").unwrap();
        std::fs::write(d.join("layer-memory-k1.erofs"), b"l").unwrap();
        let mut idx = Index::load_or_new(d).unwrap();
        idx.runtime = Some("runtime-a.erofs".into());
        idx.servers.insert(
            "memory".into(),
            LayerRecord {
                layer: "layer-memory-k1.erofs".into(),
                key: "k1".into(),
                package: "p".into(),
                version: "1".into(),
                bytes: 1,
                lock: Some("0123456789abcdef".into()),
                released_on: None,
                command: None,
                toolchain: None,
                install: None,
            },
        );
        idx.save(d).unwrap();
        let idx = Index::load(d).unwrap();
        let (rt, layer) = idx.resolve(d, "memory", "k1").unwrap();
        assert!(rt.ends_with("runtime-a.erofs") && layer.ends_with("layer-memory-k1.erofs"));
        let e = idx.resolve(d, "memory", "k2").unwrap_err().to_string();
        assert!(
            e.contains("out of date") && e.contains("--servers memory"),
            "{e}"
        );
        let e = idx.resolve(d, "time", "k").unwrap_err().to_string();
        assert!(e.contains("No image for server 'time'"), "{e}");
        std::fs::write(d.join(INDEX), "{").unwrap();
        assert!(Index::load(d).unwrap_err().to_string().contains("damaged"));
        let e = Index::load(&d.join("none")).unwrap_err().to_string();
        assert!(e.contains("mcpvm image build"), "{e}");
    }
}
