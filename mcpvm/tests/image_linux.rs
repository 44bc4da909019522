//! `mcpvm run --image`: the shared runtime root image (EROFS, built by
//! guest-image/rootfs/build) as the guest's root, with and without the
//! tmpfs overlay, on real KVM (the testbed here). One testbed session runs
//! every case (scenarios/image.sh).

mod common;

use std::sync::OnceLock;

use common::{artifact, run_scenario, Case, Results};

fn results() -> &'static Results {
    static R: OnceLock<Results> = OnceLock::new();
    R.get_or_init(|| {
        let mut files = common::run_payload();
        files.push(format!(
            "{}:runtime.erofs",
            artifact("runtime.erofs").display()
        ));
        let scenario = common::workspace().join("mcpvm/tests/scenarios/image.sh");
        run_scenario(&scenario, &files)
    })
}

fn case(name: &str) -> &'static Case {
    results().case(name)
}

#[test]
fn python_node_and_git_run_from_the_image() {
    let c = case("runtimes");
    assert_eq!(c.rc, 0, "{c:?}");
    assert!(c.stdout.contains("python (3, 11)"), "{}", c.stdout);
    // The image carries node.lock's default node, exactly.
    let lock: toml::Table =
        toml::from_str(include_str!("../../guest-image/runtimes/node.lock")).unwrap();
    let default = lock["default"].as_str().unwrap();
    let version = lock["node"][default]["version"].as_str().unwrap();
    let node = format!("node v{version}\n");
    assert!(c.stdout.contains(&node), "{node:?} in {c:?}");
    assert!(c.stdout.contains("git version 2."), "{}", c.stdout);
    assert!(c.stdout.contains("Debian GNU/Linux 12"), "{}", c.stdout);
}

/// The tools a developer's machine has, and that corpus servers call
/// (guest-image/rootfs/packages says which server calls which), run in
/// the guest; ICU loads.
#[test]
fn a_developers_tools_and_icu_are_in_the_image() {
    let c = case("dev_tools");
    assert_eq!(c.rc, 0, "{c:?}");
    let out = &c.stdout;
    // PID 1 is the guest agent; ps sees it through the guest's /proc.
    assert!(
        out.contains("PID COMMAND") && out.contains("    1 "),
        "{out}"
    );
    assert!(out.contains("revision"), "lsof: {out}");
    assert!(out.contains("curl 7."), "{out}");
    assert!(out.contains("UnZip 6."), "{out}");
    assert!(out.contains("/usr/bin/which"), "{out}");
    assert!(out.contains("icu loaded"), "{out}");
}

/// A server runs as the unprivileged user mcp, as on a developer's
/// machine: its home, the workspace the host sent and /tmp are its own,
/// the system is not; a low port is open to it.
#[test]
fn servers_run_as_an_unprivileged_user_with_a_home_of_their_own() {
    let c = case("server_user");
    assert_eq!(c.rc, 0, "{c:?}");
    let out = &c.stdout;
    assert!(out.contains("uid=1000(mcp) gid=1000(mcp)"), "{out}");
    assert!(
        out.contains("HOME=/home/mcp USER=mcp XDG=/run/user/1000"),
        "{out}"
    );
    for line in [
        "home-writable",
        "workspace-writable",
        "tmp-writable",
        "mcp:x:1000:1000:",
        "bound port 80",
    ] {
        assert!(out.contains(line), "{line} in {out}");
    }
    assert!(out.contains("'/etc/x': Permission denied"), "{out}");
}

#[test]
fn a_profile_may_run_the_server_as_root() {
    let c = case("root_user");
    assert_eq!(c.rc, 0, "{c:?}");
    assert_eq!(c.stdout, "0\nHOME=/root\n", "{c:?}");
}

#[test]
fn the_overlay_takes_writes_and_the_image_stays_byte_for_byte_the_same() {
    let c = case("overlay_write");
    assert_eq!(c.rc, 0, "{c:?}");
    assert!(
        c.stdout.contains("written") && c.stdout.contains("ok-opt"),
        "{}",
        c.stdout
    );
    assert_eq!(
        results().file("image_before.sha"),
        results().file("image_after.sha")
    );
}

#[test]
fn without_the_overlay_the_root_is_read_only() {
    let c = case("read_only_root");
    assert_ne!(c.rc, 0, "{c:?}");
    assert!(c.stderr.contains("Read-only file system"), "{}", c.stderr);
    // The server's user still starts, in a home it cannot change.
    let c = case("read_only_home");
    assert_ne!(c.rc, 0, "{c:?}");
    assert_eq!(c.stdout, "1000\n", "{c:?}");
    assert!(c.stderr.contains("Read-only file system"), "{}", c.stderr);
}

#[test]
fn a_damaged_or_missing_image_is_one_clear_error_and_leaves_nothing() {
    let c = case("bad_image");
    assert_eq!(c.rc, 1, "{c:?}");
    assert!(
        c.stderr
            .contains("bad.img is not an EROFS root image (no EROFS superblock)"),
        "{}",
        c.stderr
    );
    assert_eq!(c.stderr.trim().lines().count(), 1, "{}", c.stderr);
    let c = case("missing_image");
    assert_eq!(c.rc, 1, "{c:?}");
    assert!(
        c.stderr.contains("Cannot open image /nonexistent.erofs"),
        "{}",
        c.stderr
    );
    // The earlier runs removed their run directories; these never made one.
    assert_eq!(results().file("rundirs_left.txt").trim(), "");
}
