//! The workspace thread under its host seccomp filter, on the host: a
//! child process serves a real directory (files, a subdirectory, a
//! symlink, an executable) with `--seccomp on`'s filter while this test
//! plays the guest: it reads the tar, then sends back a changed copy.
//! A call outside the filter would end the child with 159.

use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::Command;

use mcpvm::workspace::{parse_workspace, start_transfer};

const CHILD: &str = "MCPVM_WORKSPACE_CHILD";

#[test]
fn the_workspace_round_trip_stays_within_its_filter() {
    if let Ok(dir) = std::env::var(CHILD) {
        let sock = format!("{dir}.sock");
        let listener = UnixListener::bind(&sock).unwrap();
        // Relative, as users give it (`--workspace ws,rw`).
        let dir_path = std::path::Path::new(&dir);
        std::env::set_current_dir(dir_path.parent().unwrap()).unwrap();
        let name = dir_path.file_name().unwrap().to_str().unwrap();
        let ws = parse_workspace(&format!("{name},rw")).unwrap();
        let t = start_transfer(listener, ws, 1 << 20, vmm::SeccompMode::On);
        // The guest side, on this (unconfined) thread.
        let mut s = UnixStream::connect(&sock).unwrap();
        // As the agent does: to the tar's end (the host keeps the stream
        // open for a writable workspace until the copy is back).
        let mut names: Vec<String> = tar::Archive::new(&s)
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        names.sort();
        println!("sent: {}", names.join(" "));
        let mut b = tar::Builder::new(Vec::new());
        for (name, data, mode) in [
            ("./kept.txt", &b"kept"[..], 0o644),
            ("./bin/run", b"#!/bin/sh\n", 0o755),
            ("./new/deep/x", b"x", 0o600),
        ] {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(mode);
            h.set_cksum();
            b.append_data(&mut h, name, data).unwrap();
        }
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        h.set_mode(0o777);
        b.append_link(&mut h, "./link", "kept.txt").unwrap();
        std::io::Write::write_all(&mut s, &b.into_inner().unwrap()).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        // The host ends the stream once it has read the copy: the agent
        // powers off only then.
        let mut rest = Vec::new();
        (&s).read_to_end(&mut rest).unwrap();
        assert!(rest.iter().all(|b| *b == 0), "only the tar's padding");
        drop(s);
        match t.finish() {
            Some(Ok(Some(back))) if back.refused.is_empty() => println!("replaced"),
            other => panic!("{other:?}"),
        }
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ws");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("a.txt"), "a").unwrap();
    std::fs::write(dir.join("sub/b.txt"), "b").unwrap();
    std::os::unix::fs::symlink("a.txt", dir.join("to-a")).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "the_workspace_round_trip_stays_within_its_filter",
            "--nocapture",
        ])
        .env(CHILD, &dir)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "status {:?}\n{stdout}\n{stderr}",
        out.status.code()
    );
    assert!(
        stdout.contains("sent: ") && stdout.contains("sub/b.txt") && stdout.contains("to-a"),
        "{stdout}"
    );
    assert!(stdout.contains("replaced"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(dir.join("kept.txt")).unwrap(),
        "kept"
    );
    assert!(dir.join("new/deep/x").exists() && !dir.join("a.txt").exists());
    assert_eq!(
        std::fs::read_link(dir.join("link")).unwrap().to_str(),
        Some("kept.txt")
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.join("bin/run"))
        .unwrap()
        .permissions()
        .mode();
    // A file the host never had comes back not executable
    // (docs/security.md: a workspace cannot attack the host).
    assert_eq!(mode & 0o777, 0o644);
}
