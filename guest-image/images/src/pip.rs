//! Python servers: the package installed by the host's pip (python
//! 3.11, the image's) into the layer's directory, wheels only (installing
//! a wheel runs none of its code; building an sdist would run its setup
//! on the host), resolved to a `requirements.lock` and installed from it
//! by hash; then byte-compiled. A dependency PyPI has only as a source
//! distribution, named in the entry's `sdists`, is built into a wheel in
//! the install microVM first ([`build_sdists`]).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::catalogue::Entry;

use crate::install::{copy_lock, Installed, Installer, Job};
use crate::process::{io_err, run, BuildError};
use crate::sandbox::{InstallRecord, ScriptJob};

pub struct Pip;

/// The release's date from PyPI (its earliest upload) and the pinned
/// uv, by the embedded `runtimes/released` script.
fn released(fetchers: &Path, args: &[&str]) -> Result<String, BuildError> {
    run(
        &format!("guest-image/runtimes/released {}", args.join(" ")),
        crate::host_env::command("python3")
            .arg(fetchers.join("runtimes/released"))
            .args(args),
    )
}

/// `spec`'s tree as it was when its version was published: resolved by
/// uv with `--exclude-newer` at PyPI's upload time of that version, for
/// the image's python (3.11, glibc 2.36), wheels only, every file's hash
/// kept. The lock says the date and how it was made; pip then installs
/// it by hash as every lock.
fn resolve_as_released(
    fetchers: &Path,
    e: &Entry,
    spec: &str,
    input: &Path,
) -> Result<String, BuildError> {
    let date = released(fetchers, &["date", "pypi", &e.package, &e.version])?;
    let uv = released(fetchers, &["uv"])?;
    let wanted: Vec<&str> = std::iter::once(spec)
        .chain(e.pins.iter().map(String::as_str))
        .collect();
    std::fs::write(input, wanted.join("\n") + "\n").map_err(io_err(input))?;
    let resolved = run(
        &format!("resolving {spec} as released on {date} (uv pip compile --exclude-newer)"),
        crate::host_env::command(&uv)
            .args(["pip", "compile", "--quiet", "--no-config", "--no-header"])
            .args([
                "--no-annotate",
                "--generate-hashes",
                "--only-binary",
                ":all:",
            ])
            .args(["--python-version", "3.11", "--python-platform"])
            .args(["x86_64-manylinux_2_36", "--exclude-newer", &date])
            .arg(input),
    );
    let _ = std::fs::remove_file(input);
    let text = resolved?;
    if !text.contains("--hash=sha256:") {
        return Err(BuildError::Failed {
            what: format!("resolving {spec} as released on {date}"),
            tail: "uv's lock names no hashed wheels".into(),
        });
    }
    Ok(format!(
        "# as released: {date} (PyPI's upload of {}=={}); resolved with uv --exclude-newer\n{text}\n",
        e.package, e.version
    ))
}

/// Source distributions built into wheels in the install microVM.
struct Built {
    /// Where the wheels are (pip's `--find-links`).
    wheels: PathBuf,
    /// One lock comment per sdist: what was built, from which file.
    comments: Vec<String>,
    /// Their names, normalised (PEP 503), to keep out of the hashed lock.
    names: Vec<String>,
    record: Option<InstallRecord>,
}

/// PEP 503's normal form of a distribution name.
fn normal(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        match c {
            '-' | '_' | '.' => {
                if !out.ends_with('-') {
                    out.push('-');
                }
            }
            c => out.push(c.to_ascii_lowercase()),
        }
    }
    out
}

/// The lock comment naming an sdist and the file it was built from.
fn sdist_comment(pin: &str, file: &str, sha256: &str) -> String {
    format!("# sdist {pin} {file} sha256:{sha256}: built into a wheel in the install microVM")
}

/// The sha256 a kept lock recorded for `pin`'s sdist, if any.
fn locked_sdist_sha<'l>(lock: &'l str, pin: &str) -> Option<&'l str> {
    lock.lines()
        .find_map(|l| l.strip_prefix(&format!("# sdist {pin} ")))?
        .split_whitespace()
        .find_map(|w| w.strip_prefix("sha256:"))
        .map(|w| w.trim_end_matches(':'))
}

/// Fetches each of the entry's `sdists` from PyPI (checked against its
/// sha256, and against the kept lock's), with the wheels of the build
/// requirements they declare, and builds them in the install microVM:
/// the sdists' own code runs there, recorded, never on the host.
fn build_sdists(
    job: &Job,
    work: &Path,
    kept: Option<&str>,
    progress: &mut dyn FnMut(&str),
) -> Result<Built, BuildError> {
    let e = job.entry;
    let _ = std::fs::remove_dir_all(work);
    let (sdist, deps) = (work.join("sdist"), work.join("deps"));
    std::fs::create_dir_all(&deps).map_err(io_err(&deps))?;
    let mut comments = Vec::new();
    let mut names = Vec::new();
    let mut requires: Vec<String> = Vec::new();
    for pin in &e.sdists {
        let (name, version) = pin.split_once("==").unwrap_or((pin, ""));
        let said = run(
            &format!("guest-image/runtimes/fetch-sdist {name} {version}"),
            crate::host_env::command("python3")
                .arg(job.fetchers.join("runtimes/fetch-sdist"))
                .args([name, version])
                .arg(&sdist),
        )?;
        let v: serde_json::Value =
            serde_json::from_str(&said).map_err(|err| BuildError::Failed {
                what: format!("fetching {pin}'s sdist"),
                tail: err.to_string(),
            })?;
        let (file, sha) = (
            v["file"].as_str().unwrap_or_default(),
            v["sha256"].as_str().unwrap_or_default(),
        );
        if let Some(want) = kept.and_then(|l| locked_sdist_sha(l, pin)) {
            if want != sha {
                return Err(BuildError::Failed {
                    what: format!("fetching {pin}'s sdist"),
                    tail: format!("{file} is sha256:{sha} on PyPI now; the lock was made from sha256:{want}: refusing it (mcpvm image build --update resolves again)"),
                });
            }
        }
        for r in v["requires"].as_array().into_iter().flatten() {
            let r = r.as_str().unwrap_or_default().to_string();
            if !requires.contains(&r) {
                requires.push(r);
            }
        }
        comments.push(sdist_comment(pin, file, sha));
        names.push(normal(name));
    }
    progress(&format!(
        "{}: building {} from source in a microVM (no network; build requirements {} as wheels)",
        job.name,
        e.sdists.join(", "),
        requires.join(", ")
    ));
    wheels_for_the_build(&deps, &work.join("pip"), &requires)?;
    let (runtime, sandbox) = job.scripts;
    // pip builds each sdist in an isolated environment of its build
    // requirements from deps/ (PEP 517 even for a bare setup.py, whose
    // requirements are then setuptools and wheel). Run from its wheel it
    // skips making a venv and installing pip into it (ensurepip): 62 s
    // in the testbed against 111 s (docs/catalogue.md). A fixed
    // SOURCE_DATE_EPOCH keeps the wheels' dates fixed.
    let shell = "cd /workspace && export HOME=/tmp PIP_NO_CACHE_DIR=1 \
         PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1 SOURCE_DATE_EPOCH=315532800 \
         && python3 pip/pip.whl/pip wheel --use-pep517 --no-deps --no-index --find-links deps \
         --wheel-dir out sdist/*.tar.gz && rm -rf sdist deps pip"
        .to_string();
    let record = sandbox
        .run(
            &ScriptJob {
                server: job.name,
                stage: work,
                runtime,
                layers: Vec::new(),
                mem_mib: None,
                env: &e.install_env,
                shell,
                record: true,
            },
            progress,
        )
        .map_err(|tail| BuildError::Failed {
            what: format!("building {} (in a microVM)", e.sdists.join(", ")),
            tail,
        })?;
    // What came back must be the wheels asked for, by name and version.
    let wheels = work.join("out");
    for pin in &e.sdists {
        let (name, version) = pin.split_once("==").unwrap_or((pin, ""));
        let prefix = format!("{}-{version}-", normal(name).replace('-', "_"));
        let found = std::fs::read_dir(&wheels)
            .into_iter()
            .flatten()
            .flatten()
            .any(|w| {
                let f = w.file_name().to_string_lossy().to_lowercase();
                f.starts_with(&prefix) && f.ends_with(".whl")
            });
        if !found {
            return Err(BuildError::Failed {
                what: format!("building {pin} (in a microVM)"),
                tail: format!("no wheel {prefix}….whl came back"),
            });
        }
    }
    Ok(Built {
        wheels,
        comments,
        names,
        record,
    })
}

/// Into `deps`, the wheels of the sdists' build `requires`; into `tool`,
/// pip's own wheel as `pip.whl`. Wheels only: installing them runs none
/// of their code here. The image has python, not pip: pip's own wheel
/// runs pip (a wheel is a zip python imports from), under a fixed name
/// so that no registry-chosen name reaches the guest's shell.
fn wheels_for_the_build(deps: &Path, tool: &Path, requires: &[String]) -> Result<(), BuildError> {
    let download = |what: &str, dest: &Path, names: &[String]| {
        run(
            &format!("pip download ({what}, wheels only)"),
            crate::host_env::command("/usr/bin/python3")
                .args([
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .args(["--only-binary=:all:", "--dest"])
                .arg(dest)
                .arg("--")
                .args(names),
        )
    };
    download("the sdists' build requirements", deps, requires)?;
    download("pip itself", tool, &["pip".to_string()])?;
    let wheel = std::fs::read_dir(tool)
        .map_err(io_err(tool))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| BuildError::Failed {
            what: "pip download (pip itself, wheels only)".into(),
            tail: "no wheel of pip came back".into(),
        })?;
    let fixed = tool.join("pip.whl");
    std::fs::rename(&wheel, &fixed).map_err(io_err(&wheel))?;
    Ok(())
}

/// The hashed lock without the sdist-built packages (their wheels are
/// built anew each time; the lock names the sdist they come from).
fn lock_without_built(lock: &str, built: &Built) -> String {
    let mut lines: Vec<String> = built.comments.clone();
    for l in lock.lines() {
        let name = l
            .split(|c: char| c == '=' || c == ' ' || c == '@')
            .next()
            .unwrap_or_default();
        if !l.starts_with("# sdist ") && !built.names.contains(&normal(name)) {
            lines.push(l.to_string());
        }
    }
    lines.join("\n") + "\n"
}

impl Installer for Pip {
    fn install(&self, job: &Job, progress: &mut dyn FnMut(&str)) -> Result<Installed, BuildError> {
        let Job {
            entry: e,
            target,
            locked,
            ..
        } = *job;
        let extras = match e.extras.is_empty() {
            true => String::new(),
            false => format!("[{}]", e.extras.join(",")),
        };
        let spec = match &e.source {
            Some(src) => format!("{}{extras} @ file://{}", e.package, src.display()),
            None => format!("{}{extras}=={}", e.package, e.version),
        };
        let kept = locked.and_then(|l| std::fs::read_to_string(l.join("requirements.lock")).ok());
        // The sdists' work: fetched files, build requirements, wheels.
        let work = job.stage.with_extension("sdists");
        let built = match e.sdists.is_empty() {
            true => Ok(None),
            false => build_sdists(job, &work, kept.as_deref(), progress).map(Some),
        };
        let r = built.and_then(|b| install_wheels(job, &spec, b.as_ref()).map(|()| b));
        let _ = std::fs::remove_dir_all(&work);
        let built = r?;
        Ok(Installed {
            what: spec,
            bin_dir: target.join("bin"),
            // Wheels only: nothing of the package runs at install; an
            // sdist's build ran in its microVM, recorded.
            record: built.and_then(|b| b.record),
        })
    }
}

/// Resolves (unless locked) and installs the wheels, the ones built from
/// sdists among them.
fn install_wheels(job: &Job, spec: &str, built: Option<&Built>) -> Result<(), BuildError> {
    let Job {
        entry: e,
        stage,
        target,
        locked,
        ..
    } = *job;
    {
        // The host's python 3.11 is the image's: scripts get
        // #!/usr/bin/python3 and modules land in <dir> (PYTHONPATH).
        // Wheels only: installing one runs none of its code, building
        // an sdist would run its setup on the host.
        let pip = || {
            let mut c = crate::host_env::command("/usr/bin/python3");
            c.args(["-m", "pip", "install", "--quiet"])
                .args(["--disable-pip-version-check", "--only-binary=:all:"])
                .args(["--no-warn-script-location", "--no-compile", "--target"])
                .arg(target);
            if let Some(b) = built {
                c.arg("--find-links").arg(&b.wheels);
            }
            c
        };
        // Resolve (unless locked) to requirements.lock, then install
        // exactly those wheels by hash, as every rebuild does.
        let lock_file = target.join("requirements.lock");
        match locked {
            Some(lock) => copy_lock(lock, target, e)?,
            None if e.as_released => {
                let input = stage.with_extension("as-released.in");
                let lock = resolve_as_released(job.fetchers, e, &spec, &input)?;
                std::fs::write(&lock_file, lock).map_err(io_err(&lock_file))?;
            }
            None => {
                let report = stage.with_extension("pip-report.json");
                let ran = run(
                    &format!("pip install {spec} (wheels only, resolving)"),
                    pip()
                        .args(["--dry-run", "--ignore-installed", "--report"])
                        .arg(&report)
                        // Requirements after `--`: never read as options
                        // (their names are checked by `grammar` too).
                        .arg("--")
                        .arg(&spec)
                        .args(&e.pins),
                );
                let text = std::fs::read_to_string(&report).unwrap_or_default();
                let _ = std::fs::remove_file(&report);
                ran?;
                let mut lock = crate::lock::requirements_from_report(&text).ok_or_else(|| {
                    BuildError::Failed {
                        what: format!("locking {spec}"),
                        tail: "pip's installation report names no hashed wheels".into(),
                    }
                })?;
                if let Some(b) = built {
                    lock = lock_without_built(&lock, b);
                }
                std::fs::write(&lock_file, lock).map_err(io_err(&lock_file))?;
            }
        }
        run(
            &format!("pip install {spec} (wheels only)"),
            pip()
                .args(["--no-deps", "--require-hashes", "-r"])
                .arg(&lock_file),
        )?;
        if built.is_some() {
            // The wheels just built, by the exact pins they were built
            // for, from nowhere else.
            run(
                &format!("pip install {} (built from sdists)", e.sdists.join(", ")),
                pip()
                    .args(["--no-deps", "--no-index", "--"])
                    .args(&e.sdists),
            )?;
        }
        // Byte-code checked by hash: layers have fixed timestamps, and
        // without it every start compiles every import again. Files
        // that do not compile (templates, python 2 leftovers in some
        // packages) are skipped, as pip itself does.
        let _ = crate::host_env::command("/usr/bin/python3")
            .args(["-m", "compileall", "-q", "-j", "0"])
            .args(["--invalidation-mode", "unchecked-hash", "-s"])
            .arg(stage)
            .args(["-p", "/"])
            .arg(target)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_compared_in_pep_503_form() {
        assert_eq!(normal("Proxy__Tools.x"), "proxy-tools-x");
        assert_eq!(normal("proxy-tools"), normal("proxy_tools"));
    }

    #[test]
    fn the_lock_names_the_sdist_a_wheel_was_built_from_not_the_wheel() {
        let built = Built {
            wheels: PathBuf::from("/w/out"),
            comments: vec![sdist_comment(
                "proxy_tools==0.1.0",
                "proxy_tools-0.1.0.tar.gz",
                "ccb3",
            )],
            names: vec![normal("proxy_tools")],
            record: None,
        };
        let lock = "bottle==0.13.4 --hash=sha256:aa\n\
                    proxy-tools @ file:///w/out/proxy_tools-0.1.0-py3-none-any.whl --hash=sha256:bb\n\
                    pywebview==5.4 --hash=sha256:cc\n";
        let kept = lock_without_built(lock, &built);
        assert_eq!(
            kept,
            "# sdist proxy_tools==0.1.0 proxy_tools-0.1.0.tar.gz sha256:ccb3: built into a wheel in the install microVM\n\
             bottle==0.13.4 --hash=sha256:aa\n\
             pywebview==5.4 --hash=sha256:cc\n"
        );
        assert_eq!(locked_sdist_sha(&kept, "proxy_tools==0.1.0"), Some("ccb3"));
        assert_eq!(locked_sdist_sha(&kept, "other==1.0"), None);
        // Made again from a kept lock, the comment is not doubled.
        assert_eq!(lock_without_built(&kept, &built), kept);
    }
}
