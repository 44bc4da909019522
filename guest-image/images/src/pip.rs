//! Python servers: the package installed by the host's pip (python
//! 3.11, the image's) into the layer's directory, wheels only (installing
//! a wheel runs none of its code; building an sdist would run its setup
//! on the host), resolved to a `requirements.lock` and installed from it
//! by hash; then byte-compiled.

use std::path::Path;
use std::process::Stdio;

use crate::catalogue::Entry;

use crate::install::{copy_lock, Installed, Installer, Job};
use crate::process::{io_err, run, BuildError};

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

impl Installer for Pip {
    fn install(&self, job: &Job, _progress: &mut dyn FnMut(&str)) -> Result<Installed, BuildError> {
        let Job {
            entry: e,
            stage,
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
                let lock = crate::lock::requirements_from_report(&text).ok_or_else(|| {
                    BuildError::Failed {
                        what: format!("locking {spec}"),
                        tail: "pip's installation report names no hashed wheels".into(),
                    }
                })?;
                std::fs::write(&lock_file, lock).map_err(io_err(&lock_file))?;
            }
        }
        run(
            &format!("pip install {spec} (wheels only)"),
            pip()
                .args(["--no-deps", "--require-hashes", "-r"])
                .arg(&lock_file),
        )?;
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
        Ok(Installed {
            what: spec,
            bin_dir: target.join("bin"),
            // Wheels only: nothing of the package runs at install.
            record: None,
        })
    }
}
