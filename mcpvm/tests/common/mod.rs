//! Shared helpers for tests that need built artifacts or real KVM.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Validates SARIF text against the OASIS SARIF 2.1.0 schema with a real
/// validator (tests/fixtures/sarif-validate installs it): the validator's
/// errors when it is not valid.
#[allow(dead_code)]
pub fn sarif_errors(text: &str) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("log.sarif");
    std::fs::write(&file, text).unwrap();
    let out = std::process::Command::new("python3")
        .arg(workspace().join("mcpvm/tests/fixtures/sarif-validate"))
        .arg(&file)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    match out.status.code() {
        Some(0) => None,
        Some(1) if said.contains("log.sarif: ") => Some(said),
        _ => panic!("the SARIF validator did not run: {said}"),
    }
}

/// A bench's Python script (`benches/lib/…`, from the workspace) run on
/// `args`: its standard output; a failure fails the test with its stderr.
pub fn bench_script(script: &str, args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new("python3")
        .arg(workspace().join(script))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `target/mcpvm/<rel>`, made by `scripts/build` (static binaries, kernel,
/// initramfs). A missing artifact fails the test and names the fix.
pub fn artifact(rel: &str) -> PathBuf {
    let dir = std::env::var_os("MCPVM_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/mcpvm"));
    let p = dir.join(rel);
    assert!(
        p.exists(),
        "{} is missing: run scripts/build first",
        p.display()
    );
    p
}

/// testbed `--file` arguments for `mcpvm` scenarios: the two binaries
/// (bin/mcpvm, bin/mcpvm-tools), kernel/vmlinux and initramfs-test.cpio
/// (agent, busybox, fixtures), where `mcpvm run` looks for them by default.
pub fn run_payload() -> Vec<String> {
    [
        "bin/mcpvm",
        "bin/mcpvm-tools",
        "kernel/vmlinux",
        "initramfs-test.cpio",
    ]
    .iter()
    .map(|rel| format!("{}:{rel}", artifact(rel).display()))
    .collect()
}

/// One case's results from a testbed scenario.
#[derive(Debug)]
pub struct Case {
    pub stdout: String,
    pub stderr: String,
    pub rc: i32,
}

impl Case {
    /// The last JSON line of stdout (`mcpvm --json` output).
    pub fn json(&self) -> serde_json::Value {
        let line = self
            .stdout
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .unwrap_or_else(|| {
                panic!(
                    "no JSON line in stdout:\n{}\nstderr:\n{}",
                    self.stdout, self.stderr
                )
            });
        serde_json::from_str(line).unwrap()
    }

    pub fn ms(&self, key: &str) -> Option<f64> {
        self.json()["timings_ms"][key].as_f64()
    }
}

/// What a scenario left: its cases and any other file (by name).
pub struct Results {
    pub cases: HashMap<String, Case>,
    pub files: HashMap<String, String>,
    /// Why the testbed session failed, if it did: every test that asks for
    /// a case reports it (and the session is not run again per test).
    pub failure: Option<String>,
}

impl Results {
    pub fn case(&self, name: &str) -> &Case {
        if let Some(f) = &self.failure {
            panic!("{f}");
        }
        self.cases
            .get(name)
            .unwrap_or_else(|| panic!("scenario left no case {name}"))
    }

    pub fn file(&self, name: &str) -> &str {
        if let Some(f) = &self.failure {
            panic!("{f}");
        }
        self.files
            .get(name)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("scenario left no file {name}"))
    }
}

/// Runs `scenario` on real KVM through `testbed/run` with `files`
/// (`SRC:NAME`), and reads back every `<case>.out/.err/.rc` it left in
/// `$MCPVM_OUT`, plus any other file it wrote there (by name).
pub fn run_scenario(scenario: &Path, files: &[String]) -> Results {
    run_scenario_within(scenario, files, 600)
}

/// [`run_scenario`] with a testbed time limit in seconds.
pub fn run_scenario_within(scenario: &Path, files: &[String], seconds: u32) -> Results {
    run_scenario_with_disk(scenario, files, &[], seconds)
}

/// [`run_scenario_within`], with `disk_files` on the testbed's second disk
/// (`testbed/run --disk-file`: big files that would not fit an initrd).
pub fn run_scenario_with_disk(
    scenario: &Path,
    files: &[String],
    disk_files: &[String],
    seconds: u32,
) -> Results {
    let out = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(workspace().join("testbed/run"));
    for f in files {
        cmd.arg("--file").arg(f);
    }
    for f in disk_files {
        cmd.arg("--disk-file").arg(f);
    }
    cmd.arg("--file")
        .arg(format!("{}:scenario.sh", scenario.display()));
    cmd.args(["--timeout", &seconds.to_string(), "--out"])
        .arg(out.path())
        .args(["--", "sh", "scenario.sh"]);
    let result = cmd.output().expect("run testbed/run");
    let stderr = String::from_utf8_lossy(&result.stderr);
    eprintln!("{stderr}");
    let failure = (!result.status.success())
        .then(|| format!("testbed/run failed ({}):\n{stderr}", result.status));

    let (mut cases, mut others) = (HashMap::new(), HashMap::new());
    for entry in std::fs::read_dir(out.path()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        match path.extension().and_then(|e| e.to_str()) {
            Some("rc") => {
                let case = Case {
                    stdout: read(&path.with_extension("out")),
                    stderr: read(&path.with_extension("err")),
                    rc: read(&path).trim().parse().unwrap(),
                };
                cases.insert(
                    path.file_stem().unwrap().to_string_lossy().to_string(),
                    case,
                );
            }
            Some("out" | "err") => {}
            _ => {
                others.insert(name, read(&path));
            }
        }
    }
    Results {
        cases,
        files: others,
        failure,
    }
}

/// A minimal x86_64 ELF executable whose one segment holds `code` at
/// physical `addr`, entered there; no PVH note, so the VMM uses the
/// 64-bit Linux entry.
pub fn tiny_elf(code: &[u8], addr: u64) -> Vec<u8> {
    const EHDR: usize = 64;
    const PHDR: usize = 56;
    let off = (EHDR + PHDR) as u64;
    let mut e = Vec::new();
    e.extend_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    e.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    e.extend_from_slice(&0x3eu16.to_le_bytes()); // EM_X86_64
    e.extend_from_slice(&1u32.to_le_bytes());
    e.extend_from_slice(&addr.to_le_bytes()); // e_entry
    e.extend_from_slice(&(EHDR as u64).to_le_bytes()); // e_phoff
    e.extend_from_slice(&0u64.to_le_bytes()); // e_shoff
    e.extend_from_slice(&0u32.to_le_bytes());
    for v in [EHDR as u16, PHDR as u16, 1, 64, 0, 0] {
        e.extend_from_slice(&v.to_le_bytes());
    }
    e.extend_from_slice(&1u32.to_le_bytes()); // PT_LOAD
    e.extend_from_slice(&5u32.to_le_bytes()); // R+X
    e.extend_from_slice(&off.to_le_bytes());
    e.extend_from_slice(&addr.to_le_bytes()); // vaddr
    e.extend_from_slice(&addr.to_le_bytes()); // paddr
    e.extend_from_slice(&(code.len() as u64).to_le_bytes());
    e.extend_from_slice(&(code.len() as u64).to_le_bytes());
    e.extend_from_slice(&0x1000u64.to_le_bytes());
    e.extend_from_slice(code);
    e
}

/// `mcpvm probe --json ARGS…` on the host: (exit code, result, stderr).
pub fn probe(args: &[&str]) -> (i32, serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpvm"))
        .arg("probe")
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    (out.status.code().unwrap(), json, stderr)
}

/// A step of a probe result, by name.
pub fn step<'a>(r: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == name)
        .unwrap_or_else(|| panic!("no step {name}: {r}"))
}

/// A tool call's step of a probe result, by tool.
pub fn call<'a>(r: &'a serde_json::Value, tool: &str) -> &'a serde_json::Value {
    step(r, &format!("tools/call:{tool}"))
}

/// testbed `--file` arguments for the image store as built: its index,
/// the runtime image and the layers of `servers`.
pub fn image_store_files(servers: &[&str]) -> Vec<String> {
    store_files(&artifact("images"), servers)
}

/// [`image_store_files`] of any store.
pub fn store_files(store: &Path, servers: &[&str]) -> Vec<String> {
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.join("index.json")).unwrap()).unwrap();
    let mut names = vec![
        "index.json".to_string(),
        index["runtime"].as_str().unwrap().to_string(),
    ];
    for (name, rec) in index["servers"].as_object().unwrap() {
        if servers.is_empty() || servers.contains(&name.as_str()) {
            names.push(rec["layer"].as_str().unwrap().to_string());
        }
    }
    names
        .into_iter()
        .map(|n| format!("{}:images/{n}", store.join(&n).display()))
        .collect()
}

/// `mcpvm audit merge` of the recorded corpus run (docs/ecosystem) into a
/// fresh directory, as a reader would run it: the directory (its
/// compat.json and reports) and what the merge said. The merge must
/// succeed.
pub fn merge_corpus() -> (tempfile::TempDir, String) {
    let out = tempfile::tempdir().unwrap();
    let merged = Command::new(env!("CARGO_BIN_EXE_mcpvm"))
        .args(["audit", "merge", "--out"])
        .arg(out.path())
        .arg(workspace().join("docs/ecosystem"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&merged.stderr).into_owned();
    assert_eq!(merged.status.code(), Some(0), "{said}");
    (out, said)
}
