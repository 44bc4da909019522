//! Bad input gets one clear error, exit code 1, and nothing left behind.
//! These run on the host: the checks come before any guest runs.

mod common;

use std::process::Command;

fn mcpvm(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpvm"))
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    (out.status.code().unwrap(), stderr)
}

fn assert_error(args: &[&str], rc: i32, needle: &str) {
    let (code, stderr) = mcpvm(args);
    assert_eq!(code, rc, "{args:?}: {stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: expected '{needle}' in:\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    if rc == 1 {
        assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    }
}

#[test]
fn missing_kernel() {
    assert_error(
        &["boot", "--kernel", "/nonexistent/vmlinux"],
        1,
        "Cannot open kernel image /nonexistent/vmlinux",
    );
}

#[test]
fn missing_initrd() {
    let k = tempfile::NamedTempFile::new().unwrap();
    let k = k.path().to_str().unwrap();
    assert_error(
        &["boot", "--kernel", k, "--initrd", "/nonexistent.cpio"],
        1,
        "Cannot read initrd /nonexistent.cpio",
    );
}

#[test]
fn kernel_that_is_not_a_kernel() {
    let k = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(k.path(), "not a kernel at all, just text").unwrap();
    let k = k.path().to_str().unwrap();
    assert_error(
        &["boot", "--allow-pvm", "--kernel", k],
        1,
        "is neither an ELF vmlinux nor a bzImage",
    );
}

#[test]
fn truncated_elf_kernel() {
    let k = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(k.path(), b"\x7fELF\x02\x01\x01\x00").unwrap();
    let k = k.path().to_str().unwrap();
    assert_error(
        &["boot", "--allow-pvm", "--kernel", k],
        1,
        "Cannot load kernel image",
    );
}

#[test]
fn memory_out_of_range() {
    let k = tempfile::NamedTempFile::new().unwrap();
    let k = k.path().to_str().unwrap();
    assert_error(
        &["boot", "--kernel", k, "--mem", "4"],
        1,
        "use --mem between 16 and 65536",
    );
    assert_error(
        &["boot", "--kernel", k, "--mem", "100000"],
        1,
        "use --mem between 16 and 65536",
    );
}

#[test]
fn vcpus_out_of_range() {
    let k = tempfile::NamedTempFile::new().unwrap();
    let k = k.path().to_str().unwrap();
    assert_error(
        &["boot", "--kernel", k, "--vcpus", "0"],
        1,
        "use --vcpus between 1 and 64",
    );
    assert_error(
        &["boot", "--kernel", k, "--vcpus", "65"],
        1,
        "use --vcpus between 1 and 64",
    );
}

#[test]
fn initrd_larger_than_memory() {
    let dir = tempfile::tempdir().unwrap();
    let elf = dir.path().join("k.elf");
    std::fs::write(&elf, common::tiny_elf(&[0xf4], 0x10_0000)).unwrap();
    let initrd = dir.path().join("big.cpio");
    std::fs::File::create(&initrd)
        .unwrap()
        .set_len(100 << 20)
        .unwrap();
    assert_error(
        &[
            "boot",
            "--allow-pvm",
            "--mem",
            "64",
            "--kernel",
            elf.to_str().unwrap(),
            "--initrd",
            initrd.to_str().unwrap(),
        ],
        1,
        "does not fit in guest memory",
    );
}

#[test]
fn command_line_too_long() {
    let dir = tempfile::tempdir().unwrap();
    let elf = dir.path().join("k.elf");
    std::fs::write(&elf, common::tiny_elf(&[0xf4], 0x10_0000)).unwrap();
    let long = "x".repeat(3000);
    assert_error(
        &[
            "boot",
            "--allow-pvm",
            "--kernel",
            elf.to_str().unwrap(),
            "--cmdline",
            &long,
        ],
        1,
        "longer than 2048 bytes",
    );
}

#[test]
fn serial_file_options_must_agree() {
    let k = "/nonexistent";
    assert_error(
        &["boot", "--kernel", k, "--serial", "file"],
        1,
        "--serial file needs --serial-file PATH",
    );
    assert_error(
        &["boot", "--kernel", k, "--serial-file", "/tmp/x"],
        1,
        "--serial-file is only used with --serial file",
    );
    assert_error(
        &[
            "boot",
            "--kernel",
            k,
            "--serial",
            "file",
            "--serial-file",
            "/nonexistent/dir/log",
        ],
        1,
        "Cannot create serial log",
    );
}

#[test]
fn bad_timeout_is_a_usage_error() {
    assert_error(
        &["boot", "--kernel", "k", "--timeout=-1"],
        2,
        "is not a positive number of seconds",
    );
    assert_error(
        &["boot", "--kernel", "k", "--timeout", "soon"],
        2,
        "is not a positive number of seconds",
    );
}

#[test]
fn bad_sandbox_timeout_is_a_usage_error() {
    for bad in ["0", "soon", "86401"] {
        assert_error(
            &[
                "image",
                "build",
                "--images",
                "/nonexistent",
                "--sandbox-timeout",
                bad,
            ],
            2,
            "invalid value",
        );
    }
}

/// On a kvm_pvm host, a Linux boot is refused with a pointer to the testbed.
#[test]
fn kvm_pvm_host_points_to_the_testbed() {
    let k = tempfile::NamedTempFile::new().unwrap();
    let (code, stderr) = mcpvm(&["boot", "--kernel", k.path().to_str().unwrap()]);
    if std::path::Path::new("/sys/module/kvm_pvm").exists() {
        assert_eq!(code, 1);
        assert!(
            stderr.contains("kvm_pvm") && stderr.contains("testbed/run"),
            "{stderr}"
        );
    } else {
        assert!(!stderr.contains("kvm_pvm"), "{stderr}");
    }
}

#[test]
fn run_without_a_kernel_says_where_it_looked() {
    let (code, stderr) = mcpvm(&[
        "run",
        "--kernel",
        "/nonexistent/vmlinux",
        "--initrd",
        "/nonexistent.cpio",
        "--",
        "/bin/true",
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("Cannot open kernel image /nonexistent/vmlinux"),
        "{stderr}"
    );
}

#[test]
fn run_usage_errors() {
    // KEY alone passes mcpvm's own KEY on: unset, one clear error.
    assert_error(
        &["run", "--env", "MCPVM_TEST_NOT_SET", "--", "/bin/true"],
        1,
        "MCPVM_TEST_NOT_SET is not set in mcpvm's environment",
    );
    assert_error(
        &["run", "--env", "A B=1", "--", "/bin/true"],
        2,
        "is not an environment variable name",
    );
    assert_error(
        &["run", "--env-file", "/nonexistent/env", "--", "/bin/true"],
        2,
        "cannot read /nonexistent/env",
    );
    let (code, _) = mcpvm(&["run"]);
    assert_eq!(code, 2, "a command is required");
}

#[test]
fn run_leaves_no_run_directory_behind_on_error() {
    let runtime = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mcpvm"))
        .env("XDG_RUNTIME_DIR", runtime.path())
        .args([
            "run",
            "--kernel",
            "/nonexistent",
            "--initrd",
            "/nonexistent",
            "--",
            "/bin/true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // A jailed run makes its run directory in the jail, so there may be
    // no base directory at all.
    let left: Vec<_> = std::fs::read_dir(runtime.path().join("mcpvm"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn bad_profiles_are_refused_before_any_vm() {
    assert_error(
        &["run", "--profile", "ro-rot", "--", "/bin/true"],
        1,
        "No profile named 'ro-rot'; known: baseline",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.toml");
    std::fs::write(&file, "[profile.x]\nerrno = \"EWHAT\"\n").unwrap();
    assert_error(
        &[
            "run",
            "--profiles",
            file.to_str().unwrap(),
            "--profile",
            "x",
            "--",
            "/bin/true",
        ],
        1,
        "Profile 'x': errno: unknown errno 'EWHAT'",
    );
}

#[test]
fn bad_audit_options_are_refused_before_any_vm() {
    let out = tempfile::tempdir().unwrap();
    let out_s = out.path().join("a");
    let out_s = out_s.to_str().unwrap();
    assert_error(&["audit"], 1, "mcpvm audit needs --out DIR");
    assert_error(
        &["audit", "--out", out_s, "--shard", "4/4"],
        2,
        "'4/4' is not a shard; use I/N",
    );
    assert_error(
        &["audit", "--out", out_s, "--servers", "nope"],
        1,
        "No server 'nope' in the catalogue",
    );
    assert_error(
        &[
            "audit",
            "--out",
            out_s,
            "--servers",
            "memory",
            "--profiles",
            "baseline,ro-rot",
        ],
        1,
        "No profile named 'ro-rot'",
    );
    assert_error(
        &[
            "audit",
            "--out",
            out_s,
            "--servers",
            "memory",
            "--profiles",
            "baseline,security",
        ],
        1,
        "'security' is the column of --security, not a profile: give --security instead",
    );
    assert_error(
        &[
            "audit",
            "--out",
            out_s,
            "--servers",
            "memory",
            "--profiles",
            "proposed",
        ],
        1,
        "'proposed' is the column of --check-proposals, not a profile",
    );
    // A proposal comes from a cell that logged every system call.
    assert_error(
        &[
            "audit",
            "--out",
            out_s,
            "--servers",
            "memory",
            "--profiles",
            "no-tmp,deny-exec",
            "--check-proposals",
        ],
        1,
        "none of --profiles (no-tmp, deny-exec) logs them: add one that does (baseline)",
    );
    assert_error(
        &[
            "probe",
            "--security",
            "--root",
            "workspace",
            "--server",
            "memory",
        ],
        2,
        "'workspace' is not an absolute guest path without '.' or '..'",
    );
    assert!(
        !out.path().join("a").exists(),
        "nothing written for a refused audit"
    );
}

/// Two shard directories of one audit (as `mcpvm audit --shard` leaves
/// them) merge into one report; shards of different inputs do not.
#[test]
fn audit_merge_joins_shards_and_refuses_mixed_ones() {
    let dir = tempfile::tempdir().unwrap();
    let meta = |shard: usize, kernel: &str| {
        serde_json::json!({
            "schema": 1, "mcpvm_version": "0.1.0", "kernel": "vmlinux", "kernel_sha256": kernel,
            "runtime_image": "runtime-x.erofs", "catalogue": "(built in)",
            "servers": {"time": {"package": "mcp-server-time", "version": "1", "runtime": "python", "layer": "l"}},
            "profiles": ["baseline", "no-rng"],
            "profile_definitions": {"baseline": {"description": "b"}, "no-rng": {"description": "n"}},
            "shard": {"index": shard, "count": 2}, "started_at": 0
        })
    };
    let record = |profile: &str| {
        serde_json::json!({
            "schema": 1, "server": "time", "profile": profile, "outcome": "ok", "failed_step": null,
            "lifecycle": "stateless", "tools_ok": ["get_current_time"], "tools_failed": [],
            "timings": {"wall_ms": 1000.0, "boot_ms": 300.0, "handshake_ms": 900.0, "tools_list_ms": 950.0},
            "evidence": {"denied": [], "errors": [], "stderr_tail": "", "exit": {"code": 0}, "oom": false},
            "finished_at": 0
        })
    };
    for (i, (profile, kernel)) in [("baseline", "k1"), ("no-rng", "k1"), ("no-rng", "k2")]
        .iter()
        .enumerate()
    {
        let d = dir.path().join(format!("s{i}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("audit.json"), meta(i % 2, kernel).to_string()).unwrap();
        std::fs::write(d.join("results.jsonl"), format!("{}\n", record(profile))).unwrap();
    }
    let p = |n: &str| dir.path().join(n).display().to_string();
    let (rc, stderr) = mcpvm(&["audit", "merge", "--out", &p("m"), &p("s0"), &p("s1")]);
    assert_eq!(rc, 0, "{stderr}");
    assert!(stderr.contains("2 of 2 runs from 2 shards"), "{stderr}");
    let md = std::fs::read_to_string(dir.path().join("m/report.md")).unwrap();
    assert!(md.contains("| time | ✓ | = |"), "{md}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("m/results.jsonl"))
            .unwrap()
            .lines()
            .count(),
        2
    );
    // A shard not given is said, with what completes it, and the merge
    // exits 3: never a silently smaller table.
    let (rc, stderr) = mcpvm(&["audit", "merge", "--out", &p("m1"), &p("s0")]);
    assert_eq!(rc, 3, "{stderr}");
    assert!(
        stderr.contains("shard 1/2 is missing: its 1 cells are not in this report; run `mcpvm audit --shard 1/2`"),
        "{stderr}"
    );
    let md = std::fs::read_to_string(dir.path().join("m1/report.md")).unwrap();
    assert!(md.contains("**Incomplete:** shard 1/2 is missing"), "{md}");
    assert_error(
        &["audit", "merge", "--out", &p("m2"), &p("s0"), &p("s2")],
        1,
        "The shards differ: kernel",
    );
    assert_error(
        &["audit", "merge", "--out", &p("m3"), &p("nope")],
        1,
        "is not an audit directory",
    );
}

/// One bad value per flag or field, each one clear error naming it, and
/// nothing left behind: no run directory, no temp file, no output.
#[test]
fn every_bad_value_is_one_clear_error_and_leaves_nothing() {
    let files = tempfile::tempdir().unwrap();
    let kernel = files.path().join("vmlinux");
    std::fs::write(&kernel, "not a kernel").unwrap();
    let garbage = files.path().join("garbage.toml");
    std::fs::write(&garbage, "this is = = not toml").unwrap();
    let (k, g) = (kernel.to_str().unwrap(), garbage.to_str().unwrap());
    let kvm = ["--kernel", k, "--initrd", k];
    let with_kernel = |rest: &[&'static str]| -> Vec<String> {
        let mut v = vec!["run".to_string()];
        v.extend(kvm.iter().map(|s| s.to_string()));
        v.extend(rest.iter().map(|s| s.to_string()));
        v
    };
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let cases: Vec<(Vec<String>, i32, &str)> = vec![
        (
            s(&["run", "--seccomp", "strict", "--", "/bin/true"]),
            2,
            "'strict' is not a seccomp mode; use off, log or on",
        ),
        (
            s(&["boot", "--kernel", k, "--seccomp", "full"]),
            2,
            "for '--seccomp",
        ),
        (
            s(&["boot", "--restore", "/nonexistent"]),
            1,
            "Cannot read snapshot /nonexistent/state",
        ),
        (
            s(&["boot", "--restore", "/nonexistent", "--mem", "512"]),
            2,
            "cannot be used with",
        ),
        (
            s(&["boot", "--restore", "/nonexistent", "--rng"]),
            2,
            "cannot be used with",
        ),
        (
            s(&["run", "--from-snapshot", "/nonexistent"]),
            1,
            "Cannot read snapshot /nonexistent/state",
        ),
        (
            s(&["run", "--from-snapshot", "/nonexistent", "--mem", "512"]),
            2,
            "cannot be used with",
        ),
        (
            s(&["run", "--from-snapshot", "/nonexistent", "--", "/bin/true"]),
            2,
            "cannot be used with",
        ),
        (
            s(&[
                "run",
                "--warm",
                "--snapshot-to",
                "/tmp/x",
                "--",
                "/bin/true",
            ]),
            2,
            "cannot be used with",
        ),
        (
            // The current directory is not a snapshot: refused before any
            // boot, and nothing in it is touched.
            s(&["run", "--snapshot-to", ".", "--", "/bin/true"]),
            1,
            "is not a snapshot",
        ),
        (
            s(&["boot", "--kernel", k, "--snapshot-to", "/etc"]),
            1,
            "/etc exists and is not a snapshot",
        ),
        (
            s(&["run", "--snapshots", "/tmp/x", "--", "/bin/true"]),
            2,
            "--warm",
        ),
        (
            s(&["probe", "--warm", "--", "/bin/true"]),
            1,
            "--warm starts a microVM from a snapshot: give --vm or --server",
        ),
        (
            s(&["audit", "--snapshots", "/tmp/x", "--out", "/tmp/y"]),
            2,
            "--warm",
        ),
        (
            s(&["run", "--disk", "x,cache=fast", "--", "/bin/true"]),
            2,
            "unknown disk option 'cache=fast'; use rw, ro",
        ),
        (
            s(&["run", "--timeout", "soon", "--", "/bin/true"]),
            2,
            "for '--timeout",
        ),
        (
            s(&["run", "--workspace", "/nonexistent", "--", "/bin/true"]),
            1,
            "The workspace /nonexistent is not a directory",
        ),
        (
            s(&["run", "--image", "/nonexistent.erofs", "--", "/bin/true"]),
            1,
            "Cannot open image /nonexistent.erofs",
        ),
        (
            s(&["run", "--server", "nope"]),
            1,
            "No server 'nope' in the catalogue",
        ),
        (
            s(&["run", "--catalogue", g, "--server", "memory"]),
            1,
            "is not valid TOML",
        ),
        (
            s(&["run", "--read-only-root", "--", "/bin/true"]),
            1,
            "--read-only-root needs --image or --server",
        ),
        (
            s(&["run", "--profile", "tiny-mem+nope", "--", "/bin/true"]),
            1,
            "No profile named 'nope'",
        ),
        (
            s(&["run", "--profiles", g, "--profile", "x", "--", "/bin/true"]),
            1,
            "not valid TOML",
        ),
        (
            s(&[
                "run",
                "--timings",
                "/nonexistent/dir/t.json",
                "--",
                "/bin/true",
            ]),
            1,
            "Cannot write /nonexistent/dir/t.json: its directory does not exist",
        ),
        (
            with_kernel(&["--events", "/nonexistent/dir/e.jsonl", "--", "/bin/true"]),
            1,
            "Cannot write /nonexistent/dir/e.jsonl",
        ),
        (
            with_kernel(&["--console", "/nonexistent/dir/c.log", "--", "/bin/true"]),
            1,
            "Cannot write /nonexistent/dir/c.log",
        ),
        (
            with_kernel(&["--mem", "1", "--", "/bin/true"]),
            1,
            "Guest memory of 1 MiB is out of range: a VM has 16 to 65536 MiB; use --mem between 16",
        ),
        (
            with_kernel(&["--vcpus", "0", "--", "/bin/true"]),
            1,
            "0 vCPUs is out of range: a VM has 1 to 64; use --vcpus between 1",
        ),
        (
            s(&["probe", "--server", "nope"]),
            1,
            "No server 'nope' in the catalogue",
        ),
        (
            s(&["probe", "--call", "=x", "--", "/bin/true"]),
            2,
            "names no tool",
        ),
        (
            s(&["probe", "--call", "t=[1]", "--", "/bin/true"]),
            2,
            "arguments of 't' must be a JSON object",
        ),
        (s(&["audit", "--out", "o", "--jobs", "0"]), 2, "for '--jobs"),
        (
            s(&["audit", "--out", "o", "--run-timeout", "0"]),
            2,
            "for '--run-timeout",
        ),
        (
            s(&[
                "bench",
                "first-response",
                "--seccomp",
                "maybe",
                "--host",
                "x",
                "--",
                "y",
            ]),
            2,
            "'maybe' is not a seccomp mode",
        ),
    ];
    for (args, rc, needle) in cases {
        let runtime = tempfile::tempdir().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_mcpvm"))
            .args(&args)
            .current_dir(tmp.path())
            .env("XDG_RUNTIME_DIR", runtime.path())
            .env("TMPDIR", tmp.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(rc), "{args:?}: {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: expected '{needle}' in:\n{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        if rc == 1 {
            assert_eq!(
                stderr.trim().lines().count(),
                1,
                "{args:?}: one line: {stderr}"
            );
        }
        let runs: Vec<_> = std::fs::read_dir(runtime.path().join("mcpvm"))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        assert!(runs.is_empty(), "{args:?}: run directories left: {runs:?}");
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(left.is_empty(), "{args:?}: files left: {left:?}");
    }
}

/// Where /dev/kvm cannot boot Linux (kvm_pvm here), an audit says so once
/// and writes nothing, instead of recording every cell as broken.
#[test]
fn an_audit_on_a_host_that_cannot_boot_linux_is_refused_up_front() {
    if !std::path::Path::new("/sys/module/kvm_pvm").exists() {
        eprintln!(
            "skipped: this host's /dev/kvm is not kvm_pvm (the testbed audit test covers real KVM)"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("a");
    // The built binary finds its kernel beside it (target/mcpvm/kernel),
    // so the host check is what stops it.
    let _kernel = common::artifact("kernel/vmlinux");
    let mut cmd = Command::new(common::artifact("bin/mcpvm"));
    cmd.args([
        "audit",
        "--out",
        out.to_str().unwrap(),
        "--servers",
        "memory",
        "--profiles",
        "baseline",
    ]);
    let o = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("kvm_pvm, which cannot boot the audit's Linux guests"),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing written");
}

#[test]
fn bad_network_rules_are_one_error_before_anything_runs() {
    for (rule, why) in [
        ("api.github.com:0", "the port is a number from 1 to 65535"),
        ("2001:db8::1", "an IPv6 address goes in brackets"),
        ("not a host", "not a host name"),
    ] {
        assert_error(&["run", "--allow-net", rule, "--", "/bin/true"], 2, why);
    }
    // A profile's allow_net is checked as the profile is put together,
    // before a VM or a proxy exists.
    let dir = tempfile::tempdir().unwrap();
    let profiles = dir.path().join("p.toml");
    std::fs::write(
        &profiles,
        "[profile.narrow]\nallow_net = [\"api.github.com:http\"]\n",
    )
    .unwrap();
    assert_error(
        &[
            "run",
            "--profiles",
            profiles.to_str().unwrap(),
            "--profile",
            "narrow",
            "--",
            "/bin/true",
        ],
        1,
        "Profile 'narrow': allow_net: network rule \"api.github.com:http\": the port is a number",
    );
}

#[test]
fn listen_needs_a_server_that_speaks_http() {
    assert_error(
        &["run", "--listen", "127.0.0.1:0", "--", "/bin/true"],
        1,
        "needs a server that speaks HTTP",
    );
    assert_error(
        &["run", "--guest-port", "3001", "--", "/bin/true"],
        2,
        "--listen",
    );
}

/// Any host that reaches a --listen address could drive the server with
/// its credentials: loopback only, unless the user says so in so many
/// words; and a bad MCPVM_LISTEN_TOKEN is refused.
#[test]
fn listen_is_loopback_only_unless_said_in_so_many_words() {
    for addr in ["0.0.0.0:8931", "[::]:8931", "198.51.100.7:8931"] {
        assert_error(
            &[
                "run",
                "--listen",
                addr,
                "--guest-port",
                "3001",
                "--",
                "/bin/true",
            ],
            1,
            "is not a loopback address",
        );
    }
    // Said in so many words, the check passes and the next one speaks.
    assert_error(
        &[
            "run",
            "--listen",
            "0.0.0.0:0",
            "--listen-non-loopback",
            "--",
            "/bin/true",
        ],
        1,
        "needs a server that speaks HTTP",
    );
    assert_error(
        &["run", "--listen-non-loopback", "--", "/bin/true"],
        2,
        "--listen",
    );
}

/// `--package` takes an exact npm, PyPI or crates.io spec, names the server alone
/// (not with --server or --image), and says which form it wants.
#[test]
fn package_specs_are_checked_before_anything_is_built() {
    for (spec, why) in [
        ("memory", "no kind"),
        ("npm:left-pad", "no @VERSION"),
        ("npm:left-pad@^1.3.0", "is not an exact version"),
        ("pypi:mcp-server-time>=1", "no ==VERSION"),
        ("gem:rails@7.1.0", "'gem' is not a kind of package"),
        ("cargo:ripgrep", "no @VERSION"),
    ] {
        for command in ["run", "probe"] {
            let (code, stderr) = mcpvm(&[command, "--package", spec]);
            assert_eq!(code, 1, "{command} {spec}: {stderr}");
            assert!(
                stderr.contains(why)
                    && stderr
                        .contains("npm:NAME@VERSION, pypi:NAME==VERSION or cargo:NAME@VERSION"),
                "{command} {spec}: {stderr}"
            );
            assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        }
    }
    for other in [&["--server", "memory"][..], &["--image", "root.erofs"]] {
        let mut args = vec!["run", "--package", "npm:left-pad@1.3.0"];
        args.extend(other);
        assert_error(&args, 2, "cannot be used with");
    }
    assert_error(
        &["run", "--images", "/tmp", "--", "/bin/true"],
        2,
        "--server <SERVER>|--package <SPEC>",
    );
}

/// `mcpvm` (the binary a VM runs in) hands every other command to
/// `mcpvm-tools` beside it, and `mcpvm-tools` hands VM commands back:
/// where the other binary is missing, the error says which and where.
#[test]
fn the_two_binaries_hand_commands_to_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let alone = dir.path().join("mcpvm");
    std::fs::copy(env!("CARGO_BIN_EXE_mcpvm"), &alone).unwrap();
    let run = |exe: &std::path::Path, args: &[&str]| {
        let out = Command::new(exe).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        (out.status.code().unwrap(), err)
    };
    for args in [&["probe", "--", "x"][..], &["--help"], &["image", "list"]] {
        let (code, err) = run(&alone, args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(
            err.starts_with("mcpvm: cannot run mcpvm-tools: ")
                && err.contains(&format!("{}", dir.path().join("mcpvm-tools").display()))
                && err.contains("installed side by side"),
            "{err}"
        );
    }
    // Its own commands need no partner.
    let (code, err) = run(&alone, &["run", "--no-such-option"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("unexpected argument '--no-such-option'"),
        "{err}"
    );

    // Side by side, `mcpvm --help` is the full help, and VM commands
    // given to mcpvm-tools are parsed (and run) by mcpvm.
    let (code, help) = {
        let out = Command::new(env!("CARGO_BIN_EXE_mcpvm"))
            .arg("--help")
            .output()
            .unwrap();
        (
            out.status.code().unwrap(),
            String::from_utf8_lossy(&out.stdout).to_string(),
        )
    };
    assert_eq!(code, 0);
    for command in ["run", "probe", "audit", "boot", "image", "bench"] {
        assert!(
            help.contains(&format!("\n  {command} ")),
            "{command}: {help}"
        );
    }
    // The other binary is the mcpvm-tools crate's, built beside this one
    // by `cargo test --workspace` (scripts/test).
    let tools = std::path::Path::new(env!("CARGO_BIN_EXE_mcpvm")).with_file_name("mcpvm-tools");
    assert!(
        tools.is_file(),
        "{} is not built: run the tests with cargo test --workspace (scripts/test)",
        tools.display()
    );
    let (code, err) = run(&tools, &["run", "--mem", "lots", "--", "x"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("invalid value 'lots' for '--mem <MEM>'"),
        "{err}"
    );
    let (code, err) = run(
        &tools.with_file_name("mcpvm-tools"),
        &["boot", "--kernel", "/nonexistent/vmlinux"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.starts_with("mcpvm: ") && err.contains("/nonexistent/vmlinux"),
        "{err}"
    );
}

/// `mcpvm image prune` takes what the catalogue no longer builds (here a
/// layer of another key) and keeps the runtime image; `--dry-run` says the
/// same and takes nothing; a directory that is no store is one error.
#[test]
fn image_prune_removes_stale_layers_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path();
    let index = serde_json::json!({
        "schema": 1,
        "runtime": "runtime-aa.erofs",
        "servers": {"memory": {"layer": "layer-memory-bb.erofs", "key": "stale", "package": "p",
            "version": "1", "bytes": 5}}
    });
    std::fs::write(store.join("index.json"), index.to_string()).unwrap();
    std::fs::write(store.join("runtime-aa.erofs"), "runtime").unwrap();
    std::fs::write(store.join("layer-memory-bb.erofs"), "layer").unwrap();
    let s = store.to_str().unwrap();
    // The warm cache is pruned too: this test's own, never the user's.
    let snaps = store.join("snapshots");
    let snaps = snaps.to_str().unwrap();
    let (rc, out) = {
        let o = Command::new(env!("CARGO_BIN_EXE_mcpvm"))
            .args([
                "image",
                "prune",
                "--images",
                s,
                "--snapshots",
                snaps,
                "--dry-run",
            ])
            .output()
            .unwrap();
        (
            o.status.code().unwrap(),
            String::from_utf8_lossy(&o.stdout).to_string(),
        )
    };
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("would remove layer-memory-bb.erofs"), "{out}");
    assert!(store.join("layer-memory-bb.erofs").exists());
    let o = Command::new(env!("CARGO_BIN_EXE_mcpvm"))
        .args([
            "--json",
            "image",
            "prune",
            "--images",
            s,
            "--snapshots",
            snaps,
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["removed"][0]["file"], "layer-memory-bb.erofs", "{v}");
    assert!(!store.join("layer-memory-bb.erofs").exists());
    assert!(store.join("runtime-aa.erofs").exists());
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(store.join("index.json")).unwrap()).unwrap();
    assert!(index["servers"].as_object().unwrap().is_empty(), "{index}");
    assert_error(
        &[
            "image",
            "prune",
            "--images",
            "/nonexistent/store",
            "--snapshots",
            snaps,
        ],
        1,
        "Cannot read the image index /nonexistent/store/index.json",
    );
}

/// `mcpvm client add` writes a working entry into a client's own file
/// (this mcpvm's real path, `run` and the options given), keeps what the
/// file held, and refuses bad run options, a different entry of the same
/// name and a file that is not a configuration, each with one line and
/// the file untouched.
#[test]
fn client_add_writes_the_entry_and_refuses_without_touching_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let add = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_mcpvm"))
            .current_dir(dir.path())
            .arg("client")
            .arg("add")
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code().unwrap(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let file = dir.path().join(".cursor/mcp.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(
        &file,
        "{\"theme\": \"dark\", \"mcpServers\": {\"x\": {\"command\": \"npx\"}}}",
    )
    .unwrap();
    let (rc, said) = add(&[
        "cursor",
        "memory",
        "--",
        "--server",
        "memory",
        "--profile",
        "no-rng",
    ]);
    assert_eq!(rc, 0, "{said}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(v["theme"], "dark");
    assert_eq!(v["mcpServers"]["x"]["command"], "npx");
    let entry = &v["mcpServers"]["memory"];
    let mcpvm = std::path::Path::new(env!("CARGO_BIN_EXE_mcpvm"))
        .canonicalize()
        .unwrap();
    assert_eq!(entry["command"], mcpvm.display().to_string());
    assert_eq!(
        entry["args"],
        serde_json::json!(["run", "--server", "memory", "--profile", "no-rng"])
    );
    let written = std::fs::read(&file).unwrap();
    for (args, needle) in [
        (
            &["cursor", "memory", "--", "--server", "time"][..],
            "already has a server named 'memory'",
        ),
        (
            &["cursor", "other", "--", "--no-such-option"][..],
            "not `mcpvm run` options",
        ),
        (
            &[
                "claude-desktop",
                "m",
                "--scope",
                "project",
                "--",
                "--server",
                "time",
            ][..],
            "no project configuration",
        ),
    ] {
        let (rc, said) = add(args);
        assert_eq!(rc, 1, "{args:?}: {said}");
        assert!(
            said.contains(needle) && said.lines().count() == 1,
            "{args:?}: {said}"
        );
        assert_eq!(std::fs::read(&file).unwrap(), written, "{args:?}");
    }
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\"mcpServers\": ").unwrap();
    let (rc, said) = add(&[
        "cursor",
        "m",
        "--config",
        broken.to_str().unwrap(),
        "--",
        "--server",
        "time",
    ]);
    assert_eq!(rc, 1, "{said}");
    assert!(said.contains("is not a JSON object"), "{said}");
    assert_eq!(
        std::fs::read_to_string(&broken).unwrap(),
        "{\"mcpServers\": "
    );
    // --force replaces it.
    let (rc, said) = add(&["cursor", "memory", "--force", "--", "--server", "time"]);
    assert_eq!(rc, 0, "{said}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(
        v["mcpServers"]["memory"]["args"],
        serde_json::json!(["run", "--server", "time"])
    );
}

/// `image from-registry`: a registry file that is missing, or has a line
/// that is not a listing, is one error naming it, and nothing is written;
/// a generated catalogue already in --out is never overwritten.
#[test]
fn a_bad_registry_file_is_named_and_a_generated_catalogue_kept() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let o = out.to_str().unwrap();
    assert_error(
        &["image", "from-registry", "/nonexistent.jsonl", "--out", o],
        1,
        "Cannot read the registry file /nonexistent.jsonl",
    );
    let file = d.path().join("r.jsonl");
    std::fs::write(&file, "{\"registry\":\"npm\",\"package\":\"a\",\"version\":\"1.0.0\",\"command\":\"npx\"}\n{\"package\":1}\n").unwrap();
    let f = file.to_str().unwrap();
    assert_error(
        &["image", "from-registry", f, "--out", o],
        1,
        "line 2: not a registry listing",
    );
    assert!(!out.exists(), "nothing written");
    std::fs::write(&file, "{\"registry\":\"npm\",\"package\":\"a\",\"version\":\"1.0.0\",\"command\":\"npx\",\"args\":[\"-y\",\"a@1.0.0\"]}\n").unwrap();
    let (code, err) = mcpvm(&["image", "from-registry", f, "--out", o]);
    assert_eq!(code, 0, "{err}");
    let made = std::fs::read_to_string(out.join("catalogue.toml")).unwrap();
    assert!(made.contains("[servers.npm-a-1-0-0]"), "{made}");
    std::fs::write(out.join("catalogue.toml"), "# reviewed\n").unwrap();
    assert_error(
        &["image", "from-registry", f, "--out", o],
        1,
        "catalogue.toml exists",
    );
    assert_eq!(
        std::fs::read_to_string(out.join("catalogue.toml")).unwrap(),
        "# reviewed\n"
    );
}

/// `audit --config FILE`: a client's configuration naming nothing mcpvm
/// can run (a local script, a container, a remote URL, an unpinned
/// package) is refused with why for each server, written to setup.json,
/// and nothing it names runs on the host (the script would leave a
/// marker).
#[test]
fn a_client_configuration_of_nothing_runnable_says_why_and_runs_nothing() {
    let d = tempfile::tempdir().unwrap();
    let marker = d.path().join("ran");
    let config = d.path().join("mcp.json");
    let servers = serde_json::json!({"mcpServers": {
        "script": {"command": "sh", "args": ["-c", format!("touch {}", marker.display())]},
        "container": {"command": "docker", "args": ["run", "-i", "mcp/github"]},
        "remote": {"url": "https://mcp.example.com/mcp"},
        "floating": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
    }});
    std::fs::write(&config, servers.to_string()).unwrap();
    let before = std::fs::read(&config).unwrap();
    let out = d.path().join("audit");
    let (code, stderr) = mcpvm(&[
        "audit",
        "--config",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("none of the servers of"), "{stderr}");
    for (name, why) in [
        ("script", "a local command"),
        ("container", "container image"),
        ("remote", "remote server"),
        ("floating", "not pinned"),
    ] {
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with(&format!("audit: {name}: not run: ")) && l.contains(why)),
            "{name}: {stderr}"
        );
    }
    assert!(!marker.exists(), "a configured command ran on the host");
    assert_eq!(
        std::fs::read(&config).unwrap(),
        before,
        "the file is only read"
    );
    let setup: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("setup.json")).unwrap()).unwrap();
    let rows = setup["servers"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    assert!(rows
        .iter()
        .all(|r| r["kind"] == "not_run" && r["why"].is_string()));
}

/// `--with-credentials VAR` that no configured server sets is one clear
/// error before anything is built or written.
#[test]
fn a_credential_no_server_sets_is_refused_before_anything_is_built() {
    let d = tempfile::tempdir().unwrap();
    let config = d.path().join("mcp.json");
    let servers = serde_json::json!({"mcpServers": {
        "time": {"command": "uvx", "args": ["mcp-server-time==2026.1.26"], "env": {"TZ": "UTC"}},
    }});
    std::fs::write(&config, servers.to_string()).unwrap();
    let out = d.path().join("audit");
    assert_error(
        &[
            "audit",
            "--config",
            config.to_str().unwrap(),
            "--with-credentials",
            "API_KEY",
            "--out",
            out.to_str().unwrap(),
        ],
        1,
        "--with-credentials API_KEY: no server of the configuration sets API_KEY",
    );
    assert!(!out.exists(), "nothing written");
}

/// A testbed session without room for its payload says so before it
/// copies anything (CI once failed half-way through a copy with ENOSPC,
/// 30 tests at once): how much it needs, how much there is, what to do,
/// and nothing is left in the temporary directory.
#[test]
fn a_testbed_session_without_room_says_so_before_copying() {
    let tmp = tempfile::tempdir().unwrap();
    let big = tmp.path().join("big.img");
    // Sparse: 8 TiB to the payload, nothing on the disk.
    std::fs::File::create(&big)
        .unwrap()
        .set_len(8 << 40)
        .unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let run = concat!(env!("CARGO_MANIFEST_DIR"), "/../testbed/run");
    let out = Command::new(run)
        .args(["--file", big.to_str().unwrap(), "--", "true"])
        .env("TMPDIR", &work)
        .env("MCPVM_TESTBED", "nested")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("MiB free") && stderr.contains("TMPDIR"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0, "nothing left");
}
