//! `mcpvm image build` on a batch with a broken entry: the others are
//! built all the same, the broken one is named with what its installer
//! said, the exit status says some failed, and nothing half-made stays in
//! the store; `mcpvm image list` shows which is which. Installs a real npm
//! package from the registry into a store of its own (the runtime image
//! comes from the cache scripts/build filled).
//!
//! Install scripts run in a microVM, never on the host: the build boots
//! one through testbed/run (directly where /dev/kvm boots Linux, in the
//! nested testbed host here), so these tests run the static binary and
//! the kernel scripts/build made.

mod common;

use std::path::Path;
use std::process::Command;

fn mcpvm(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(common::artifact("bin/mcpvm"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// `mcpvm image CMD` on the catalogue `c` alone and the store `s`, then
/// `extra`.
fn image_cmd(cmd: &str, c: &str, s: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec![
        "image",
        cmd,
        "--catalogue",
        c,
        "--catalogue-only",
        "--images",
        s,
    ];
    args.extend_from_slice(extra);
    mcpvm(&args)
}

/// What a build left in `store` of its work or its layers.
fn stages_and_layers(store: &Path) -> Vec<String> {
    std::fs::read_dir(store)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with(".stage") || n.starts_with("layer-"))
        .collect()
}

/// The layer of `name` in `store`, unpacked into `to` with erofs-utils.
fn extract_layer(store: &Path, name: &str, to: &Path) {
    let layer = std::fs::read_dir(store)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("layer-{name}-"))
        })
        .unwrap_or_else(|| panic!("no layer for {name}"));
    let ok = Command::new("fsck.erofs")
        .arg(format!("--extract={}", to.display()))
        .arg(&layer)
        .output()
        .unwrap();
    assert!(ok.status.success(), "{ok:?}");
}

/// Packs mcpvm/tests/fixtures/npm-scripted into `dir` as
/// mcpvm-fixture-scripted-1.0.0.tgz.
fn pack_scripted_fixture(dir: &Path) {
    let fixture = common::workspace().join("mcpvm/tests/fixtures/npm-scripted");
    let pack = Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(dir)
        .arg(&fixture)
        .output()
        .unwrap();
    assert!(pack.status.success(), "npm pack: {pack:?}");
}

const BATCH: &str = r#"
[servers.good]
package = "@modelcontextprotocol/server-memory"
version = "2026.8.31"
runtime = "node"
command = "mcp-server-memory"

[servers.bad]
package = "@modelcontextprotocol/server-memory"
version = "0.0.0-mcpvm-no-such-version"
runtime = "node"
command = "mcp-server-memory"

# Its dependency's install script downloads a browser: in the microVM
# the scripts run in, with no network, that fails and the batch names
# the cause; told to skip it, the scripts run and it builds.
[servers.puppeteer]
package = "@modelcontextprotocol/server-puppeteer"
version = "2025.5.12"
runtime = "node"
command = "mcp-server-puppeteer"

[servers.puppeteer-skip]
package = "@modelcontextprotocol/server-puppeteer"
version = "2025.5.12"
runtime = "node"
command = "mcp-server-puppeteer"
install_env = { PUPPETEER_SKIP_DOWNLOAD = "1" }

# Declares node >= 22.13: refused on a pinned node 20, with the reason.
[servers.needs-node22]
package = "@sentry/mcp-server"
version = "0.39.0"
runtime = "node20"
command = "sentry-mcp"
"#;

#[test]
fn a_batch_survives_a_bad_entry_and_names_it() {
    // Beside the cache, so that the runtime image is linked, not copied.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let catalogue = dir.path().join("batch.toml");
    std::fs::write(&catalogue, BATCH).unwrap();
    let store = dir.path().join("store");
    let (c, s) = (catalogue.to_str().unwrap(), store.to_str().unwrap());

    let (rc, out, err) = image_cmd("build", c, s, &[]);
    assert_eq!(rc, 3, "some layers failed: {out}\n{err}");
    let bad = out
        .lines()
        .find(|l| l.starts_with("bad ") && l.contains("FAILED"))
        .unwrap_or_else(|| panic!("the bad entry is named: {out}"));
    assert!(
        bad.contains(
            "npm install @modelcontextprotocol/server-memory@0.0.0-mcpvm-no-such-version (resolving) failed"
        ) && (bad.contains("ETARGET") || bad.contains("No matching version")),
        "with what npm said: {bad}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("good ") && l.contains("built")),
        "{out}"
    );
    let engines = out
        .lines()
        .find(|l| l.starts_with("needs-node22 ") && l.contains("FAILED"))
        .unwrap_or_else(|| panic!("the node 22 entry is refused on node20: {out}"));
    assert!(
        engines.contains("Required: {\"node\":\">=22.13\"}") && engines.contains("v20."),
        "naming the requirement it failed: {engines}"
    );
    let download = out
        .lines()
        .find(|l| l.starts_with("puppeteer ") && l.contains("FAILED"))
        .unwrap_or_else(|| panic!("the browser download fails offline: {out}"));
    assert!(
        download.contains("PUPPETEER_SKIP_DOWNLOAD")
            && download.contains("the install scripts of puppeteer (in a microVM)"),
        "with its cause, from the VM: {download}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("puppeteer-skip ") && l.contains("built")),
        "install_env lets it build: {out}"
    );
    assert!(
        err.contains("3 of 5 layers failed (bad, needs-node22, puppeteer)"),
        "{err}"
    );
    let files: Vec<String> = std::fs::read_dir(&store)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    assert!(
        files.iter().any(|f| f.starts_with("layer-good-")),
        "{files:?}"
    );
    let failed = |f: &str| {
        f.contains("bad")
            || f.contains("needs")
            || (f.starts_with("layer-puppeteer-") && !f.starts_with("layer-puppeteer-skip-"))
    };
    assert!(
        !files.iter().any(|f| f.starts_with('.') || failed(f)),
        "nothing half-made: {files:?}"
    );

    let (rc, out, _) = image_cmd("list", c, s, &["--json"]);
    assert_eq!(rc, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let state = |name: &str| {
        v["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| r["state"].as_str().unwrap().to_string())
    };
    assert_eq!(state("good").as_deref(), Some("built"));
    assert_eq!(state("bad").as_deref(), Some("missing"));
    assert_eq!(state("needs-node22").as_deref(), Some("missing"));
    assert!(Path::new(s).join(v["runtime"].as_str().unwrap()).exists());
}

/// A package whose postinstall writes outside its own directory, and
/// inside it: the host never sees the first; the second is in the layer,
/// written under the guest's kernel, not the host's. With
/// `ignore_scripts` the script does not run at all.
#[test]
fn install_scripts_run_in_a_microvm_not_on_the_host() {
    let marker = Path::new("/tmp/mcpvm-fixture-postinstall-ran");
    // Only the fixture writes it; left by a manual run, it would hide one.
    let _ = std::fs::remove_file(marker);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    pack_scripted_fixture(dir.path());
    let catalogue = dir.path().join("scripted.toml");
    let entry = |name: &str, extra: &str| {
        format!(
            "[servers.{name}]\npackage = \"mcpvm-fixture-scripted\"\nversion = \"1.0.0\"\n\
             source = \"mcpvm-fixture-scripted-1.0.0.tgz\"\nruntime = \"node\"\n\
             command = \"mcpvm-fixture-scripted\"\n{extra}\n"
        )
    };
    std::fs::write(
        &catalogue,
        entry(
            "scripted",
            "install_env = { MCPVM_FIXTURE_SKIP_DOWNLOAD = \"1\" }",
        ) + &entry("scripted-ignored", "ignore_scripts = true"),
    )
    .unwrap();
    let store = dir.path().join("store");
    let (c, s) = (catalogue.to_str().unwrap(), store.to_str().unwrap());
    let (rc, out, err) = image_cmd("build", c, s, &[]);
    assert_eq!(rc, 0, "{out}\n{err}");
    assert!(
        err.contains(
            "scripted: install scripts of mcpvm-fixture-scripted: running them in a microVM"
        ) && err.contains("> node postinstall.js"),
        "{err}"
    );
    assert!(
        err.contains("not running the install scripts of mcpvm-fixture-scripted (ignore_scripts)"),
        "{err}"
    );
    assert!(!marker.exists(), "the postinstall ran on the host");
    // What the script did beyond installing is recorded with the layer,
    // each call under its rule; its writes in its own directory and in
    // /tmp, and the shells and node it ran, are not beyond.
    let said = err
        .lines()
        .find_map(|l| l.strip_prefix("image: scripted: install scripts recorded: "))
        .unwrap_or_else(|| panic!("no record said: {err}"));
    let rules = [
        "install-reads-secrets",
        "install-writes-outside",
        "install-runs-program",
        "install-network",
    ];
    assert!(rules.iter().all(|r| said.contains(r)), "{said}");
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.join("index.json")).unwrap()).unwrap();
    let record = &index["servers"]["scripted"]["install"];
    let beyond: Vec<(String, String)> = record["beyond"]
        .as_array()
        .unwrap_or_else(|| panic!("no record: {index}"))
        .iter()
        .map(|b| {
            let e = &b["effect"];
            let what = e["paths"][0]
                .as_str()
                .or(e["address"].as_str())
                .unwrap_or("");
            (b["rule"].as_str().unwrap().to_string(), what.to_string())
        })
        .collect();
    for (rule, what) in [
        ("install-reads-secrets", "/home/mcp/.ssh/id_ed25519"),
        ("install-writes-outside", "/home/mcp/.bashrc"),
        ("install-runs-program", "/usr/bin/id"),
        ("install-network", "inet 127.0.0.1:9"),
    ] {
        assert!(
            beyond.iter().any(|(r, w)| r == rule && w == what),
            "{rule} {what}: {beyond:?}"
        );
    }
    // Nothing else is beyond (a program is looked for along PATH: each
    // place tried is an exec of `id`).
    for (rule, what) in &beyond {
        let expected = match rule.as_str() {
            "install-reads-secrets" => what == "/home/mcp/.ssh/id_ed25519",
            "install-writes-outside" => what == "/home/mcp/.bashrc",
            "install-runs-program" => what.ends_with("/id"),
            _ => what == "inet 127.0.0.1:9",
        };
        assert!(expected, "{rule} {what} is not the fixture's: {beyond:?}");
    }
    assert!(record["calls"].as_u64().unwrap() > 4, "{record}");
    assert!(
        index["servers"]["scripted-ignored"]
            .get("install")
            .is_none(),
        "no scripts ran, nothing recorded: {index}"
    );

    // What the layers hold, read back with erofs-utils.
    let layer_file = |name: &str| {
        let f = std::fs::read_dir(&store)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                // layer-<name>-<hex key>.erofs: "scripted" is a prefix of
                // "scripted-ignored", so the key must follow the name.
                let file = p.file_name().unwrap().to_string_lossy().to_string();
                file.strip_prefix(&format!("layer-{name}-"))
                    .and_then(|k| k.strip_suffix(".erofs"))
                    .is_some_and(|k| k.bytes().all(|b| b.is_ascii_hexdigit()))
            })
            .unwrap_or_else(|| panic!("no layer for {name}"));
        let to = dir.path().join(format!("x-{name}"));
        let ok = Command::new("fsck.erofs")
            .arg(format!("--extract={}", to.display()))
            .arg(&f)
            .output()
            .unwrap();
        assert!(ok.status.success(), "{ok:?}");
        to.join(format!(
            "opt/mcp/{name}/node_modules/mcpvm-fixture-scripted/built-by-postinstall.txt"
        ))
    };
    let written = std::fs::read_to_string(layer_file("scripted")).unwrap();
    let host_kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let guest_kernel = written.trim().strip_prefix("kernel ").unwrap();
    assert!(
        !guest_kernel.is_empty() && guest_kernel != host_kernel.trim(),
        "written under the guest's kernel ({written:?}), not the host's ({host_kernel:?})"
    );
    assert!(!layer_file("scripted-ignored").exists());
    // The script rewrote the tree's lock in the guest; the layer and the
    // store keep the host's.
    for lock in [
        dir.path()
            .join("x-scripted/opt/mcp/scripted/package-lock.json"),
        store.join("locks/scripted/package-lock.json"),
    ] {
        let text = std::fs::read_to_string(&lock).unwrap();
        assert!(
            !text.contains("tampered") && text.contains("mcpvm-fixture-scripted"),
            "{}: {text}",
            lock.display()
        );
    }
}

/// A catalogue is passed around: its `install_env` must not reach the
/// host's npm or pip. Here it asks the host's node to load a script
/// (`NODE_OPTIONS=--require`) and the host's pip to import a
/// `sitecustomize.py` (`PYTHONPATH`); both would write a marker on the
/// host. The layers build and no marker appears.
#[test]
fn a_catalogues_install_env_runs_nothing_on_the_host() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = dir.path();
    pack_scripted_fixture(d);
    let (node_ran, python_ran) = (d.join("node-ran"), d.join("python-ran"));
    std::fs::write(
        d.join("evil.js"),
        format!(
            "require('fs').writeFileSync({:?}, 'host node ran catalogue code')\n",
            node_ran.display().to_string()
        ),
    )
    .unwrap();
    std::fs::create_dir(d.join("py")).unwrap();
    std::fs::write(
        d.join("py/sitecustomize.py"),
        format!(
            "open({:?}, 'w').write('host python ran catalogue code')\n",
            python_ran.display().to_string()
        ),
    )
    .unwrap();
    let catalogue = d.join("hostile.toml");
    std::fs::write(
        &catalogue,
        format!(
            "[servers.node-options]\npackage = \"mcpvm-fixture-scripted\"\nversion = \"1.0.0\"\n\
             source = \"mcpvm-fixture-scripted-1.0.0.tgz\"\nruntime = \"node\"\n\
             command = \"mcpvm-fixture-scripted\"\nignore_scripts = true\n\
             install_env = {{ NODE_OPTIONS = \"--require={}\" }}\n\n\
             [servers.pythonpath]\npackage = \"mcp-server-time\"\nversion = \"2026.10.19\"\n\
             runtime = \"python\"\ncommand = \"mcp-server-time\"\n\
             install_env = {{ PYTHONPATH = \"{}\" }}\n",
            d.join("evil.js").display(),
            d.join("py").display()
        ),
    )
    .unwrap();
    // Shown to work: the same interpreters do run these when asked.
    let node = Command::new("node")
        .env(
            "NODE_OPTIONS",
            format!("--require={}", d.join("evil.js").display()),
        )
        .args(["-e", "0"])
        .status()
        .unwrap();
    assert!(
        node.success() && node_ran.exists(),
        "the exploit itself works"
    );
    std::fs::remove_file(&node_ran).unwrap();

    let store = d.join("store");
    let (c, s) = (catalogue.to_str().unwrap(), store.to_str().unwrap());
    let (rc, out, err) = image_cmd("build", c, s, &[]);
    assert_eq!(rc, 0, "{out}\n{err}");
    assert!(
        !node_ran.exists(),
        "the host's node ran the catalogue's NODE_OPTIONS"
    );
    assert!(
        !python_ran.exists(),
        "the host's pip ran the catalogue's PYTHONPATH"
    );
}

/// A dependency resolved from git (or a URL) rather than the registry is
/// refused: npm would clone it on the host, where a `prepare` script can
/// run. Here a package (the catalogue's own `source`) depends on a local
/// git repository whose `prepare` writes a marker: the layer fails with
/// npm's refusal named, the marker never appears, nothing is left in the
/// store.
#[test]
fn a_dependency_from_git_is_refused_and_nothing_of_it_runs() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = dir.path();
    let marker = d.join("prepare-ran");
    let repo = d.join("repo");
    std::fs::create_dir(&repo).unwrap();
    std::fs::write(
        repo.join("package.json"),
        format!(
            r#"{{"name":"evil-dep","version":"1.0.0","scripts":{{"prepare":"node -e \"require('fs').writeFileSync({:?}, 'x')\""}}}}"#,
            marker.display().to_string()
        ),
    )
    .unwrap();
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(["-c", "user.email=t@t", "-c", "user.name=t"])
            .args(args)
            .current_dir(&repo)
            .status()
            .unwrap();
        assert!(ok.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-qm", "evil"]);
    let top = d.join("top");
    std::fs::create_dir(&top).unwrap();
    std::fs::write(top.join("bin.js"), "#!/usr/bin/env node\n").unwrap();
    std::fs::write(
        top.join("package.json"),
        format!(
            r#"{{"name":"top-pkg","version":"1.0.0","bin":{{"top-pkg":"bin.js"}},"dependencies":{{"evil-dep":"git+file://{}"}}}}"#,
            repo.display()
        ),
    )
    .unwrap();
    let pack = Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(d)
        .arg(&top)
        .output()
        .unwrap();
    assert!(pack.status.success(), "npm pack: {pack:?}");
    let catalogue = d.join("git.toml");
    std::fs::write(
        &catalogue,
        "[servers.gitdep]\npackage = \"top-pkg\"\nversion = \"1.0.0\"\n\
         source = \"top-pkg-1.0.0.tgz\"\nruntime = \"node\"\ncommand = \"top-pkg\"\n",
    )
    .unwrap();
    let store = d.join("store");
    let (c, s) = (catalogue.to_str().unwrap(), store.to_str().unwrap());
    let (rc, out, err) = image_cmd("build", c, s, &[]);
    assert_eq!(rc, 3, "the layer fails: {out}\n{err}");
    let said = format!("{out}\n{err}");
    assert!(
        said.contains("evil-dep") && said.contains("git"),
        "the refusal names the dependency and why: {said}"
    );
    assert!(!marker.exists(), "a prepare script ran on the host");
    assert!(
        stages_and_layers(&store).is_empty(),
        "{:?}",
        stages_and_layers(&store)
    );
}

/// A layer whose sandbox runs out of time fails with a line that says so
/// and names the option that gives it more; nothing is left half-built.
#[test]
fn a_sandbox_out_of_time_fails_its_layer_and_names_the_option() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    pack_scripted_fixture(dir.path());
    let catalogue = dir.path().join("slow.toml");
    std::fs::write(
        &catalogue,
        "[servers.slow]\npackage = \"mcpvm-fixture-scripted\"\nversion = \"1.0.0\"\n\
         source = \"mcpvm-fixture-scripted-1.0.0.tgz\"\nruntime = \"node\"\n\
         command = \"mcpvm-fixture-scripted\"\n\
         install_env = { MCPVM_FIXTURE_SKIP_DOWNLOAD = \"1\" }\n",
    )
    .unwrap();
    let store = dir.path().join("store");
    let (c, s) = (catalogue.to_str().unwrap(), store.to_str().unwrap());
    // Two seconds: the VM cannot even boot in that time.
    let (rc, out, err) = image_cmd("build", c, s, &["--sandbox-timeout", "2"]);
    assert_ne!(rc, 0, "{out}\n{err}");
    assert!(
        err.contains("the microVM did not finish in 2 s")
            && err.contains("mcpvm image build --sandbox-timeout SECS"),
        "{err}"
    );
    let left = stages_and_layers(&store);
    assert!(left.is_empty(), "{left:?}");
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8_lossy(&out.stdout)[..64].to_string()
}

/// A layer's tree is resolved once and locked: a rebuild (its file lost,
/// here) installs the locked tree and gives the same bytes, for npm and
/// for pip; `--update` resolves again on purpose; the lock's digest is in
/// the index and in `image list`.
#[test]
fn a_rebuild_installs_the_locked_tree_and_update_resolves_again() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let store = dir.path().join("store");
    let s = store.to_str().unwrap();
    let build = |extra: &[&str]| {
        let mut args = vec!["image", "build", "--servers", "memory,time", "--images", s];
        args.extend(extra);
        let (rc, out, err) = mcpvm(&args);
        assert_eq!(rc, 0, "{out}\n{err}");
        err
    };
    let err = build(&[]);
    assert!(
        err.contains("memory (@modelcontextprotocol/server-memory 2026.8.31): installing (resolving its dependencies)"),
        "{err}"
    );
    let index = || -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(store.join("index.json")).unwrap()).unwrap()
    };
    let first = index();
    let layer =
        |i: &serde_json::Value, n: &str| store.join(i["servers"][n]["layer"].as_str().unwrap());
    let lock =
        |i: &serde_json::Value, n: &str| i["servers"][n]["lock"].as_str().unwrap().to_string();
    let digests: Vec<(String, String)> = ["memory", "time"]
        .iter()
        .map(|n| (lock(&first, n), sha256(&layer(&first, n))))
        .collect();
    assert!(store.join("locks/memory/package-lock.json").is_file());
    let pinned = std::fs::read_to_string(store.join("locks/time/requirements.lock")).unwrap();
    assert!(
        pinned
            .lines()
            .all(|l| l.contains("==") && l.contains(" --hash=sha256:"))
            && pinned.contains("mcp-server-time==2026.10.19"),
        "{pinned}"
    );

    for n in ["memory", "time"] {
        std::fs::remove_file(layer(&first, n)).unwrap();
    }
    let err = build(&[]);
    for (n, (lock_digest, _)) in ["memory", "time"].iter().zip(&digests) {
        assert!(
            err.contains(&format!("installing from its lock {lock_digest}")),
            "{n}: {err}"
        );
    }
    let again = index();
    for (n, (lock_digest, bytes)) in ["memory", "time"].iter().zip(&digests) {
        assert_eq!(&lock(&again, n), lock_digest);
        assert_eq!(
            &sha256(&layer(&again, n)),
            bytes,
            "{n}: the same tree, the same bytes"
        );
    }

    let err = build(&["--update", "time"]);
    assert!(
        err.contains(
            "time (mcp-server-time 2026.10.19): installing (--update: resolving it again)"
        ),
        "{err}"
    );
    assert!(
        err.contains("memory (@modelcontextprotocol/server-memory 2026.8.31): cached"),
        "{err}"
    );

    let (rc, out, _) = mcpvm(&["--json", "image", "list", "--images", s]);
    assert_eq!(rc, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let listed = v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "memory")
        .unwrap();
    assert_eq!(listed["lock"].as_str(), Some(digests[0].0.as_str()));
}

/// Servers named by their package (`--package`, as `run --package` does
/// on first use): each layer is stored under a name of its own, with the
/// package's own executable as its command, not a dependency's.
#[test]
fn packages_build_with_their_own_command() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let store = dir.path().join("store");
    let (rc, out, err) = mcpvm(&[
        "image",
        "build",
        "--package",
        "npm:@modelcontextprotocol/server-memory@2026.8.31",
        "--package",
        "pypi:mcp-server-time==2026.10.19",
        "--images",
        store.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{out}\n{err}");
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(store.join("index.json")).unwrap()).unwrap();
    let servers = index["servers"].as_object().unwrap();
    assert_eq!(
        servers.keys().collect::<Vec<_>>(),
        [
            "npm-modelcontextprotocol-server-memory-2026-8-31",
            "pypi-mcp-server-time-2026-10-19"
        ],
        "only the packages were built"
    );
    assert_eq!(
        servers["npm-modelcontextprotocol-server-memory-2026-8-31"]["command"],
        "mcp-server-memory"
    );
    // mcp-server-time's dependencies bring scripts of their own (httpx,
    // …): the package's console script is the one.
    assert_eq!(
        servers["pypi-mcp-server-time-2026-10-19"]["command"],
        "mcp-server-time"
    );
}

/// An old release as it shipped (`--as-released`): mcp-server-fetch
/// 2025.4.7 asks for `mcp>=1.1.3`, and today's resolution takes the 2.x
/// SDK, which moved the `McpError` it imports (it dies at start). As
/// released, its tree is what PyPI had when it was uploaded: the lock
/// says that date, and holds mcp 1.x. The two are layers of their own.
#[test]
fn an_old_release_installs_as_it_shipped() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let store = dir.path().join("store");
    let spec = "pypi:mcp-server-fetch==2025.4.7";
    for extra in [&["--as-released"][..], &[]] {
        let mut args = vec!["image", "build", "--package", spec];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--images", store.to_str().unwrap()]);
        let (rc, out, err) = mcpvm(&args);
        assert_eq!(rc, 0, "{out}\n{err}");
    }
    let lock = |name: &str| {
        std::fs::read_to_string(store.join("locks").join(name).join("requirements.lock"))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let mcp = |lock: &str| {
        lock.lines()
            .find_map(|l| l.strip_prefix("mcp=="))
            .map(|v| v.split([' ', '\\']).next().unwrap_or("").to_string())
            .unwrap_or_default()
    };
    let released = lock("pypi-mcp-server-fetch-2025-4-7-as-released");
    assert!(
        released.starts_with(
            "# as released: 2025-04-07T09:11:06Z (PyPI's upload of mcp-server-fetch==2025.4.7)"
        ),
        "{released}"
    );
    assert!(mcp(&released).starts_with("1."), "mcp {}", mcp(&released));
    assert!(released.contains("--hash=sha256:"), "installed by hash");
    let today = lock("pypi-mcp-server-fetch-2025-4-7");
    assert!(!today.contains("as released"));
    assert!(
        !mcp(&today).starts_with("1."),
        "today's takes a newer SDK: {}",
        mcp(&today)
    );
}

/// `run --package` builds a layer on first use through `mcpvm-tools`
/// (the binary a VM runs in holds no image builder): the build's progress
/// comes through as it goes, and a build that fails is one error line,
/// the installer's own words in it, with nothing left in the store.
#[test]
fn run_package_builds_its_layer_through_the_tools_binary() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let store = dir.path().join("store");
    let spec = "npm:@modelcontextprotocol/server-memory@0.0.0-mcpvm-no-such-version";
    let (rc, out, err) = mcpvm(&[
        "run",
        "--images",
        store.to_str().unwrap(),
        "--package",
        spec,
    ]);
    assert_eq!(rc, 1, "{out}\n{err}");
    assert!(
        err.contains(&format!("package: {spec}: building its layer in")),
        "{err}"
    );
    assert!(
        err.lines().any(|l| l.starts_with("image: ")),
        "progress: {err}"
    );
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("mcpvm: ")).collect();
    assert_eq!(errors.len(), 1, "one error line: {err}");
    assert!(
        errors[0].starts_with(&format!("mcpvm: --package {spec}: npm install "))
            && (errors[0].contains("ETARGET") || errors[0].contains("No matching version")),
        "npm's words: {err}"
    );
    assert!(!err.contains("layers failed"), "no batch summary: {err}");
    assert_eq!(stages_and_layers(&store), Vec::<String>::new());
}

/// `apt = [...]`: the Debian package and what it needs that the runtime
/// lacks are unpacked into the server's layer, listed with their hashes
/// in `apt.lock`; a package Debian does not have fails that entry alone,
/// named.
#[test]
fn apt_packages_are_unpacked_into_the_layer() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let catalogue = dir.path().join("apt.toml");
    let entry = |name: &str, apt: &str| {
        format!(
            "[servers.{name}]\npackage = \"@modelcontextprotocol/server-memory\"\n\
             version = \"2026.8.31\"\nruntime = \"node\"\ncommand = \"mcp-server-memory\"\n\
             apt = [\"{apt}\"]\n\n"
        )
    };
    std::fs::write(
        &catalogue,
        entry("with-rg", "ripgrep") + &entry("with-nothing", "mcpvm-no-such-package"),
    )
    .unwrap();
    let store = dir.path().join("store");
    let (c, s) = (catalogue.to_str().unwrap(), store.to_str().unwrap());
    let (rc, out, err) = image_cmd("build", c, s, &[]);
    assert_eq!(rc, 3, "{out}\n{err}");
    let failed = out
        .lines()
        .find(|l| l.starts_with("with-nothing ") && l.contains("FAILED"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        failed.contains("mcpvm-no-such-package") && failed.contains("Unable to locate package"),
        "{failed}"
    );
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(store.join("index.json")).unwrap()).unwrap();
    let layer = store.join(index["servers"]["with-rg"]["layer"].as_str().unwrap());
    let x = dir.path().join("x");
    let ok = Command::new("fsck.erofs")
        .arg(format!("--extract={}", x.display()))
        .arg(&layer)
        .output()
        .unwrap();
    assert!(ok.status.success(), "{ok:?}");
    use std::os::unix::fs::PermissionsExt;
    let rg = std::fs::metadata(x.join("usr/bin/rg")).expect("rg in the layer");
    assert!(rg.permissions().mode() & 0o111 != 0);
    let lock = std::fs::read_to_string(x.join("opt/mcp/with-rg/apt.lock")).unwrap();
    assert!(
        lock.lines()
            .any(|l| l.starts_with("ripgrep 13.") && l.contains(" sha256:")),
        "{lock}"
    );
    // The server is still there, beside it.
    assert!(x
        .join("opt/mcp/with-rg/node_modules/.bin/mcp-server-memory")
        .exists());
}

/// The program headers of an ELF file name no interpreter: a static
/// binary, which runs on any image.
fn is_static_elf(bytes: &[u8]) -> bool {
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap()) as usize;
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" {
        return false;
    }
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    (0..phnum).all(|i| {
        let p = phoff + i * phentsize;
        u32::from_le_bytes(bytes[p..p + 4].try_into().unwrap()) != 3 // PT_INTERP
    })
}

/// A crate as a server (`runtime = "cargo"`): fetched and vendored on the
/// host, built in a microVM with no network — its build script's marker
/// never appears on the host, and the kernel it saw is the guest's — into
/// a static binary in the layer with the host's Cargo.lock beside it.
/// The binary answers MCP (run here: it is static, and our fixture).
#[test]
fn a_crate_is_built_in_a_microvm_into_a_static_binary() {
    let marker = Path::new("/tmp/mcpvm-fixture-cargo-build-ran");
    let _ = std::fs::remove_file(marker);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // A .crate is a gzipped tar of NAME-VERSION/.
    let fixture = common::workspace().join("mcpvm/tests/fixtures/cargo-server");
    let krate = dir.path().join("mcpvm-cargo-fixture-0.1.0.crate");
    let tar = Command::new("tar")
        .arg("-czf")
        .arg(&krate)
        .arg("-C")
        .arg(&fixture)
        .args(["--transform", "s,^\\.,mcpvm-cargo-fixture-0.1.0,", "."])
        .output()
        .unwrap();
    assert!(tar.status.success(), "{tar:?}");
    let catalogue = dir.path().join("crate.toml");
    std::fs::write(
        &catalogue,
        "[servers.crate-server]\npackage = \"mcpvm-cargo-fixture\"\nversion = \"0.1.0\"\n\
         runtime = \"cargo\"\nsource = \"mcpvm-cargo-fixture-0.1.0.crate\"\n\
         command = \"mcpvm-cargo-fixture\"\n",
    )
    .unwrap();
    let store = dir.path().join("store");
    let (c, s) = (catalogue.to_str().unwrap(), store.to_str().unwrap());
    let (rc, out, err) = image_cmd("build", c, s, &[]);
    assert_eq!(rc, 0, "{out}\n{err}");
    assert!(
        err.contains("has no Cargo.lock: resolving one")
            && err.contains("building mcpvm-cargo-fixture of mcpvm-cargo-fixture 0.1.0 in a microVM (no network)"),
        "{err}"
    );
    assert!(!marker.exists(), "the build script ran on the host");
    // cargo's lines come as the build goes (nested: through the serial
    // log, before the testbed says the scenario ended), each once.
    let compiling = "Compiling mcpvm-cargo-fixture v0.1.0";
    assert_eq!(err.matches(compiling).count(), 1, "{err}");
    if let Some(end) = err.find("testbed: scenario exit") {
        assert!(err.find(compiling).unwrap() < end, "{err}");
    }

    let x = dir.path().join("x");
    extract_layer(&store, "crate-server", &x);
    let server = x.join("opt/mcp/crate-server");
    let bin = server.join("bin/mcpvm-cargo-fixture");
    let bytes = std::fs::read(&bin).unwrap();
    assert!(is_static_elf(&bytes), "a static binary");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&bin).unwrap().permissions().mode() & 0o777,
        0o755
    );
    let names: Vec<_> = std::fs::read_dir(server.join("bin"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names, ["mcpvm-cargo-fixture"], "the binaries only");
    let lock = std::fs::read_to_string(server.join("Cargo.lock")).unwrap();
    assert!(lock.contains("name = \"mcpvm-cargo-fixture\""), "{lock}");
    assert_eq!(
        std::fs::read_to_string(store.join("locks/crate-server/Cargo.lock")).unwrap(),
        lock
    );
    let (_, list, _) = image_cmd("list", c, s, &[]);
    assert!(
        list.lines()
            .any(|l| l.starts_with("crate-server ") && l.contains("cargo") && l.contains("built")),
        "{list}"
    );

    // It answers MCP, and was built under the guest's kernel.
    let mut child = Command::new(&bin)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}\n\
              {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"built_on\"}}\n",
        )
        .unwrap();
    let answer = String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap();
    assert!(
        answer.contains("\"serverInfo\":{\"name\":\"mcpvm-cargo-fixture\""),
        "{answer}"
    );
    let host_kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let built_on = answer
        .split("built on ")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_default();
    assert!(
        !built_on.is_empty() && built_on != host_kernel.trim(),
        "built under the guest's kernel ({built_on:?}), not the host's ({host_kernel:?})"
    );

    // And as a catalogued server in a microVM: the runtime image and this
    // layer, no tools layer (the binary is static).
    let mut files = common::run_payload();
    files.extend(common::store_files(&store, &["crate-server"]));
    // The catalogue names its source file, whose bytes key the layer.
    files.push(format!("{c}:crate.toml"));
    files.push(format!(
        "{}:mcpvm-cargo-fixture-0.1.0.crate",
        krate.display()
    ));
    let scenario = common::workspace().join("mcpvm/tests/scenarios/crate-server.sh");
    let r = common::run_scenario(&scenario, &files);
    let serve = r.case("serve");
    assert_eq!(serve.rc, 0, "{serve:?}");
    assert!(
        serve
            .stdout
            .contains("\"serverInfo\":{\"name\":\"mcpvm-cargo-fixture\"")
            && serve.stdout.contains(&format!("built on {built_on}")),
        "{serve:?}"
    );
}

/// `cargo:NAME@VERSION` from crates.io: the crate is fetched and checked
/// against the index's hash, its tree resolved; a crate with no binary
/// is refused with that reason before any VM starts, and nothing stays.
#[test]
fn a_crate_from_crates_io_is_fetched_and_a_library_is_refused() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let store = dir.path().join("store");
    let s = store.to_str().unwrap();
    let (rc, out, err) = mcpvm(&[
        "image",
        "build",
        "--package",
        "cargo:itoa@1.0.15",
        "--images",
        s,
    ]);
    assert_ne!(rc, 0, "{out}\n{err}");
    assert!(
        err.contains("cargo-itoa-1-0-15")
            && err.contains("using the Cargo.lock itoa 1.0.15 was published with")
            && err.contains("it has no binary target to run as a server"),
        "{err}"
    );
    assert!(
        !err.contains("microVM"),
        "no VM for a crate that cannot serve: {err}"
    );
    let left = stages_and_layers(&store);
    assert!(left.is_empty(), "{left:?}");
    let (rc, _, err) = mcpvm(&[
        "image",
        "build",
        "--package",
        "cargo:itoa@0.0.0-none",
        "--images",
        s,
    ]);
    assert_ne!(rc, 0);
    assert!(err.contains("crates.io has no itoa 0.0.0-none"), "{err}");
}

/// A package with a `binding.gyp` (mcpvm/tests/fixtures/npm-native, C++
/// through Node-API) is compiled by node-gyp in the install microVM,
/// with the compiler and the pinned node's headers of a tools layer; the
/// host runs no compiler (every compiler on the build's PATH is a trap
/// that leaves a mark), the module loads in the guest with the node the
/// server runs on, and the server's layer holds the module, not the
/// compiler. A plain native build does nothing beyond building: its
/// recorded install has no finding.
#[test]
fn a_native_module_is_compiled_in_the_install_microvm_never_on_the_host() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let fixture = common::workspace().join("mcpvm/tests/fixtures/npm-native");
    let pack = Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(dir.path())
        .arg(&fixture)
        .output()
        .unwrap();
    assert!(pack.status.success(), "npm pack: {pack:?}");
    let trap = dir.path().join("trap");
    let marker = dir.path().join("a-compiler-ran-on-the-host");
    std::fs::create_dir_all(&trap).unwrap();
    for tool in ["cc", "c++", "gcc", "g++", "clang", "clang++", "make", "ld"] {
        use std::os::unix::fs::PermissionsExt;
        let p = trap.join(tool);
        std::fs::write(
            &p,
            format!("#!/bin/sh\necho {tool} >> '{}'\nexit 1\n", marker.display()),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let catalogue = dir.path().join("native.toml");
    std::fs::write(
        &catalogue,
        "[servers.native]\npackage = \"mcpvm-fixture-native\"\nversion = \"1.0.0\"\n\
         source = \"mcpvm-fixture-native-1.0.0.tgz\"\nruntime = \"node\"\n\
         command = \"mcpvm-fixture-native\"\n",
    )
    .unwrap();
    let store = dir.path().join("store");
    let path = format!(
        "{}:{}",
        trap.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(common::artifact("bin/mcpvm"))
        .args(["image", "build", "--catalogue"])
        .arg(&catalogue)
        .args(["--catalogue-only", "--images"])
        .arg(&store)
        .env("PATH", path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("native: mcpvm-fixture-native build native code (binding.gyp)")
            && err.contains(
                "tools layer for builds (gcc, g++, make, libc6-dev, pkg-config, node's headers)"
            )
            && err.contains("gyp info ok"),
        "{err}"
    );
    assert!(
        !marker.exists(),
        "a compiler ran on the host: {:?}",
        std::fs::read_to_string(&marker)
    );

    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.join("index.json")).unwrap()).unwrap();
    let record = &index["servers"]["native"]["install"];
    assert!(record["calls"].as_u64().unwrap() > 100, "{record}");
    assert_eq!(record["beyond"], serde_json::json!([]), "{record}");

    let x = dir.path().join("x");
    extract_layer(&store, "native", &x);
    let pkg = x.join("opt/mcp/native/node_modules/mcpvm-fixture-native");
    let module = std::fs::read(pkg.join("build/Release/native.node")).unwrap();
    assert_eq!(&module[..4], b"\x7fELF");
    let loaded = std::fs::read_to_string(pkg.join("loaded-by-install.txt")).unwrap();
    let host_kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let lines: Vec<&str> = loaded.lines().collect();
    assert_eq!(lines[0], "compiled by node-gyp", "{loaded}");
    assert!(
        lines[1].starts_with("node v26."),
        "the image's node: {loaded}"
    );
    let guest_kernel = lines[2].strip_prefix("kernel ").unwrap();
    assert!(guest_kernel != host_kernel.trim(), "{loaded}");
    // The compiler and the headers were the microVM's only.
    for absent in [
        "usr/bin/gcc",
        "usr/bin/g++",
        "opt/build-tools",
        "usr/include/stdio.h",
    ] {
        assert!(
            !x.join(absent).exists(),
            "{absent} is in the server's layer"
        );
    }
    let tools: Vec<String> = std::fs::read_dir(&store)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("tools-node-") && n.ends_with(".erofs"))
        .collect();
    assert_eq!(tools.len(), 1, "{tools:?}");
}

/// A dependency PyPI has only as a source distribution (proxy_tools
/// 0.1.0, which pywebview and so serena-agent need), named in `sdists`:
/// fetched and checked against PyPI's sha256 on the host, built into a
/// wheel in the install microVM (its setup.py ran there, recorded),
/// installed beside the fixture's own wheel
/// (mcpvm/tests/fixtures/pypi-sdist, made by its make_wheel.py); the
/// lock names the sdist by its hash, and a rebuild from that lock builds
/// it again. Without `sdists` the same package is refused, as before.
#[test]
fn a_source_distribution_is_built_in_the_install_microvm() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let make = common::workspace().join("mcpvm/tests/fixtures/pypi-sdist/make_wheel.py");
    let made = Command::new("python3")
        .arg(&make)
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let entry = |name: &str, extra: &str| {
        format!(
            "[servers.{name}]\npackage = \"mcpvm-fixture-sdist\"\nversion = \"1.0.0\"\n\
             source = \"mcpvm_fixture_sdist-1.0.0-py3-none-any.whl\"\nruntime = \"python\"\n\
             command = \"mcpvm-fixture-sdist\"\n{extra}\n"
        )
    };
    let catalogue = dir.path().join("sdist.toml");
    std::fs::write(
        &catalogue,
        entry("sdist", "sdists = [\"proxy_tools==0.1.0\"]") + &entry("wheels-only", ""),
    )
    .unwrap();
    let store = dir.path().join("store");
    let (c, s) = (catalogue.to_str().unwrap(), store.to_str().unwrap());
    let (rc, _, err) = image_cmd("build", c, s, &[]);
    assert_eq!(rc, 3, "the wheels-only entry fails: {err}");
    assert!(
        err.contains("sdist: building proxy_tools==0.1.0 from source in a microVM")
            && err.contains("Successfully built proxy_tools"),
        "{err}"
    );
    assert!(
        err.contains("wheels-only")
            && err.contains("No matching distribution found for proxy_tools"),
        "{err}"
    );
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.join("index.json")).unwrap()).unwrap();
    let record = &index["servers"]["sdist"]["install"];
    let programs = record["programs"].to_string();
    assert!(
        record["calls"].as_u64().unwrap() > 10 && programs.contains("\"/usr/bin/python3\""),
        "the build ran in the guest and was recorded: {record}"
    );
    assert_eq!(record["beyond"], serde_json::json!([]), "{record}");
    let x = dir.path().join("x");
    extract_layer(&store, "sdist", &x);
    let site = x.join("opt/mcp/sdist");
    assert!(site.join("proxy_tools/__init__.py").is_file());
    assert!(site.join("mcpvm_fixture_sdist/__init__.py").is_file());
    let lock = std::fs::read_to_string(store.join("locks/sdist/requirements.lock")).unwrap();
    assert!(
        lock.starts_with(
            "# sdist proxy_tools==0.1.0 proxy_tools-0.1.0.tar.gz \
             sha256:ccb3751f529c047e2d8a58440d86b205303cf0fe8146f784d1cbcd94f0a28010"
        ) && !lock.contains("proxy-tools @"),
        "{lock}"
    );
    let left: Vec<String> = std::fs::read_dir(&store)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.contains(".sdists") || n.starts_with(".stage"))
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // From the kept lock: built again, installed the same.
    for f in std::fs::read_dir(&store).unwrap().flatten() {
        if f.file_name().to_string_lossy().starts_with("layer-sdist-") {
            std::fs::remove_file(f.path()).unwrap();
        }
    }
    let (rc, _, err) = image_cmd("build", c, s, &["--servers", "sdist"]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.contains("installing from its lock") && err.contains("Successfully built proxy_tools"),
        "{err}"
    );
}
