//! Node servers: the package installed by the npm of the node it runs on
//! (the runtime image's, or a node of its own in the layer), resolved to
//! its `package-lock.json` and installed from it with `npm ci`, each
//! tarball checked against its integrity, with `--ignore-scripts`; the
//! tree's install scripts then run in a microVM ([`ScriptSandbox`]).

use std::path::Path;

use crate::install::{copy_lock, Installed, Installer, Job};
use crate::process::{io_err, run, BuildError};
use crate::sandbox::ScriptJob;

pub struct Npm;

/// The guest's command for a node tree installed with `--ignore-scripts`:
/// npm's own rebuild runs every package's install scripts, in order, with
/// the node the server will run on.
fn npm_rebuild_line(own_node: bool) -> String {
    let path = match own_node {
        true => format!("PATH=/workspace/{}/bin:$PATH ", crate::catalogue::OWN_NODE),
        false => String::new(),
    };
    format!("cd /workspace && {path}exec npm rebuild --foreground-scripts --no-audit --no-fund")
}

/// The packages of an npm tree (its `node_modules/.package-lock.json`)
/// that have install scripts.
pub fn with_install_scripts(target: &Path) -> Vec<String> {
    let lock = target.join("node_modules/.package-lock.json");
    let Ok(text) = std::fs::read_to_string(lock) else {
        return Vec::new();
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    let Some(packages) = v["packages"].as_object() else {
        return Vec::new();
    };
    packages
        .iter()
        .filter(|(_, p)| p["hasInstallScript"] == true)
        .map(|(k, _)| k.rsplit("node_modules/").next().unwrap_or(k).to_string())
        .collect()
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
            scripts,
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
            None => run(
                &format!("npm install {spec} (resolving)"),
                npm()
                    .args(["install", "--package-lock-only"])
                    .arg(&spec)
                    .args(&e.pins),
            )
            .map(drop)?,
        }
        run(
            &format!("npm ci {spec}"),
            npm().args(["ci", "--engine-strict"]),
        )?;
        if e.runtime.own_node().is_some() {
            let bin = target.join(crate::catalogue::OWN_NODE).join("bin");
            std::fs::create_dir_all(&bin).map_err(io_err(&bin))?;
            std::fs::copy(node.join("bin/node"), bin.join("node")).map_err(io_err(&bin))?;
        }
        let scripted = with_install_scripts(target);
        if !scripted.is_empty() {
            let list = scripted.join(", ");
            if e.ignore_scripts {
                progress(&format!(
                    "{name}: not running the install scripts of {list} (ignore_scripts)"
                ));
            } else {
                progress(&format!(
                    "{name}: install scripts of {list}: running them in a microVM"
                ));
                let (runtime, sandbox) = scripts;
                let job = ScriptJob {
                    server: name,
                    stage: target,
                    runtime,
                    layers: Vec::new(),
                    mem_mib: None,
                    env: &e.install_env,
                    shell: npm_rebuild_line(e.runtime.own_node().is_some()),
                };
                // The lock is the host's resolution: what comes back
                // from the guest does not get to rewrite it.
                let lock: Vec<(&str, Vec<u8>)> = crate::lock::files(e.runtime)
                    .iter()
                    .map(|f| Ok((*f, std::fs::read(target.join(f))?)))
                    .collect::<std::io::Result<_>>()
                    .map_err(io_err(target))?;
                sandbox
                    .run(&job, progress)
                    .map_err(|tail| BuildError::Failed {
                        what: format!("the install scripts of {list} (in a microVM)"),
                        tail,
                    })?;
                for (f, bytes) in lock {
                    std::fs::write(target.join(f), bytes).map_err(io_err(target))?;
                }
            }
        }
        Ok(Installed {
            what: spec,
            bin_dir: target.join("node_modules/.bin"),
        })
    }
}
