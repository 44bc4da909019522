//! The egress proxy as `mcpvm run` starts it: its own process under its
//! own seccomp filter, handed a listener and the events file. The host's
//! real resolver and a real TCP server on loopback stand in for the
//! internet; nothing leaves the machine.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

use mcpvm::egress::process::Egress;
use mcpvm_protocol::egress::{Reply, Request};
use withholding::network::NetworkPolicy;

fn ask(sock: &Path, req: &Request) -> (Reply, UnixStream) {
    let s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    (&s).write_all(req.line().as_bytes()).unwrap();
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while (&s).read(&mut b).unwrap() == 1 && b[0] != b'\n' {
        line.push(b[0]);
    }
    let reply = serde_json::from_slice(&line)
        .unwrap_or_else(|e| panic!("no reply ({e}): did the proxy die under its filter?"));
    (reply, s)
}

#[test]
fn the_proxy_resolves_connects_and_logs_under_its_seccomp_filter() {
    let dir = tempfile::tempdir().unwrap();
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (mut s, _) = server.accept().unwrap();
        let mut got = [0u8; 5];
        s.read_exact(&mut got).unwrap();
        s.write_all(b"HTTP/1.0 200 OK\r\n\r\nhello").unwrap();
    });
    let rules: Vec<String> = ["localhost", "127.0.0.1"].map(String::from).to_vec();
    let policy = NetworkPolicy::parse(&rules).unwrap();
    let egress = Egress::spawn_exe(
        Path::new(env!("CARGO_BIN_EXE_mcpvm")),
        &policy,
        vmm::SeccompMode::On,
    )
    .unwrap();
    let sock = dir.path().join("egress.sock");
    let events_path = dir.path().join("events.jsonl");
    let events = std::fs::File::create(&events_path).unwrap();
    egress
        .hand_over(UnixListener::bind(&sock).unwrap(), Some(&events), 12.5)
        .unwrap();

    // The host's resolver (files, maybe nscd and DNS) under the filter.
    let name = |n: &str| Request::Resolve {
        name: n.into(),
        qtype: "A".into(),
        during: None,
    };
    let (r, _) = ask(&sock, &name("localhost"));
    assert_eq!(
        r,
        Reply::Resolved {
            addresses: vec![Ipv4Addr::LOCALHOST]
        }
    );
    let (r, _) = ask(&sock, &name("elsewhere.invalid"));
    assert!(matches!(r, Reply::Denied { .. }), "{r:?}");
    let connect = Request::Connect {
        address: Ipv4Addr::LOCALHOST,
        port,
        during: None,
    };
    let (r, s) = ask(&sock, &connect);
    assert_eq!(r, Reply::Connected);
    (&s).write_all(b"GET /").unwrap();
    let mut body = String::new();
    (&s).read_to_string(&mut body).unwrap();
    assert!(body.ends_with("hello"), "{body}");
    drop(s); // the connection's event comes when both sides have ended
    let refused = Request::Connect {
        address: Ipv4Addr::new(169, 254, 169, 254),
        port: 80,
        during: None,
    };
    assert!(matches!(ask(&sock, &refused).0, Reply::Denied { .. }));

    // Dropping the handle ends the process, which has written every event.
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::read_to_string(&events_path)
        .unwrap()
        .lines()
        .count()
        < 4
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(egress);
    let text = std::fs::read_to_string(&events_path).unwrap();
    let kinds: Vec<(String, bool)> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| {
            (
                v["kind"].as_str().unwrap().to_string(),
                v["allowed"].as_bool().unwrap(),
            )
        })
        .collect();
    // The connection's event comes when it ends: maybe after the refusal.
    let mut sorted = kinds.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            ("connect".into(), false),
            ("connect".into(), true),
            ("dns".into(), false),
            ("dns".into(), true)
        ],
        "{text}"
    );
    assert_eq!(kinds[..2], [("dns".into(), true), ("dns".into(), false)]);
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert!(
        first["at_ms"].as_f64().unwrap() >= 12.5,
        "at_ms counts from the run's start"
    );
}
