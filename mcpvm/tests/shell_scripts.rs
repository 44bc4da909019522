//! The shell scripts that handle names from a catalogue, a journal or a
//! server (benches/, deploy/): shellcheck passes over every one of them,
//! and a name that is shell code is refused before anything runs, never
//! run (docs/security.md, round 4, item 7).

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every shell script under benches/ and deploy/ (by its first line).
fn scripts() -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![repo().join("benches"), repo().join("deploy")];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let head: String = std::fs::read_to_string(&path)
                .unwrap_or_default()
                .lines()
                .next()
                .unwrap_or_default()
                .to_string();
            let shell = head.starts_with("#!") && (head.contains("sh") && !head.contains("python"))
                || head.contains("shellcheck shell=");
            if shell {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

#[test]
fn shellcheck_finds_nothing_in_the_benches_and_deploy_scripts() {
    let scripts = scripts();
    assert!(scripts.len() > 20, "{scripts:?}");
    assert!(scripts.iter().any(|s| s.ends_with("benches/ecosystem.sh")));
    assert!(scripts.iter().any(|s| s.ends_with("benches/lib/names.sh")));
    let out = Command::new("shellcheck")
        .args(["--severity=warning", "--external-sources"])
        .args(&scripts)
        .output()
        .expect("shellcheck is not installed: scripts/setup --tests installs it");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A catalogue whose section name is a command substitution: the old
/// ecosystem.sh pasted it into the testbed's scenario, whose shell ran
/// it (on the host itself with MCPVM_TESTBED=direct).
#[test]
fn a_server_name_that_is_shell_code_is_refused_and_never_run() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let catalogue = dir.path().join("hostile.toml");
    std::fs::write(
        &catalogue,
        format!(
            "[servers.\"z$(touch {m})\"]\npackage = \"x\"\nversion = \"1.0.0\"\nruntime = \"node\"\ncommand = \"x\"\n\n[servers.\"z$(touch {m})\".env]\nA = \"1\"\n\n[servers.\"y`touch {m}`\"]\npackage = \"x\"\nversion = \"1.0.0\"\nruntime = \"node\"\ncommand = \"x\"\n",
            m = marker.display()
        ),
    )
    .unwrap();
    let run = |script: &str, args: &[String], env: &[(&str, &Path)]| {
        let out = Command::new(repo().join(script))
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, *v)))
            // Nothing may be built or booted before the names are checked.
            .env("MCPVM_TESTBED", "direct")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (rc, said) = run(
        "benches/ecosystem.sh",
        &[],
        &[("MCPVM_ECOSYSTEM_CATALOGUE", &catalogue)],
    );
    assert_eq!(rc, Some(1), "{said}");
    assert!(said.contains("is not a server name"), "{said}");
    assert!(!said.contains("build:"), "nothing is built first: {said}");
    // An entry's sub-table is part of it, not a server of its own.
    assert!(!said.contains(".env"), "{said}");
    let (rc, said) = run(
        "benches/ecosystem.sh",
        &[format!("memory,x;touch {}", marker.display())],
        &[],
    );
    assert_eq!(rc, Some(1), "{said}");
    let (rc, said) = run(
        "benches/security.sh",
        &["memory".into(), format!("$(touch {})", marker.display())],
        &[],
    );
    assert_eq!(rc, Some(1), "{said}");
    assert!(said.contains("is not a server name"), "{said}");
    assert!(!marker.exists(), "a name was run as a command");
}

/// A journal resumed with other servers than its own is refused before
/// anything is built (the audit inside the testbed refused it only after
/// the layers' minutes).
#[test]
fn a_resume_with_other_servers_is_refused_before_building() {
    let dir = tempfile::tempdir().unwrap();
    let run = |resume: &Path| {
        let out = Command::new(repo().join("benches/ecosystem.sh"))
            .arg("time")
            .env("MCPVM_ECOSYSTEM_RESUME", resume)
            .env("MCPVM_TESTBED", "direct")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (rc, said) = run(dir.path());
    assert_eq!(rc, Some(1), "{said}");
    assert!(said.contains("holds no audit.json"), "{said}");
    std::fs::create_dir(dir.path().join("shard-0")).unwrap();
    std::fs::write(
        dir.path().join("shard-0/audit.json"),
        r#"{"servers": {"git": {}, "time": {}}}"#,
    )
    .unwrap();
    let (rc, said) = run(dir.path());
    assert_eq!(rc, Some(1), "{said}");
    assert!(
        said.contains("in its journal, not given: git")
            && said.contains("resume with its servers: git,time"),
        "{said}"
    );
    assert!(!said.contains("build:"), "nothing is built first: {said}");
}

/// The side-by-side bench refuses a BEFORE or an after commit that is not
/// one of the repository's before checking out or building anything (a
/// typo would otherwise cost a build, or a worktree of the wrong thing).
#[test]
fn side_by_side_refuses_what_is_not_a_commit_before_building() {
    let run = |before: &str, after: Option<&str>| {
        let mut c = Command::new(repo().join("benches/side-by-side.sh"));
        c.arg(before).env("MCPVM_CACHE", "/nonexistent/mcpvm-cache");
        if let Some(a) = after {
            c.env("MCPVM_SIDE_AFTER", a);
        }
        let out = c.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (rc, said) = run("no-such-commit", None);
    assert_eq!(rc, Some(1), "{said}");
    assert!(said.contains("no-such-commit is not a commit"), "{said}");
    let (rc, said) = run("HEAD", Some("$(no-such)"));
    assert_eq!(rc, Some(1), "{said}");
    assert!(
        said.contains("MCPVM_SIDE_AFTER=\\$\\(no-such\\) is not a commit"),
        "{said}"
    );
    assert!(!said.contains("build:"), "nothing is built first: {said}");
}
