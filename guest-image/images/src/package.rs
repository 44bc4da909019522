//! A server named on the command line instead of in a catalogue:
//! `npm:NAME@VERSION`, `pypi:NAME==VERSION` or `cargo:NAME@VERSION`
//! (`mcpvm run --package`).
//! It becomes a catalogue entry of its own, with no command: the build
//! takes the package's own executable ([`own_command`]) and the store
//! remembers it.

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::catalogue::{Entry, Runtime, Transport};

const FORMS: &str = "npm:NAME@VERSION, pypi:NAME==VERSION or cargo:NAME@VERSION, with an exact version (e.g. npm:@modelcontextprotocol/server-memory@2026.8.31, pypi:mcp-server-time==2026.10.19)";

/// The entry for `spec` and the name its layer is stored under
/// (`npm-…`/`pypi-…`, from the package's name and version).
pub fn entry(spec: &str) -> Result<(String, Entry), String> {
    spec_entry(spec).map_err(|why| format!("--package '{spec}': {why}; give {FORMS}"))
}

/// [`entry`], its error only what is wrong with `spec` (for a caller
/// whose input was not a `--package`: a registry listing).
pub fn spec_entry(spec: &str) -> Result<(String, Entry), String> {
    let bad = |why: &str| why.to_string();
    let (kind, rest) = spec.split_once(':').ok_or_else(|| bad("no kind"))?;
    let (package, version, runtime) = match kind {
        // A scope's '@' is the name's first character.
        "npm" => match rest.get(1..).and_then(|r| r.rsplit_once('@')) {
            Some((name, v)) => (format!("{}{name}", &rest[..1]), v, Runtime::Node),
            None => return Err(bad("no @VERSION")),
        },
        "pypi" => match rest.split_once("==") {
            Some((name, v)) => (name.to_string(), v, Runtime::Python),
            None => return Err(bad("no ==VERSION")),
        },
        // Crate names: ASCII letters, digits, '-' and '_'.
        "cargo" => match rest.split_once('@') {
            Some((name, v)) if !name.contains(['/', '.', '@']) => {
                (name.to_string(), v, Runtime::Cargo)
            }
            Some(_) => return Err(bad("a crate's name has no '/', '.' or '@'")),
            None => return Err(bad("no @VERSION")),
        },
        other => return Err(bad(&format!("'{other}' is not a kind of package"))),
    };
    // Each registry's own grammar (`grammar`): a name is never an
    // option of npm or pip, a version one release, never a tag or range.
    if !runtime.is_name(&package) {
        return Err(bad(&format!("'{package}' is not a package name")));
    }
    if !runtime.is_exact(version) {
        return Err(bad(&format!(
            "'{version}' is not an exact version (tags such as latest and ranges such as 1 or 1.x name whatever the registry holds on the day)"
        )));
    }
    let name = store_name(kind, &package, version);
    let e = Entry {
        package,
        version: version.to_string(),
        source: None,
        runtime,
        command: String::new(),
        args: Vec::new(),
        env: Default::default(),
        transport: Transport::Stdio,
        port: None,
        network: Vec::new(),
        credentials: Vec::new(),
        dummy_files: Default::default(),
        setup: None,
        root: false,
        pins: Vec::new(),
        install_env: Default::default(),
        ignore_scripts: false,
        as_released: false,
        extras: Vec::new(),
        apt: Vec::new(),
        build_apt: Vec::new(),
        sdists: Vec::new(),
        needs: Vec::new(),
        roots: Vec::new(),
        audit_calls: Default::default(),
        notes: Some(format!("from --package {spec}")),
    };
    Ok((name, e))
}

/// `spec`'s entry resolved as released (`--as-released`): stored under a
/// name of its own, so that it and today's tree keep a layer each.
pub fn entry_as_released(spec: &str) -> Result<(String, Entry), String> {
    let (_, mut e) = entry(spec)?;
    let kind = match e.runtime {
        Runtime::Python => "pypi",
        Runtime::Cargo => {
            return Err(format!(
                "--as-released '{spec}': applies to npm and PyPI packages (a crate's tree is its Cargo.lock)"
            ))
        }
        _ => "npm",
    };
    e.as_released = true;
    let name = store_name(kind, &e.package, &format!("{}-as-released", e.version));
    Ok((name, e))
}

/// `npm-modelcontextprotocol-server-memory-2026-8-31`: a catalogue name
/// (lowercase, digits, '-', at most 64), shortened with a hash when long.
fn store_name(kind: &str, package: &str, version: &str) -> String {
    let mut slug = String::new();
    for c in format!("{kind}-{package}-{version}").chars() {
        match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9') => slug.push(c),
            _ if !slug.ends_with('-') => slug.push('-'),
            _ => {}
        }
    }
    let slug = slug.trim_end_matches('-').to_string();
    if slug.len() <= 64 {
        return slug;
    }
    let h: String = Sha256::digest(slug.as_bytes())[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{}-{h}", slug[..51].trim_end_matches('-'))
}

/// The package's own executables: npm's `bin` of the package itself, or
/// its wheel's console scripts (not its dependencies').
fn executables(target: &Path, e: &Entry) -> Vec<String> {
    match e.runtime {
        // The build puts exactly the crate's binaries in bin/.
        Runtime::Cargo => {
            let mut bins: Vec<String> = std::fs::read_dir(target.join("bin"))
                .into_iter()
                .flatten()
                .flatten()
                .map(|d| d.file_name().to_string_lossy().to_string())
                .collect();
            bins.sort();
            bins
        }
        Runtime::Python => {
            let want = normalize(&e.package);
            let dist = std::fs::read_dir(target)
                .into_iter()
                .flatten()
                .flatten()
                .find(|d| {
                    let n = d.file_name().to_string_lossy().to_string();
                    n.strip_suffix(".dist-info")
                        .and_then(|n| n.rsplit_once('-'))
                        .is_some_and(|(p, _)| normalize(p) == want)
                });
            let text = dist
                .and_then(|d| std::fs::read_to_string(d.path().join("entry_points.txt")).ok())
                .unwrap_or_default();
            let mut in_scripts = false;
            let mut out = Vec::new();
            for line in text.lines().map(str::trim) {
                if line.starts_with('[') {
                    in_scripts = line == "[console_scripts]";
                } else if let Some((name, _)) = line.split_once('=').filter(|_| in_scripts) {
                    out.push(name.trim().to_string());
                }
            }
            out
        }
        _ => {
            let manifest = target
                .join("node_modules")
                .join(&e.package)
                .join("package.json");
            let v: serde_json::Value = std::fs::read_to_string(manifest)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default();
            // Named as npm links them into node_modules/.bin: a scoped
            // name (`"bin": {"@scope/x": …}`) by its last part.
            match &v["bin"] {
                serde_json::Value::String(_) => vec![unscoped(&e.package).to_string()],
                serde_json::Value::Object(m) => m.keys().map(|k| unscoped(k).to_string()).collect(),
                _ => Vec::new(),
            }
        }
    }
}

fn normalize(name: &str) -> String {
    name.to_ascii_lowercase().replace(['-', '.'], "_")
}

fn unscoped(package: &str) -> &str {
    package.rsplit('/').next().unwrap_or(package)
}

/// What a package's build says when it has no executable at all: a
/// library, not a server (the audit's `not_a_server`).
pub const NO_EXECUTABLE: &str = "has no executable to run as a server";

/// The one executable a package without a catalogued `command` runs:
/// its only one, or the one named like the package. Err lists them.
pub fn own_command(target: &Path, e: &Entry) -> Result<String, String> {
    let found = executables(target, e);
    if let [one] = found.as_slice() {
        return Ok(one.clone());
    }
    let base = unscoped(&e.package);
    if let Some(same) = found.iter().find(|c| normalize(c) == normalize(base)) {
        return Ok(same.clone());
    }
    Err(match found.is_empty() {
        true => format!("{} {} {NO_EXECUTABLE}", e.package, e.version),
        false => format!(
            "{} {} has several executables ({}); name one as `command` in a catalogue entry (docs/catalogue.md)",
            e.package,
            e.version,
            found.join(", ")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_name_a_package_at_an_exact_version() {
        let (name, e) = entry("npm:@modelcontextprotocol/server-memory@2026.8.31").unwrap();
        assert_eq!(name, "npm-modelcontextprotocol-server-memory-2026-8-31");
        assert_eq!(
            (e.package.as_str(), e.version.as_str(), e.runtime),
            (
                "@modelcontextprotocol/server-memory",
                "2026.8.31",
                Runtime::Node
            )
        );
        assert!(e.command.is_empty());
        let (name, e) = entry("npm:left-pad@1.3.0").unwrap();
        assert_eq!(
            (name.as_str(), e.package.as_str()),
            ("npm-left-pad-1-3-0", "left-pad")
        );
        let (name, e) = entry("pypi:mcp-server-time==2026.10.19").unwrap();
        assert_eq!(name, "pypi-mcp-server-time-2026-10-19");
        let (cname, c) = entry("cargo:mcp-server-x@0.3.1").unwrap();
        assert_eq!(cname, "cargo-mcp-server-x-0-3-1");
        assert_eq!(
            (c.package.as_str(), c.runtime),
            ("mcp-server-x", Runtime::Cargo)
        );
        assert!(entry("cargo:a/b@1.0.0").unwrap_err().contains("no '/'"));
        assert!(entry("cargo:x@^1")
            .unwrap_err()
            .contains("not an exact version"));
        assert_eq!(e.runtime, Runtime::Python);
        let long = format!("npm:{}@1.0.0", "a".repeat(80));
        let (name, _) = entry(&long).unwrap();
        assert!(name.len() <= 64 && name.starts_with("npm-aaa"), "{name}");
        assert_ne!(
            name,
            entry(&format!("npm:{}@1.0.0", "a".repeat(81))).unwrap().0
        );

        for (bad, why) in [
            ("memory", "no kind"),
            ("npm:left-pad", "no @VERSION"),
            ("npm:@scope/pkg", "no @VERSION"),
            ("npm:left-pad@^1.3", "not an exact version"),
            ("npm:left-pad@latest@", "not a package name"),
            ("pypi:mcp-server-time>=1", "no ==VERSION"),
            ("pypi:==1.0", "not a package name"),
            ("npm:a b@1.0.0", "not a package name"),
            // Tags and ranges the registry resolves on the day.
            (
                "npm:@modelcontextprotocol/server-memory@latest",
                "not an exact version",
            ),
            ("npm:left-pad@next", "not an exact version"),
            ("npm:left-pad@1", "not an exact version"),
            ("npm:left-pad@1.x", "not an exact version"),
            ("pypi:mcp-server-time==1.*", "not an exact version"),
            ("pypi:mcp-server-time==latest", "not an exact version"),
            // Names npm or pip would read as their own options.
            (
                "npm:--registry=http://127.0.0.1:9/@1.0.0",
                "not a package name",
            ),
            (
                "pypi:--index-url=http://127.0.0.1:9/simple==1.0",
                "not a package name",
            ),
            ("pypi:--log=/tmp/x==1.0", "not a package name"),
            ("gem:rails@7.1.0", "'gem' is not a kind"),
        ] {
            let e = entry(bad).unwrap_err();
            assert!(
                e.contains(why) && e.contains("npm:NAME@VERSION"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn the_command_is_the_packages_own_executable() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        let (_, npm) = entry("npm:@scope/my-server@1.0.0").unwrap();
        let pkg = t.join("node_modules/@scope/my-server");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("package.json"), r#"{"bin": "dist/index.js"}"#).unwrap();
        assert_eq!(own_command(t, &npm).unwrap(), "my-server");
        std::fs::write(
            pkg.join("package.json"),
            r#"{"bin": {"a": "a.js", "my-server": "m.js"}}"#,
        )
        .unwrap();
        assert_eq!(own_command(t, &npm).unwrap(), "my-server");
        std::fs::write(
            pkg.join("package.json"),
            r#"{"bin": {"a": "a.js", "b": "b.js"}}"#,
        )
        .unwrap();
        let e = own_command(t, &npm).unwrap_err();
        assert!(e.contains("several executables (a, b)"), "{e}");
        // A scoped bin name is linked by its last part, as npm does
        // (@abhaybabbar/retellai-mcp-server 1.0.2 names its bin so).
        std::fs::write(
            pkg.join("package.json"),
            r#"{"bin": {"@scope/my-server": "build/index.js"}}"#,
        )
        .unwrap();
        assert_eq!(own_command(t, &npm).unwrap(), "my-server");
        std::fs::write(pkg.join("package.json"), r#"{}"#).unwrap();
        assert!(own_command(t, &npm).unwrap_err().contains("no executable"));

        let (_, py) = entry("pypi:mcp-server-time==2026.10.19").unwrap();
        let info = t.join("mcp_server_time-2026.10.19.dist-info");
        std::fs::create_dir_all(&info).unwrap();
        // A dependency's scripts are not the package's.
        let dep = t.join("uvicorn-0.30.0.dist-info");
        std::fs::create_dir_all(&dep).unwrap();
        std::fs::write(
            dep.join("entry_points.txt"),
            "[console_scripts]\nuvicorn = uvicorn.main:main\n",
        )
        .unwrap();
        std::fs::write(
            info.join("entry_points.txt"),
            "[gui_scripts]\nx = y:z\n\n[console_scripts]\nmcp-server-time = mcp_server_time:main\n",
        )
        .unwrap();
        assert_eq!(own_command(t, &py).unwrap(), "mcp-server-time");
    }
}
