//! Node servers: the package installed by the npm of the node it runs on
//! (the runtime image's, or a node of its own in the layer), resolved to
//! its `package-lock.json` and installed from it with `npm ci`, each
//! tarball checked against its integrity, with `--ignore-scripts`; the
//! tree's install scripts then run in a microVM ([`ScriptSandbox`]).
//! Where a package of the tree builds native code (it has a
//! `binding.gyp`, which node-gyp builds), that microVM gets a tools
//! layer with a compiler and the node's headers ([`build_tools`]); the
//! server's layer never does.

use std::path::{Path, PathBuf};

use crate::catalogue::Entry;
use crate::install::{copy_lock, Installed, Installer, Job};
use crate::process::{io_err, run, BuildError};
use crate::sandbox::ScriptJob;

pub struct Npm;

/// A package of the tree that has install scripts.
#[derive(Debug, Clone, PartialEq)]
pub struct Scripted {
    pub name: String,
    /// Its directory in the tree (`node_modules/a/node_modules/b`).
    pub path: String,
    /// Only there as an optional dependency: npm drops it, and goes on,
    /// when its script fails.
    pub optional: bool,
}

/// The guest's command for a node tree installed with `--ignore-scripts`:
/// npm's own rebuild runs the packages' install scripts, in order, with
/// the node the server will run on. As npm does, an optional
/// dependency whose script fails is dropped and the rest goes on: those
/// are rebuilt first, one at a time (they are the others' dependencies),
/// then the rest together, which must succeed.
fn npm_rebuild_line(own_node: bool, native: bool, scripted: &[Scripted]) -> String {
    let mut line = String::from("cd /workspace && ");
    if own_node {
        line += &format!(
            "export PATH=/workspace/{}/bin:$PATH && ",
            crate::catalogue::OWN_NODE
        );
    }
    if native {
        // node-gyp takes the headers of the node it builds for from
        // --nodedir (it would download them otherwise, and there is no
        // network); Debian's `cc` is an alternative its postinst would
        // make, so the compilers are named. gyp's python would try to
        // write its bytecode beside npm's own node-gyp in the image:
        // the runtime's doing, not the package's, so it is not asked to.
        line += &format!(
            "export CC=gcc CXX=g++ npm_config_nodedir=/{TOOLS_DIR}/node PYTHONDONTWRITEBYTECODE=1 && "
        );
    }
    // No update check: npm's own lookup of its registry would be
    // recorded as the scripts reaching the network (probes::judge::install).
    let rebuild = "npm rebuild --foreground-scripts --no-audit --no-fund --no-update-notifier";
    // npm's package names and tree paths need no quoting; anything else
    // is not taken apart, and the whole tree is rebuilt strictly.
    let plain = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "@._~/-".contains(c))
    };
    let required: Vec<&str> = scripted
        .iter()
        .filter(|s| !s.optional)
        .map(|s| s.name.as_str())
        .collect();
    let optional: Vec<&Scripted> = scripted
        .iter()
        .filter(|s| s.optional && !required.contains(&s.name.as_str()))
        .collect();
    // A tree path is removed on failure: it must name a directory inside
    // node_modules, never climb out of it (the lock is the package's word).
    let inside = |p: &str| {
        p.starts_with("node_modules/")
            && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
    };
    let all_plain = scripted
        .iter()
        .all(|s| plain(&s.name) && plain(&s.path) && inside(&s.path));
    if optional.is_empty() || !all_plain {
        return line + "exec " + rebuild;
    }
    for o in &optional {
        line += &format!(
            "{{ {rebuild} {name} || {{ echo 'mcpvm: {name}, an optional dependency: its install script failed; dropped, as npm does' >&2; rm -rf -- {path}; }}; }} && ",
            name = o.name,
            path = o.path
        );
    }
    match required.is_empty() {
        true => line + "true",
        false => line + "exec " + rebuild + " " + &required.join(" "),
    }
}

/// Debian packages every native build gets: C and C++ compilers, make,
/// the C library's headers and pkg-config (binding.gyp files ask it for
/// a library's flags). node-gyp's python is the runtime image's.
const NODE_TOOLS_APT: &[&str] = &["gcc", "g++", "make", "libc6-dev", "pkg-config"];

/// Bump when the way the node tools layer is made changes.
const NODE_TOOLS_RECIPE: &str = "node-tools-recipe-1";

/// Where the node tools layer keeps its own files (the headers under
/// `node/include/node`, its apt.lock).
const TOOLS_DIR: &str = "opt/build-tools";

/// The packages of `scripted` that build native code: npm runs
/// `node-gyp rebuild` for a package with a `binding.gyp` (as its default
/// install script, or through its own).
fn native<'s>(target: &Path, scripted: &'s [Scripted]) -> Vec<&'s Scripted> {
    scripted
        .iter()
        .filter(|s| target.join(&s.path).join("binding.gyp").is_file())
        .collect()
}

/// The install microVM's tools layer for native modules built for the
/// node `major` (None: the image's): the Debian compilers, the entry's
/// `build_apt`, and that node's headers from its pinned tarball.
fn build_tools(job: &Job, progress: &mut dyn FnMut(&str)) -> Result<PathBuf, BuildError> {
    let e = job.entry;
    let headers = PathBuf::from(run(
        "guest-image/runtimes/fetch-node --headers",
        crate::host_env::command("python3")
            .arg(job.fetchers.join("runtimes/fetch-node"))
            .arg("--headers")
            .args(e.runtime.own_node()),
    )?);
    let apt: Vec<String> = NODE_TOOLS_APT
        .iter()
        .map(|p| p.to_string())
        .chain(e.build_apt.iter().cloned())
        .collect();
    let tools = crate::tools::Tools {
        family: "node",
        what: apt.join(", ") + ", node's headers",
        apt,
        inputs: vec![
            NODE_TOOLS_RECIPE.into(),
            headers
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into(),
        ],
        dir: TOOLS_DIR,
        one_per_store: false,
    };
    let store = job.stage.parent().unwrap_or(job.stage);
    let (runtime, _) = job.scripts;
    let copy = |dir: &Path| {
        let to = dir.join("node");
        std::fs::create_dir_all(&to).map_err(io_err(&to))?;
        run(
            "copying node's headers",
            crate::host_env::command("cp")
                .arg("-a")
                .arg(headers.join("include"))
                .arg(&to),
        )
        .map(drop)
    };
    crate::tools::layer(store, runtime, &tools, &copy, progress)
}

/// Installs the tree its lock names: `npm ci`, or, where npm's own
/// resolution left optional packages out of the lock (platform packages
/// listed with an empty version) and `npm ci` refuses it, `npm install`
/// from that lock, as npx runs it, under the same rules.
fn install_locked(
    npm: &dyn Fn() -> std::process::Command,
    name: &str,
    spec: &str,
    progress: &mut dyn FnMut(&str),
) -> Result<(), BuildError> {
    match run(
        &format!("npm ci {spec}"),
        npm().args(["ci", "--engine-strict"]),
    ) {
        Err(BuildError::Failed { tail, .. }) if lock_out_of_sync(&tail) => {
            progress(&format!(
                "{name}: npm ci finds the lock out of sync with what {spec} lists; installing from it as npm install does"
            ));
            run(
                &format!("npm install {spec} (from its lock)"),
                npm().args(["install", "--engine-strict"]),
            )
            .map(drop)
        }
        other => other.map(drop),
    }
}

/// `npm ci`'s refusal of a lock that does not match package.json.
fn lock_out_of_sync(tail: &str) -> bool {
    tail.contains("code EUSAGE") && tail.contains("are in sync")
}

/// The packages of an npm tree (its `node_modules/.package-lock.json`)
/// that have install scripts.
pub fn with_install_scripts(target: &Path) -> Vec<Scripted> {
    let lock = target.join("node_modules/.package-lock.json");
    let Ok(text) = std::fs::read_to_string(lock) else {
        return Vec::new();
    };
    scripted_in(&text)
}

fn scripted_in(lock: &str) -> Vec<Scripted> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(lock) else {
        return Vec::new();
    };
    let Some(packages) = v["packages"].as_object() else {
        return Vec::new();
    };
    packages
        .iter()
        .filter(|(_, p)| p["hasInstallScript"] == true)
        .map(|(k, p)| Scripted {
            name: k.rsplit("node_modules/").next().unwrap_or(k).to_string(),
            path: k.clone(),
            optional: p["optional"] == true,
        })
        .collect()
}

/// Writes the release date an as-released tree was resolved at into the
/// lock's package.json (`"mcpvm": {"asReleased": …}`: npm ignores a
/// field it does not know), so the lock says how it was made.
fn record_release_date(target: &Path, e: &Entry, date: &str) -> Result<(), BuildError> {
    let path = target.join("package.json");
    let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
    let mut manifest: serde_json::Value =
        serde_json::from_str(&text).map_err(|err| BuildError::Failed {
            what: format!("reading npm's {}", path.display()),
            tail: err.to_string(),
        })?;
    manifest["mcpvm"] = serde_json::json!({
        "asReleased": date,
        "why": format!("dependencies as the registry had them when {}@{} was published (npm --before)", e.package, e.version),
    });
    let text = serde_json::to_string_pretty(&manifest).unwrap_or_default() + "\n";
    std::fs::write(&path, text).map_err(io_err(&path))
}

impl Installer for Npm {
    /// Refuses a package whose `engines` the node does not meet; a layer
    /// with a node of its own gets that node.
    fn install(&self, job: &Job, progress: &mut dyn FnMut(&str)) -> Result<Installed, BuildError> {
        let Job {
            name,
            entry: e,
            target,
            node,
            locked,
            ..
        } = *job;
        let spec = match &e.source {
            Some(src) => format!("{}@file:{}", e.package, src.display()),
            None => format!("{}@{}", e.package, e.version),
        };
        // npm runs `node`: the pinned one.
        let path = std::env::var("PATH").unwrap_or_default();
        let npm = || {
            let mut c = crate::host_env::command(node.join("bin/npm"));
            // `install_env` is not passed: it is the install
            // microVM's (host_env.rs says why).
            c.env("PATH", format!("{}:{path}", node.join("bin").display()))
                .args(["--ignore-scripts", "--no-audit", "--no-fund", "--omit=dev"])
                // Only the registry's tarballs: a dependency from git
                // or a URL is refused (npm fetches a git one by
                // cloning it on the host and may run its `prepare`
                // there; a URL is not the registry's checked copy).
                // A `file:` spec is the catalogue's own `source`.
                .args([
                    "--allow-git=none",
                    "--allow-remote=none",
                    "--allow-file=root",
                ])
                .args(["--loglevel=error", "--prefix"])
                .arg(target);
            c
        };
        // Resolve (unless locked) to package-lock.json, then install
        // that tree, each tarball checked against its integrity: the
        // first build and every rebuild take the same path.
        match locked {
            Some(lock) => copy_lock(lock, target, e)?,
            None => {
                // As released: only versions the registry had when this
                // one was published (npm's own --before), the date kept
                // in the lock's package.json.
                let before = match e.as_released {
                    true => Some(run(
                        "guest-image/runtimes/released date npm",
                        crate::host_env::command("python3")
                            .arg(job.fetchers.join("runtimes/released"))
                            .args(["date", "npm", &e.package, &e.version]),
                    )?),
                    false => None,
                };
                run(
                    &format!("npm install {spec} (resolving)"),
                    npm()
                        .args(["install", "--package-lock-only"])
                        .args(before.iter().map(|d| format!("--before={d}")))
                        // Packages after `--`: never read as options
                        // (their names are checked by `grammar` too).
                        .arg("--")
                        .arg(&spec)
                        .args(&e.pins),
                )?;
                if let Some(date) = &before {
                    record_release_date(target, e, date)?;
                }
            }
        }
        install_locked(&npm, name, &spec, progress)?;
        if e.runtime.own_node().is_some() {
            let bin = target.join(crate::catalogue::OWN_NODE).join("bin");
            std::fs::create_dir_all(&bin).map_err(io_err(&bin))?;
            std::fs::copy(node.join("bin/node"), bin.join("node")).map_err(io_err(&bin))?;
        }
        let scripted = with_install_scripts(target);
        let record = match scripted.is_empty() {
            true => None,
            false => run_install_scripts(job, &scripted, progress)?,
        };
        Ok(Installed {
            what: spec,
            bin_dir: target.join("node_modules/.bin"),
            record,
        })
    }
}

/// Runs the install scripts of `scripted` (of `job`'s tree) in a
/// microVM, with a compiler beside them when any builds native code;
/// what they did, when recorded. The lock stays the host's.
fn run_install_scripts(
    job: &Job,
    scripted: &[Scripted],
    progress: &mut dyn FnMut(&str),
) -> Result<Option<crate::sandbox::InstallRecord>, BuildError> {
    let Job {
        name,
        entry: e,
        target,
        scripts: (runtime, sandbox),
        ..
    } = *job;
    let names: Vec<&str> = scripted.iter().map(|s| s.name.as_str()).collect();
    let list = names.join(", ");
    if e.ignore_scripts {
        progress(&format!(
            "{name}: not running the install scripts of {list} (ignore_scripts)"
        ));
        return Ok(None);
    }
    progress(&format!(
        "{name}: install scripts of {list}: running them in a microVM"
    ));
    let native = native(target, scripted);
    let mut layers = Vec::new();
    if !native.is_empty() {
        let names: Vec<&str> = native.iter().map(|s| s.name.as_str()).collect();
        progress(&format!(
            "{name}: {} build native code (binding.gyp): a compiler joins that microVM, not the server's layer",
            names.join(", ")
        ));
        layers.push(build_tools(job, progress)?);
    }
    let shell = npm_rebuild_line(e.runtime.own_node().is_some(), !layers.is_empty(), scripted);
    let script_job = ScriptJob {
        server: name,
        stage: target,
        runtime,
        layers,
        mem_mib: None,
        env: &e.install_env,
        shell,
        record: true,
    };
    // The lock is the host's resolution: what comes back from the guest
    // does not get to rewrite it.
    let lock: Vec<(&str, Vec<u8>)> = crate::lock::files(e.runtime)
        .iter()
        .map(|f| Ok((*f, std::fs::read(target.join(f))?)))
        .collect::<std::io::Result<_>>()
        .map_err(io_err(target))?;
    let record = sandbox
        .run(&script_job, progress)
        .map_err(|tail| BuildError::Failed {
            what: format!("the install scripts of {list} (in a microVM)"),
            tail,
        })?;
    for (f, bytes) in lock {
        std::fs::write(target.join(f), bytes).map_err(io_err(target))?;
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCK: &str = r#"{"packages": {
        "": {"name": "x"},
        "node_modules/ssh2": {"version": "1.16.0", "hasInstallScript": true},
        "node_modules/cpu-features": {"version": "0.0.10", "hasInstallScript": true, "optional": true},
        "node_modules/a/node_modules/keytar": {"version": "7.9.0", "hasInstallScript": true},
        "node_modules/plain": {"version": "1.0.0"}
    }}"#;

    #[test]
    fn optional_dependencies_are_rebuilt_first_and_dropped_when_their_script_fails() {
        let s = scripted_in(LOCK);
        assert_eq!(s.len(), 3);
        let line = npm_rebuild_line(false, false, &s);
        assert_eq!(
            line,
            "cd /workspace && { npm rebuild --foreground-scripts --no-audit --no-fund --no-update-notifier cpu-features || { echo 'mcpvm: cpu-features, an optional dependency: its install script failed; dropped, as npm does' >&2; rm -rf -- node_modules/cpu-features; }; } && exec npm rebuild --foreground-scripts --no-audit --no-fund --no-update-notifier keytar ssh2"
        );
        // The shell runs it as meant.
        let out = std::process::Command::new("sh")
            .args(["-n", "-c", &line])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }

    #[test]
    fn a_package_with_a_binding_gyp_builds_native_code_with_the_tools_named() {
        let dir = tempfile::tempdir().unwrap();
        let s = scripted_in(LOCK);
        let keytar = dir.path().join("node_modules/a/node_modules/keytar");
        std::fs::create_dir_all(&keytar).unwrap();
        std::fs::write(keytar.join("binding.gyp"), "{}").unwrap();
        std::fs::create_dir_all(dir.path().join("node_modules/ssh2")).unwrap();
        let found: Vec<&str> = native(dir.path(), &s)
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(found, ["keytar"]);
        let line = npm_rebuild_line(false, true, &s);
        assert!(
            line.starts_with(
                "cd /workspace && export CC=gcc CXX=g++ npm_config_nodedir=/opt/build-tools/node PYTHONDONTWRITEBYTECODE=1 && "
            ),
            "{line}"
        );
    }

    #[test]
    fn without_optional_dependencies_the_tree_is_rebuilt_as_one() {
        let required: Vec<Scripted> = scripted_in(LOCK)
            .into_iter()
            .filter(|s| !s.optional)
            .collect();
        assert_eq!(
            npm_rebuild_line(true, false, &required),
            "cd /workspace && export PATH=/workspace/.mcpvm-node/bin:$PATH && exec npm rebuild --foreground-scripts --no-audit --no-fund --no-update-notifier"
        );
        // A name npm would not give is not handed to a shell.
        let odd = vec![Scripted {
            name: "x;reboot".into(),
            path: "node_modules/x".into(),
            optional: true,
        }];
        assert!(npm_rebuild_line(false, false, &odd).ends_with(
            "exec npm rebuild --foreground-scripts --no-audit --no-fund --no-update-notifier"
        ));
        // Nor a path that would remove something outside node_modules.
        for path in [
            "node_modules/../../etc",
            "lib/x",
            "/node_modules/x",
            "node_modules//x",
        ] {
            let climbing = vec![Scripted {
                name: "x".into(),
                path: path.into(),
                optional: true,
            }];
            let line = npm_rebuild_line(false, false, &climbing);
            assert!(!line.contains("rm -rf"), "{path}: {line}");
        }
    }
}
