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
    /// The executable it runs (for `--package`, which names none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The compiler a crate's layer was built with (`rustc -vV`), which
    /// its key includes: a run checks the key with it, not the host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolchain: Option<String>,
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

/// The default store: ~/.cache/mcpvm/images (or $MCPVM_CACHE/images).
pub fn default_dir() -> PathBuf {
    let cache = std::env::var_os("MCPVM_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
                .join(".cache/mcpvm")
        });
    cache.join("images")
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
                command: Some("c".into()),
                toolchain: Some(built_with.into()),
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
                command: None,
                toolchain: None,
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
