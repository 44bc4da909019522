//! The `mcpvm-tools` binary as users reach it: its help lists every
//! command of both binaries, and the hidden Firecracker peer refuses what
//! it cannot run with one clear error. (Building this test also builds
//! the binary beside `mcpvm` for the workspace's other tests, which hand
//! commands over to it.)

use std::process::Command;

fn tools(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpvm-tools"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_help_lists_every_command_and_hides_the_peer() {
    let (code, help, _) = tools(&["--help"]);
    assert_eq!(code, 0);
    for command in ["run", "probe", "audit", "boot", "image", "bench"] {
        assert!(
            help.contains(&format!("\n  {command} ")),
            "{command}: {help}"
        );
    }
    let (code, help, _) = tools(&["bench", "--help"]);
    assert_eq!(code, 0);
    assert!(
        help.contains("first-response") && !help.contains("peer-run"),
        "{help}"
    );
}

#[test]
fn the_firecracker_peer_refuses_what_it_cannot_run() {
    for (flag, args) in [
        ("--warm", &["--warm", "--", "/bin/cat"][..]),
        ("--listen", &["--listen", "127.0.0.1:0", "--", "/bin/cat"]),
        ("--from-snapshot", &["--from-snapshot", "/nonexistent"]),
    ] {
        let mut argv = vec![
            "bench",
            "peer-run",
            "--firecracker",
            "/nonexistent/firecracker",
        ];
        argv.extend(args);
        let (code, _, err) = tools(&argv);
        assert_eq!(code, 1, "{flag}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(
            err.starts_with("mcpvm: The Firecracker peer boots a plan: it runs without ")
                && err.contains(flag),
            "{flag}: {err}"
        );
    }
}
