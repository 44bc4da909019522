//! The warm-start cache (`mcpvm run --warm`): snapshots of servers that
//! have answered `initialize`, keyed by everything that went into them,
//! taken on first use and restored from then on.
//!
//! The key is the SHA-256 of [`Inputs`]: the versions of mcpvm and of the
//! snapshot format, the identity of every file the VM is made of (kernel,
//! initramfs, root image, server layer, disks: path, size, modification
//! time and inode, so a rebuilt file is a new key without hashing
//! hundreds of MiB on every run), the VM's shape, and the run spec
//! (command, environment, working directory, setup line and the
//! withholding policy of the profile). A catalogued server's layer is
//! named after its package and version, so a new version is a new key.
//! Entries are directories `<key>/` holding the snapshot plus
//! `inputs.json`, what the key was made of (environment values are not
//! written, only their names: they may be credentials).

use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::plan::RunPlan;
use super::request::RunRequest;
use super::RunError;

/// What a warm snapshot depends on.
#[derive(Debug, Serialize)]
pub struct Inputs {
    pub mcpvm: &'static str,
    pub snapshot_format: u32,
    pub files: Vec<FileId>,
    pub mem_mib: u64,
    pub vcpus: u8,
    pub rng: bool,
    pub cmdline: String,
    /// The run spec as the agent gets it (JSON).
    pub spec: serde_json::Value,
}

/// A file as far as the key is concerned.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct FileId {
    pub path: PathBuf,
    pub bytes: u64,
    pub mtime_ns: i128,
    pub inode: u64,
}

impl FileId {
    pub fn of(path: &Path) -> std::io::Result<FileId> {
        use std::os::unix::fs::MetadataExt;
        let path = std::fs::canonicalize(path)?;
        let m = std::fs::metadata(&path)?;
        Ok(FileId {
            bytes: m.len(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            inode: m.ino(),
            path,
        })
    }
}

impl Inputs {
    /// The cache key: SHA-256 of the inputs' JSON, hex.
    pub fn key(&self) -> String {
        let json = serde_json::to_vec(self).expect("inputs serialize");
        Sha256::digest(&json)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The inputs as written beside the snapshot: environment values
    /// replaced by their names' presence.
    pub fn described(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).expect("inputs serialize");
        if let Some(env) = v["spec"]["env"].as_array_mut() {
            for pair in env.iter_mut() {
                pair[1] = serde_json::json!("(not written)");
            }
        }
        v
    }
}

impl Inputs {
    /// What a snapshot of `plan` depends on (the plan's spec as taken: a
    /// snapshot run).
    pub fn of(plan: &RunPlan) -> std::io::Result<Inputs> {
        let mut taken = plan.spec.clone();
        taken.snapshot = true;
        Ok(Inputs {
            mcpvm: env!("CARGO_PKG_VERSION"),
            snapshot_format: vmm::snapshot::VERSION,
            files: plan
                .files()
                .into_iter()
                .map(FileId::of)
                .collect::<Result<_, _>>()?,
            mem_mib: plan.mem_mib,
            vcpus: plan.vcpus,
            rng: plan.rng,
            cmdline: plan.cmdline.clone(),
            spec: serde_json::to_value(&taken).expect("run specs serialize"),
        })
    }
}

/// The warm snapshot for `inputs` in `cache`: found, or taken now by
/// `take` (a child `mcpvm run --snapshot-to` of the same VM and server,
/// given the directory to write: this process's VMM has yet to run its
/// own VM).
pub fn find_or_take(
    cache: &Path,
    inputs: &Inputs,
    take: impl FnOnce(&Path) -> Result<(), RunError>,
) -> Result<PathBuf, RunError> {
    let key = inputs.key();
    if let Some(dir) = lookup(cache, &key) {
        log::info!("warm start from {}", dir.display());
        return Ok(dir);
    }
    let dir = cache.join(&key);
    eprintln!(
        "mcpvm: no warm snapshot of this server yet; taking one (a cold start) into {}",
        dir.display()
    );
    let file_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RunError::File { path, source }
    };
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(cache)
            .map_err(file_err(cache))?;
    }
    take(&dir)?;
    let described = serde_json::to_string_pretty(&inputs.described()).expect("inputs serialize");
    write_private(&dir.join("inputs.json"), described.as_bytes())?;
    Ok(dir)
}

/// The warm snapshot of `plan`: from the cache, or taken by a child
/// `mcpvm run --request` of the same VM with `snapshot_to` (its
/// environment's values in its environment, as the request names them).
pub fn snapshot_for(
    args: &RunRequest,
    plan: &RunPlan,
    catalogued: bool,
) -> Result<PathBuf, RunError> {
    let inputs = Inputs::of(plan).map_err(RunError::Warm)?;
    let cache = args.snapshots.clone().unwrap_or_else(default_dir);
    find_or_take(&cache, &inputs, |dir| {
        let take = RunRequest {
            vm: args.vm.clone(),
            snapshot_to: Some(dir.to_path_buf()),
            // A catalogued server's command comes from the catalogue; a
            // package's server takes only the arguments given to it.
            command: match (catalogued, args.vm.package.is_some()) {
                (true, true) => args.command.clone(),
                (true, false) => Vec::new(),
                (false, _) => plan.spec.argv.clone(),
            },
            ..RunRequest::default()
        };
        let env = args.vm.environment()?;
        let exe = crate::exe::vm().map_err(RunError::Warm)?;
        let rundir = crate::host::rundir::RunDir::create().map_err(RunError::RunDir)?;
        let request = take.write_in(rundir.path()).map_err(RunError::Warm)?;
        let status = std::process::Command::new(exe)
            .arg("run")
            .arg("--request")
            .arg(&request)
            .envs(env)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .status()
            .map_err(RunError::Warm)?;
        match status.success() {
            true => Ok(()),
            false => Err(RunError::WarmTake { status }),
        }
    })
}

/// A file beside a snapshot: made anew, readable by its owner only (like
/// the snapshot it describes).
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), RunError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|source| RunError::File {
            path: path.to_path_buf(),
            source,
        })
}

/// The default cache: ~/.cache/mcpvm/snapshots (or
/// $MCPVM_CACHE/snapshots), beside the image store.
pub fn default_dir() -> PathBuf {
    mcpvm_images::store::default_dir()
        .parent()
        .map(|p| p.join("snapshots"))
        .unwrap_or_else(|| PathBuf::from("snapshots"))
}

/// Removes the snapshots no run can find again: taken by another mcpvm or
/// snapshot format, or of a VM one of whose files (kernel, initramfs,
/// images, layer, disks) has since been rebuilt, moved or removed (its
/// key is gone with it). An entry without its `inputs.json` may be one
/// being taken: it stays. Returns each entry removed (or, with `dry_run`,
/// that would be) and its bytes.
pub fn prune(cache: &Path, dry_run: bool) -> std::io::Result<Vec<(String, u64)>> {
    let entries = match std::fs::read_dir(cache) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        // Only entries of the cache's own shape: a key, as a directory.
        let key = name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit());
        if !key || !e.path().is_dir() {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(e.path().join("inputs.json")) else {
            continue;
        };
        if !unreachable(&text) {
            continue;
        }
        let bytes = mcpvm_images::store::du(&e.path());
        if !dry_run && std::fs::remove_dir_all(e.path()).is_err() {
            continue;
        }
        removed.push((name, bytes));
    }
    removed.sort();
    Ok(removed)
}

/// A snapshot described by `inputs` (its `inputs.json`) that no run of
/// this mcpvm can key to again.
fn unreachable(inputs: &str) -> bool {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(inputs) else {
        return true;
    };
    let same_file = |f: &serde_json::Value| {
        let Some(path) = f["path"].as_str() else {
            return false;
        };
        FileId::of(Path::new(path))
            .ok()
            .and_then(|now| serde_json::to_value(now).ok())
            .is_some_and(|now| now == *f)
    };
    v["mcpvm"] != env!("CARGO_PKG_VERSION")
        || v["snapshot_format"] != vmm::snapshot::VERSION
        || !v["files"]
            .as_array()
            .is_some_and(|files| files.iter().all(same_file))
}

/// The snapshot for `key` in `dir`, if one was taken and is complete
/// (a snapshot appears only whole: `vmm::snapshot::write` renames it
/// into place).
pub fn lookup(dir: &Path, key: &str) -> Option<PathBuf> {
    let entry = dir.join(key);
    entry
        .join(vmm::snapshot::STATE_FILE)
        .is_file()
        .then_some(entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(file: &Path) -> Inputs {
        Inputs {
            mcpvm: "0.1.0",
            snapshot_format: 2,
            files: vec![FileId::of(file).unwrap()],
            mem_mib: 256,
            vcpus: 1,
            rng: true,
            cmdline: "quiet".into(),
            spec: serde_json::json!({"argv": ["/bin/server"], "env": [["TOKEN", "secret"]]}),
        }
    }

    /// A snapshot whose files are as they were stays; one whose layer was
    /// rebuilt, or that another mcpvm took, goes; what is not the cache's
    /// (other names, an entry still being taken) is left alone.
    #[test]
    fn prune_takes_the_snapshots_no_run_can_find_again() {
        let d = tempfile::tempdir().unwrap();
        let layer = d.path().join("layer.erofs");
        std::fs::write(&layer, "v1").unwrap();
        let cache = d.path().join("snapshots");
        let entry = |key: char, inputs: &Inputs| {
            let dir = cache.join(key.to_string().repeat(64));
            std::fs::create_dir_all(&dir).unwrap();
            let mut v = inputs.described();
            v["mcpvm"] = env!("CARGO_PKG_VERSION").into();
            v["snapshot_format"] = vmm::snapshot::VERSION.into();
            std::fs::write(dir.join("inputs.json"), v.to_string()).unwrap();
            std::fs::write(dir.join("memory"), "0123456789").unwrap();
            (dir, v)
        };
        let (current, _) = entry('a', &inputs(&layer));
        let (other_version, mut v) = entry('b', &inputs(&layer));
        v["mcpvm"] = "0.0.1".into();
        std::fs::write(other_version.join("inputs.json"), v.to_string()).unwrap();
        let being_taken = cache.join("c".repeat(64));
        std::fs::create_dir_all(&being_taken).unwrap();
        std::fs::create_dir_all(cache.join("not-a-key")).unwrap();

        let gone = prune(&cache, false).unwrap();
        let names: Vec<&str> = gone.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["b".repeat(64)]);
        assert!(gone[0].1 >= 10, "its files' bytes: {gone:?}");
        assert!(current.exists() && being_taken.exists() && cache.join("not-a-key").exists());
        // The layer rebuilt: the snapshot of the old one is unreachable.
        std::fs::remove_file(&layer).unwrap();
        std::fs::write(&layer, "v2, longer").unwrap();
        assert_eq!(prune(&cache, true).unwrap().len(), 1, "a dry run names it");
        assert!(current.exists());
        assert_eq!(prune(&cache, false).unwrap()[0].0, "a".repeat(64));
        assert!(!current.exists());
        assert_eq!(prune(&d.path().join("none"), false).unwrap(), vec![]);
    }

    #[test]
    fn the_key_changes_with_any_input_and_only_then() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("kernel");
        std::fs::write(&f, "one").unwrap();
        let a = inputs(&f);
        assert_eq!(a.key(), inputs(&f).key(), "same inputs, same key");
        assert_eq!(a.key().len(), 64);
        let mut b = inputs(&f);
        b.mem_mib = 512;
        assert_ne!(a.key(), b.key());
        let mut c = inputs(&f);
        c.spec["argv"][0] = "/bin/other".into();
        assert_ne!(a.key(), c.key());
        // A rebuilt file (same path) is another key.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&f, "two").unwrap();
        assert_ne!(a.key(), inputs(&f).key());
    }

    #[test]
    fn written_inputs_keep_no_environment_values() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("kernel");
        std::fs::write(&f, "k").unwrap();
        let text = inputs(&f).described().to_string();
        assert!(text.contains("TOKEN") && !text.contains("secret"), "{text}");
    }

    #[test]
    fn only_a_complete_snapshot_is_found() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(lookup(d.path(), "k"), None);
        std::fs::create_dir(d.path().join("k")).unwrap();
        assert_eq!(lookup(d.path(), "k"), None);
        std::fs::write(d.path().join("k/state"), "").unwrap();
        assert_eq!(lookup(d.path(), "k"), Some(d.path().join("k")));
    }
}
