//! Building the store: the runtime image (guest-image/rootfs/build,
//! embedded here so the binary can run it anywhere) and one EROFS layer
//! per catalogued server.
//!
//! A layer holds only `/opt/mcp/<name>`: the package installed by the
//! pinned node's npm (guest-image/runtimes/node.lock, the node the
//! runtime image carries) or the host's pip (python 3.11, as in the
//! image) at the catalogue's exact version. No package's code runs on
//! the host: npm installs with `--ignore-scripts` and pip takes wheels
//! only; the install scripts the tree has then run in a microVM that is
//! thrown away ([`ScriptSandbox`]), with the server's directory as its
//! writable workspace and no network. The guest stacks it over the
//! runtime with overlayfs (guest-agent/src/root.rs), so a server costs its
//! own files only. A layer's key hashes the recipe, the entry's package
//! fields and the runtime image's key: it is rebuilt when and only when
//! one of them changes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::catalogue::{Catalogue, Entry, Runtime};
use crate::erofs::erofs;
use crate::install::{Installed, Installer, Job};
use crate::key::NODE_LOCK;
use crate::lock::Locks;
use crate::process::{io_err, run};
use crate::store::{Index, LayerRecord};

pub use crate::key::{layer_key, layer_key_built_with, runtime_key, toolchain_for};
pub use crate::process::{cause, BuildError};
pub use crate::sandbox::{Beyond, InstallRecord, ScriptJob, ScriptSandbox};

const ROOTFS_SCRIPT: &str = include_str!("../../rootfs/build");
const ROOTFS_PACKAGES: &str = include_str!("../../rootfs/packages");
const FETCH_NODE: &str = include_str!("../../runtimes/fetch-node");
const FETCH_CRATE: &str = include_str!("../../runtimes/fetch-crate");
const FETCH_SDIST: &str = include_str!("../../runtimes/fetch-sdist");
const RELEASED: &str = include_str!("../../runtimes/released");
const UV_LOCK: &str = include_str!("../../runtimes/uv.lock");

/// `mcpvm image build --json`'s report (read back by `run --package`'s
/// first-use build through this type).
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Built {
    pub name: String,
    pub file: String,
    pub bytes: u64,
    pub cached: bool,
    pub seconds: f64,
}

/// A server whose layer could not be built, and why (with the end of
/// its installer's output).
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Failure {
    pub name: String,
    pub error: String,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Report {
    pub store: PathBuf,
    pub runtime: Built,
    pub servers: Vec<Built>,
    /// Servers that failed; the others were built all the same.
    pub failed: Vec<Failure>,
    pub seconds: f64,
}

/// The scripts behind the images, laid out as in guest-image/ (the
/// runtime's build finds the node fetcher beside it).
fn scripts() -> Result<PathBuf, BuildError> {
    let dir = tempfile_dir()?;
    for (rel, text, mode) in [
        ("rootfs/build", ROOTFS_SCRIPT, 0o755),
        ("rootfs/packages", ROOTFS_PACKAGES, 0o644),
        ("runtimes/fetch-node", FETCH_NODE, 0o755),
        ("runtimes/fetch-crate", FETCH_CRATE, 0o755),
        ("runtimes/fetch-sdist", FETCH_SDIST, 0o755),
        ("runtimes/released", RELEASED, 0o755),
        ("runtimes/uv.lock", UV_LOCK, 0o644),
        ("runtimes/node.lock", NODE_LOCK, 0o644),
    ] {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap_or(&dir)).map_err(io_err(&dir))?;
        std::fs::write(&path, text).map_err(io_err(&path))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
            .map_err(io_err(&path))?;
    }
    Ok(dir)
}

/// The pinned node and npm of `major` (None: the lock's default, the
/// image's), fetched and checked once, then cached; returns their
/// directory (`bin/node`, `bin/npm`).
fn pinned_node(scripts: &Path, major: Option<&str>) -> Result<PathBuf, BuildError> {
    run(
        "guest-image/runtimes/fetch-node",
        crate::host_env::command("python3")
            .arg(scripts.join("runtimes/fetch-node"))
            .args(major),
    )
    .map(PathBuf::from)
}

/// The scripts' directory, removed when the build ends however it ends.
struct Scripts(PathBuf);

impl Drop for Scripts {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Builds (or finds cached) the runtime image; returns its cache path.
fn build_runtime(scripts: &Path, progress: &mut dyn FnMut(&str)) -> Result<PathBuf, BuildError> {
    let script = scripts.join("rootfs/build");
    progress(
        "runtime image (Debian 12, python 3.11, pinned node): building or finding it in the cache",
    );
    let mut child = crate::host_env::command("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| BuildError::Spawn {
            what: "guest-image/rootfs/build".into(),
            source,
        })?;
    // Pass its progress lines on as they come.
    let mut lines = Vec::new();
    if let Some(err) = child.stderr.take() {
        use std::io::BufRead;
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            progress(&line);
            lines.push(line);
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|source| BuildError::Spawn {
            what: "guest-image/rootfs/build".into(),
            source,
        })?;
    if !out.status.success() {
        return Err(BuildError::Failed {
            what: "the runtime image build".into(),
            tail: lines
                .iter()
                .rev()
                .take(4)
                .rev()
                .cloned()
                .collect::<Vec<_>>()
                .join(" | "),
        });
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

fn tempfile_dir() -> Result<PathBuf, BuildError> {
    sweep_stale(&std::env::temp_dir());
    let d = std::env::temp_dir().join(format!("mcpvm-image-{}", std::process::id()));
    std::fs::create_dir_all(&d).map_err(io_err(&d))?;
    Ok(d)
}

/// Removes the working directories (`mcpvm-image-PID`,
/// `mcpvm-scripts-PID-…`, and a store's `.stage-NAME-PID`) that builds
/// killed before they could clean up left in `base`: those whose process
/// is gone.
pub fn sweep_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let pid = name
            .strip_prefix("mcpvm-image-")
            .or_else(|| name.strip_prefix("mcpvm-scripts-"))
            .and_then(|rest| rest.split('-').next())
            .or_else(|| {
                // `.stage-NAME-PID`: a server name may hold '-'.
                name.strip_prefix(".stage-")
                    .and_then(|rest| rest.rsplit('-').next())
            })
            .and_then(|p| p.parse::<i32>().ok());
        if let Some(pid) = pid {
            if pid > 0 && !Path::new("/proc").join(pid.to_string()).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

/// Puts `src` in the store as `name`: a hard link when on the same
/// filesystem, else a copy through a temporary name.
fn place(src: &Path, store: &Path, name: &str) -> Result<(), BuildError> {
    let dst = store.join(name);
    if dst.exists() {
        return Ok(());
    }
    if std::fs::hard_link(src, &dst).is_ok() {
        return Ok(());
    }
    let tmp = store.join(format!(".{name}.tmp"));
    std::fs::copy(src, &tmp).map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, &dst).map_err(io_err(&dst))
}

/// Puts a kept lock's files in the server's directory, to install from.
/// The installer of a runtime's ecosystem.
fn installer(runtime: Runtime) -> &'static dyn Installer {
    match runtime {
        Runtime::Node | Runtime::Node20 | Runtime::Node22 | Runtime::Node24 | Runtime::Node26 => {
            &crate::npm::Npm
        }
        Runtime::Python => &crate::pip::Pip,
        Runtime::Cargo => &crate::cargo::Cargo,
    }
}

/// Installs one server's package into `stage/opt/mcp/<name>` with its
/// ecosystem's installer (`crate::install`; `node`: the directory of the
/// node a node server runs on), and finds its command there.
#[allow(clippy::too_many_arguments)]
fn install(
    name: &str,
    e: &Entry,
    stage: &Path,
    node: &Path,
    fetchers: &Path,
    scripts: (&Path, &dyn ScriptSandbox),
    locked: Option<&Path>,
    progress: &mut dyn FnMut(&str),
) -> Result<(String, Option<crate::sandbox::InstallRecord>), BuildError> {
    let target = stage.join(Entry::dir(name).trim_start_matches('/'));
    std::fs::create_dir_all(&target).map_err(io_err(&target))?;
    if let Some(src) = e.source.as_ref().filter(|s| !s.is_file()) {
        return Err(BuildError::Failed {
            what: format!("the package file {}", src.display()),
            tail: "it does not exist or is not a file; fix `source` in the catalogue".into(),
        });
    }
    let job = Job {
        name,
        entry: e,
        stage,
        target: &target,
        node,
        fetchers,
        scripts,
        locked,
    };
    let Installed {
        what,
        bin_dir,
        record,
    } = installer(e.runtime).install(&job, progress)?;
    // An entry from --package names no command: the package's own.
    let command = match e.command.is_empty() {
        true => crate::package::own_command(&target, e).map_err(|why| BuildError::Failed {
            what: format!("choosing the command of {what}"),
            tail: why,
        })?,
        false => e.command.clone(),
    };
    if !bin_dir.join(&command).exists() {
        let found = std::fs::read_dir(&bin_dir)
            .map(|d| {
                d.flatten()
                    .map(|f| f.file_name().to_string_lossy().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        return Err(BuildError::NoCommand {
            package: what,
            command,
            found,
        });
    }
    Ok((command, record))
}

/// Builds the runtime image and the layers of `names` (all when empty)
/// into `store`, reusing every cached one, `jobs` layers at a time;
/// saves the index after each layer so an interrupted build keeps what
/// it finished. A layer that fails is reported in `failed` (and kept in
/// the index's `failed` with why) and the others are still built; only
/// the runtime image or the store itself failing ends the build.
pub fn build(
    catalogue: &Catalogue,
    names: &[String],
    update: &[String],
    store: &Path,
    jobs: usize,
    sandbox: &(dyn ScriptSandbox + Sync),
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<Report, BuildError> {
    let t0 = Instant::now();
    // Absolute from here on: the store's paths reach apt's options and
    // the sandbox's command lines, which do not run in this directory.
    let store = &std::path::absolute(store).map_err(io_err(store))?;
    std::fs::create_dir_all(store).map_err(io_err(store))?;
    sweep_stale(store);
    let mut index = Index::load_or_new(store)?;
    let selected = select(catalogue, names, update)?;

    let t = Instant::now();
    let scripts = Scripts(scripts()?);
    let node = pinned_node(&scripts.0, None)?;
    let rt_cache = build_runtime(&scripts.0, progress)?;
    let rt_key = runtime_key(&rt_cache);
    let rt_name = format!("runtime-{rt_key}.erofs");
    let rt_path = store.join(&rt_name);
    let rt_cached = rt_path.exists();
    place(&rt_cache, store, &rt_name)?;
    index.runtime = Some(rt_name.clone());
    index.save(store)?;
    let runtime = Built {
        name: "runtime".into(),
        bytes: std::fs::metadata(store.join(&rt_name))
            .map(|m| m.len())
            .unwrap_or(0),
        file: rt_name,
        cached: rt_cached,
        seconds: t.elapsed().as_secs_f64(),
    };

    let nodes = own_nodes(catalogue, &selected, &scripts.0);
    let cx = LayerCx {
        catalogue,
        count: selected.len(),
        update,
        store,
        rt_key: &rt_key,
        rt_path: &rt_path,
        fetchers: &scripts.0,
        node: &node,
        nodes: &nodes,
        sandbox,
        locks: Locks::in_store(store),
        before: index.clone(),
        apt: std::sync::Mutex::new(()),
    };
    let (done, progress) = cx.build_all(&selected, jobs, index, progress);
    let Done {
        index,
        mut servers,
        mut failed,
        error,
    } = done;
    if let Some(e) = error {
        return Err(e);
    }
    prune(store, &index, &selected, progress);
    let _ = std::io::stderr().flush();
    servers.sort_by_key(|(i, _)| *i);
    failed.sort_by_key(|(i, _)| *i);
    Ok(Report {
        store: store.to_path_buf(),
        runtime,
        servers: servers.into_iter().map(|(_, b)| b).collect(),
        failed: failed.into_iter().map(|(_, f)| f).collect(),
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// The servers a build is for: `names` and `update` (all when `names` is
/// empty), each one the catalogue has.
fn select(
    catalogue: &Catalogue,
    names: &[String],
    update: &[String],
) -> Result<Vec<String>, BuildError> {
    let selected: Vec<String> = if names.is_empty() {
        catalogue.servers.keys().cloned().collect()
    } else {
        let mut chosen = names.to_vec();
        chosen.extend(update.iter().filter(|u| !names.contains(u)).cloned());
        chosen
    };
    for n in selected.iter().chain(update) {
        catalogue.get(n).map_err(|e| BuildError::Failed {
            what: "choosing servers".into(),
            tail: e.to_string(),
        })?;
    }
    Ok(selected)
}

/// The nodes the layers run on (by major version), each fetched once
/// before the layers are built side by side.
fn own_nodes<'c>(
    catalogue: &'c Catalogue,
    selected: &[String],
    fetchers: &Path,
) -> std::collections::BTreeMap<&'c str, Result<PathBuf, String>> {
    let mut nodes = std::collections::BTreeMap::new();
    for name in selected {
        if let Some(major) = catalogue.get(name).ok().and_then(|e| e.runtime.own_node()) {
            if !nodes.contains_key(major) {
                let fetched = pinned_node(fetchers, Some(major)).map_err(|e| e.to_string());
                nodes.insert(major, fetched);
            }
        }
    }
    nodes
}

/// What the layer builds share.
struct LayerCx<'a> {
    catalogue: &'a Catalogue,
    count: usize,
    update: &'a [String],
    store: &'a Path,
    rt_key: &'a str,
    rt_path: &'a Path,
    fetchers: &'a Path,
    node: &'a Path,
    nodes: &'a std::collections::BTreeMap<&'a str, Result<PathBuf, String>>,
    sandbox: &'a (dyn ScriptSandbox + Sync),
    locks: Locks,
    /// The index as the build found it (each layer's own record).
    before: Index,
    /// Debian packages are fetched through one cache, one layer at a time.
    apt: std::sync::Mutex<()>,
}

/// The layers built so far, in the order they finished.
struct Done {
    index: Index,
    servers: Vec<(usize, Built)>,
    failed: Vec<(usize, Failure)>,
    /// The store could not be written: the build ends.
    error: Option<BuildError>,
}

impl Done {
    /// Keeps one layer's outcome, in the index (saved at once, so that an
    /// interrupted build keeps it) and in the report.
    fn record(
        &mut self,
        i: usize,
        name: &str,
        outcome: Result<(LayerRecord, Built), (Failure, String)>,
        store: &Path,
    ) {
        let saved = match outcome {
            Ok((record, built)) => {
                self.index.servers.insert(name.to_string(), record);
                self.index.failed.remove(name);
                self.servers.push((i, built));
                self.index.save(store)
            }
            Err((failure, key)) => {
                let error = failure.error.clone();
                self.index
                    .failed
                    .insert(name.to_string(), crate::store::FailedBuild { key, error });
                self.failed.push((i, failure));
                self.index.save(store)
            }
        };
        if let Err(e) = saved {
            self.error = Some(e.into());
        }
    }

    fn finished(&self) -> usize {
        self.servers.len() + self.failed.len()
    }
}

impl LayerCx<'_> {
    /// Builds the layers of `selected`, `jobs` at a time, each worker
    /// taking the next server when it is done with one; a progress line
    /// with the time left after each.
    fn build_all<'p>(
        &self,
        selected: &[String],
        jobs: usize,
        index: Index,
        progress: &'p mut (dyn FnMut(&str) + Send),
    ) -> (Done, &'p mut (dyn FnMut(&str) + Send)) {
        let done = std::sync::Mutex::new(Done {
            index,
            servers: Vec::new(),
            failed: Vec::new(),
            error: None,
        });
        let say = std::sync::Mutex::new(progress);
        let next = std::sync::atomic::AtomicUsize::new(0);
        let t_layers = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..jobs.clamp(1, selected.len().max(1)) {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(name) = selected.get(i) else { return };
                    let mut progress = |m: &str| {
                        let mut p = say.lock().unwrap_or_else(|e| e.into_inner());
                        (*p)(m)
                    };
                    let outcome = self.layer(i, name, &mut progress);
                    let mut d = done.lock().unwrap_or_else(|e| e.into_inner());
                    if d.error.is_some() {
                        return;
                    }
                    d.record(i, name, outcome, self.store);
                    let finished = d.finished();
                    drop(d);
                    let left = selected.len() - finished;
                    if left > 0 {
                        let per = t_layers.elapsed().as_secs_f64() / finished as f64;
                        progress(&format!(
                            "{finished} of {} layers done; about {:.0} s to go",
                            selected.len(),
                            per * left as f64
                        ));
                    }
                });
            }
        });
        (
            done.into_inner().unwrap_or_else(|e| e.into_inner()),
            say.into_inner().unwrap_or_else(|e| e.into_inner()),
        )
    }

    /// Builds (or finds cached) the layer of the `i`th server; its record
    /// and report, or its failure and the key it was for.
    /// What a layer holds beside the installed package: its Debian
    /// packages, its needs' files and its dummy credential files.
    fn beside_the_package(
        &self,
        e: &Entry,
        stage: &Path,
        dir: &Path,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(), BuildError> {
        if !e.apt.is_empty() {
            let _one = self.apt.lock().unwrap_or_else(|e| e.into_inner());
            let cache = self.store.join(".apt");
            crate::apt::unpack(&e.apt, self.rt_path, &cache, stage, dir, progress)?;
        }
        crate::needs::write_files(&e.needs, stage).map_err(io_err(stage))?;
        crate::catalogue::write_dummy_files(&e.dummy_files, stage).map_err(io_err(stage))
    }

    /// The node `e`'s install runs: its own major's (fetched once for the
    /// build) or the build's.
    fn node_for(&self, e: &Entry) -> Result<PathBuf, BuildError> {
        match e.runtime.own_node() {
            Some(major) => match self.nodes.get(major) {
                Some(Ok(n)) => Ok(n.clone()),
                Some(Err(why)) => Err(BuildError::Failed {
                    what: format!("fetching node {major}"),
                    tail: why.clone(),
                }),
                None => pinned_node(self.fetchers, Some(major)),
            },
            None => Ok(self.node.to_path_buf()),
        }
    }

    fn layer(
        &self,
        i: usize,
        name: &str,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(LayerRecord, Built), (Failure, String)> {
        let e = self.catalogue.get(name).expect("checked above");
        let toolchain = toolchain_for(e);
        let key = layer_key_built_with(name, e, self.rt_key, &toolchain);
        let file = format!("layer-{name}-{key}.erofs");
        let path = self.store.join(&file);
        let t = Instant::now();
        let step = format!(
            "[{}/{}] {name} ({} {})",
            i + 1,
            self.count,
            e.package,
            e.version
        );
        // --update: resolve again, even over a layer that is current.
        let renew = self.update.iter().any(|u| u == name);
        let cached = path.exists() && !renew;
        let current = self.before.servers.get(name).filter(|r| r.key == key);
        let mut lock = current.and_then(|r| r.lock.clone());
        let mut command = current.and_then(|r| r.command.clone());
        let mut install_record = current.and_then(|r| r.install.clone());
        if cached {
            progress(&format!("{step}: cached"));
        } else {
            let locked = self.locks.get(name, e).filter(|_| !renew);
            progress(&format!(
                "{step}: installing {}",
                match (&locked, renew) {
                    (Some(l), _) => format!(
                        "from its lock {}",
                        crate::lock::digest(l, e.runtime).unwrap_or_default()
                    ),
                    (None, true) => "(--update: resolving it again)".into(),
                    (None, false) => "(resolving its dependencies)".into(),
                }
            ));
            let stage = self
                .store
                .join(format!(".stage-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&stage);
            let tmp = self.store.join(format!(".{file}.tmp"));
            let r = self
                .node_for(e)
                .and_then(|node| {
                    let scripts = (self.rt_path, self.sandbox as &dyn ScriptSandbox);
                    install(
                        name,
                        e,
                        &stage,
                        &node,
                        self.fetchers,
                        scripts,
                        locked.as_deref(),
                        progress,
                    )
                })
                .and_then(|(found, record)| {
                    command = Some(found);
                    install_record = record;
                    let dir = stage.join(Entry::dir(name).trim_start_matches('/'));
                    self.beside_the_package(e, &stage, &dir, progress)?;
                    // The tree's lock: kept for the next build, and its
                    // digest in the index.
                    self.locks.put(name, e, &dir).map_err(io_err(&dir))?;
                    lock = crate::lock::digest(&dir, e.runtime);
                    erofs(&stage, &tmp)
                })
                .and_then(|()| std::fs::rename(&tmp, &path).map_err(io_err(&path)));
            let _ = std::fs::remove_dir_all(&stage);
            if let Err(err) = r {
                let _ = std::fs::remove_file(&tmp);
                progress(&format!("{step}: FAILED: {err}"));
                let failure = Failure {
                    name: name.to_string(),
                    error: err.to_string(),
                };
                return Err((failure, key));
            }
        }
        let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        progress(&format!(
            "{step}: {} ({:.1} MB, {:.1} s)",
            if cached { "cached" } else { "built" },
            bytes as f64 / 1e6,
            t.elapsed().as_secs_f64()
        ));
        let record = LayerRecord {
            layer: file.clone(),
            key,
            package: e.package.clone(),
            version: e.version.clone(),
            bytes,
            lock,
            released_on: self
                .locks
                .get(name, e)
                .and_then(|dir| crate::lock::released_on(&dir, e.runtime)),
            command,
            toolchain: (!toolchain.is_empty()).then_some(toolchain),
            install: install_record,
        };
        let built = Built {
            name: name.to_string(),
            file,
            bytes,
            cached,
            seconds: t.elapsed().as_secs_f64(),
        };
        Ok((record, built))
    }
}

/// Removes what this build superseded: other runtime images, and older
/// layers of the servers it built. Layers of servers not built this time
/// stay (another catalogue may use them).
fn prune(store: &Path, index: &Index, built: &[String], progress: &mut dyn FnMut(&str)) {
    let Ok(entries) = std::fs::read_dir(store) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let current_runtime = index.runtime.as_deref() == Some(name.as_str());
        let superseded =
            (name.starts_with("runtime-") && name.ends_with(".erofs") && !current_runtime)
                || built.iter().any(|s| {
                    // layer-<server>-<key>.erofs, the key being hex: "layer-a-"
                    // must not match server "a-b"'s layers.
                    let key = name
                        .strip_prefix(&format!("layer-{s}-"))
                        .and_then(|k| k.strip_suffix(".erofs"));
                    key.is_some_and(|k| k.bytes().all(|b| b.is_ascii_hexdigit()))
                        && index.servers.get(s).is_some_and(|r| r.layer != name)
                });
        if superseded && std::fs::remove_file(e.path()).is_ok() {
            progress(&format!("removed superseded {name}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_install_is_told_by_its_cause_not_its_stack() {
        let npm = "npm error code 1\nnpm error command sh -c node install.mjs\n\
            npm error Error: ERROR: Failed to set up chrome-headless-shell! Set \"PUPPETEER_SKIP_DOWNLOAD\" env variable to skip download.\n\
            npm error     at downloadBrowser (file:///x/install.js:26:15)\n\
            npm error   [cause]: Error: getaddrinfo ENOTFOUND googlechromelabs.github.io\n\
            npm error     errno: -3001,\n\
            npm error     code: 'EAI_AGAIN',\n\
            npm error     syscall: 'getaddrinfo',\n\
            npm error     at GetAddrInfoReqWrap.onlookupall (node:dns:122:26) {\n\
            npm error     hostname: 'googlechromelabs.github.io'\nnpm error   }\nnpm error }\n\
            npm error A complete log of this run can be found in: /root/.npm/_logs/x.log\n";
        let c = cause(npm);
        assert!(
            c.contains("PUPPETEER_SKIP_DOWNLOAD") && c.contains("ENOTFOUND"),
            "{c}"
        );
        assert!(
            !c.contains("downloadBrowser") && !c.contains("complete log") && !c.contains("errno"),
            "{c}"
        );
    }

    #[test]
    fn a_usage_error_is_told_by_its_message_not_the_usage_text() {
        let npm = "npm error code EUSAGE\nnpm error\n\
            npm error `npm ci` can only install packages when your package.json and package-lock.json or npm-shrinkwrap.json are in sync.\n\
            npm error\nnpm error Missing: @mobilenext/mobilecli-darwin-amd64@ from lock file\n\
            npm error\nnpm error Clean install a project\nnpm error\nnpm error Usage:\nnpm error npm ci\n\
            npm error\nnpm error Options:\nnpm error [--install-strategy <hoisted|nested|shallow|linked>]\n\
            npm error aliases: clean-install, ic, install-clean, isntall-clean\n\
            npm error Run \"npm help ci\" for more info\n";
        let c = cause(npm);
        assert_eq!(
            c,
            "code EUSAGE | `npm ci` can only install packages when your package.json and package-lock.json or npm-shrinkwrap.json are in sync. | Missing: @mobilenext/mobilecli-darwin-amd64@ from lock file"
        );
    }

    #[test]
    fn the_working_directories_of_dead_builds_are_swept() {
        let base = tempfile::tempdir().unwrap();
        // A pid no process has (past the kernel's pid_max).
        let dead = 1 << 23;
        let live = std::process::id();
        let names = [
            format!("mcpvm-image-{dead}"),
            format!("mcpvm-scripts-{dead}-Ab3x"),
            format!("mcpvm-image-{live}"),
            format!("mcpvm-scripts-{live}-Zz9q"),
            "mcpvm-scripts-Ab3xyz".to_string(),
            "unrelated-123".to_string(),
            // A store's install stage, of a killed build and of this one.
            format!(".stage-aws-documentation-{dead}"),
            format!(".stage-git-{live}"),
        ];
        for n in &names {
            std::fs::create_dir_all(base.path().join(n).join("inner")).unwrap();
        }
        sweep_stale(base.path());
        let left: Vec<bool> = names.iter().map(|n| base.path().join(n).exists()).collect();
        assert_eq!(left, [false, false, true, true, true, true, false, true]);
    }

    #[test]
    fn a_report_reads_back_as_written() {
        let built = |name: &str| Built {
            name: name.into(),
            file: format!("layer-{name}.erofs"),
            bytes: 10,
            cached: true,
            seconds: 0.5,
        };
        let r = Report {
            store: "/store".into(),
            runtime: built("runtime"),
            servers: vec![built("memory")],
            failed: vec![Failure {
                name: "bad".into(),
                error: "npm install failed".into(),
            }],
            seconds: 1.0,
        };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Report>(&text).unwrap(), r);
    }

    #[test]
    fn layer_keys_change_with_what_is_installed_and_the_runtime_only() {
        let c = Catalogue::built_in();
        let e = c.get("memory").unwrap().clone();
        let k = layer_key("memory", &e, "rt1");
        assert_eq!(k, layer_key("memory", &e, "rt1"));
        assert_ne!(k, layer_key("memory", &e, "rt2"));
        let mut newer = e.clone();
        newer.version = "2027.1.1".into();
        assert_ne!(k, layer_key("memory", &newer, "rt1"));
        let mut pinned = e.clone();
        pinned.pins.push("zod@3.25.0".into());
        assert_ne!(k, layer_key("memory", &pinned, "rt1"));
        // How it is installed is what is installed.
        let mut env = e.clone();
        env.install_env
            .insert("PUPPETEER_SKIP_DOWNLOAD".into(), "1".into());
        assert_ne!(k, layer_key("memory", &env, "rt1"));
        let mut scripts = e.clone();
        scripts.ignore_scripts = true;
        assert_ne!(k, layer_key("memory", &scripts, "rt1"));
        let mut node22 = e.clone();
        node22.runtime = Runtime::Node22;
        assert_ne!(k, layer_key("memory", &node22, "rt1"));
        // Run-time settings do not rebuild the layer.
        let mut notes = e.clone();
        notes.notes = Some("changed".into());
        notes.env.insert("X".into(), "y".into());
        assert_eq!(k, layer_key("memory", &notes, "rt1"));
        assert_eq!(
            runtime_key(Path::new("/c/rootfs/5bbedefa52e5b195/runtime.erofs")),
            "5bbedefa52e5b195"
        );
    }
}
