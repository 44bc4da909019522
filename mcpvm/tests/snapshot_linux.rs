//! MCP snapshots end to end on real KVM (directly, or in the testbed):
//! `mcpvm run --snapshot-to` takes the fixture, and server-memory from the
//! catalogue, after `initialize`; ten `mcpvm run --from-snapshot` VMs
//! restored from each at once each hold an MCP session of their own; the
//! warm-start cache; bad snapshots are refused.

mod common;

use std::collections::HashSet;
use std::sync::OnceLock;

use common::{run_scenario_within, Results};

const COPIES: usize = 10;

fn results() -> &'static Results {
    static R: OnceLock<Results> = OnceLock::new();
    R.get_or_init(|| {
        let mut files = common::run_payload();
        files.extend(common::image_store_files(&["memory"]));
        run_scenario_within(
            &common::workspace().join("mcpvm/tests/scenarios/snapshot.sh"),
            &files,
            1500,
        )
    })
}

fn file(name: &str) -> &'static str {
    results()
        .files
        .get(name)
        .map(String::as_str)
        .unwrap_or_else(|| panic!("no {name}; {:?}", results().failure))
}

/// The JSON-RPC answers one restored copy wrote, by id.
fn answers(copy: usize) -> Vec<serde_json::Value> {
    session(&format!("copy{copy}"))
}

/// The JSON-RPC answers of session `name` (snapshot.sh), by id: all four.
fn session(name: &str) -> Vec<serde_json::Value> {
    let out = file(&format!("{name}.txt"));
    let mut by_id: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    by_id.sort_by_key(|v: &serde_json::Value| v["id"].as_i64());
    assert_eq!(
        by_id.iter().map(|v| v["id"].as_i64()).collect::<Vec<_>>(),
        [1, 2, 3, 4].map(Some),
        "{name} answered every request once:\n{out}\nstderr: {}",
        file(&format!("{name}-stderr.txt"))
    );
    by_id
}

fn text(answer: &serde_json::Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {answer}"))
}

#[test]
fn a_snapshot_is_taken_after_the_server_initialized() {
    let c = results().case("take");
    assert_eq!(c.rc, 0, "{c:?}");
    assert!(c.stderr.contains("snapshot"), "{c:?}");
    let files = file("snap-files.txt");
    for f in ["state", "memory", "initialize.json"] {
        assert!(files.lines().any(|l| l == f), "no {f} in {files}");
    }
    let init: serde_json::Value = serde_json::from_str(file("initialize.json")).unwrap();
    assert_eq!(init["id"], "mcpvm-snapshot");
    assert_eq!(init["result"]["serverInfo"]["name"], "mcp-fixture");
}

#[test]
fn every_restored_copy_answers_its_own_session() {
    for i in 1..=COPIES {
        let a = answers(i);
        assert_eq!(
            a[0]["result"]["serverInfo"]["name"], "mcp-fixture",
            "copy {i}: its own initialize is answered by the server: {}",
            a[0]
        );
        let tools: Vec<&str> = a[1]["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("copy {i}: {}", a[1]))
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert!(tools.contains(&"note"), "copy {i}: {tools:?}");
        assert_eq!(
            file(&format!("copy{i}.code")).trim(),
            "0",
            "copy {i} ended with the server: {}",
            file(&format!("copy{i}-stderr.txt"))
        );
    }
}

#[test]
fn state_changed_in_one_copy_is_not_seen_in_another() {
    for i in 1..=COPIES {
        // The note tool answers with every note the server kept: only
        // this copy's own.
        assert_eq!(text(&answers(i)[2]), format!("copy{i}"));
    }
}

#[test]
fn restored_copies_have_fresh_entropy_their_own_hostname_and_the_host_clock() {
    let host_time: u64 = file("host-time.txt").trim().parse().unwrap();
    let mut hostnames = HashSet::new();
    let mut randoms = HashSet::new();
    for i in 1..=COPIES {
        let who = text(&answers(i)[3]).to_string();
        let parts: Vec<&str> = who.split(' ').collect();
        assert_eq!(parts.len(), 3, "{who}");
        assert!(parts[0].starts_with("mcpvm-"), "{who}");
        hostnames.insert(parts[0].to_string());
        randoms.insert(parts[2].to_string());
        let t: u64 = parts[1].parse().unwrap();
        // The snapshot was taken before host-time.txt; the restored
        // clock follows the host's, not the snapshot's.
        assert!(
            t + 5 >= host_time && t < host_time + 1200,
            "copy {i}'s clock says {t}, the host said {host_time} before the restore"
        );
    }
    assert_eq!(hostnames.len(), COPIES, "{hostnames:?}");
    assert_eq!(randoms.len(), COPIES, "{randoms:?}");
}

#[test]
fn a_corrupted_snapshot_is_refused_with_one_clear_error() {
    let c = results().case("corrupt");
    assert_eq!(c.rc, 1, "{c:?}");
    assert!(c.stderr.contains("does not match its checksum"), "{c:?}");
    assert_eq!(c.stderr.lines().count(), 1, "{c:?}");
}

#[test]
fn a_snapshot_of_another_version_is_refused_and_says_what_to_do() {
    let c = results().case("old_version");
    assert_eq!(c.rc, 1, "{c:?}");
    assert!(
        c.stderr.contains("format version 1") && c.stderr.contains("take the snapshot again"),
        "{c:?}"
    );
}

#[test]
fn no_run_directory_is_left_behind() {
    assert_eq!(file("leftovers.txt").trim(), "");
}

#[test]
fn the_warm_cache_takes_a_snapshot_once_and_keys_it_on_the_inputs() {
    for name in ["warm1", "warm2", "warm3"] {
        let a = session(name);
        assert_eq!(
            a[0]["result"]["serverInfo"]["name"], "mcp-fixture",
            "{name}"
        );
        assert_eq!(text(&a[2]), name, "{name}: a server of its own");
        assert_eq!(file(&format!("{name}.code")).trim(), "0", "{name}");
    }
    let taking = |name: &str| file(&format!("{name}-stderr.txt")).contains("taking one");
    assert!(taking("warm1"), "the first run takes the snapshot");
    assert!(!taking("warm2"), "the second restores it");
    assert!(taking("warm3"), "another environment is another snapshot");
    assert_eq!(file("cache-after-two.txt").lines().count(), 1);
    assert_eq!(file("cache-after-three.txt").lines().count(), 2);
    let inputs = file("warm-inputs.json");
    assert!(
        inputs.contains("MODE") && !inputs.contains("other"),
        "names, not values: {inputs}"
    );
}

#[test]
fn restored_server_memory_copies_keep_their_graphs_apart() {
    let c = results().case("take_memory");
    assert_eq!(c.rc, 0, "{c:?}");
    for i in 1..=COPIES {
        let name = format!("memory{i}");
        let a = session(&name);
        assert_eq!(
            a[0]["result"]["serverInfo"]["name"], "memory-server",
            "{name}: {}",
            a[0]
        );
        let tools = a[1]["result"]["tools"].to_string();
        assert!(tools.contains("create_entities"), "{name}: {tools}");
        assert!(text(&a[2]).contains(&name), "{name}: {}", a[2]);
        // The graph holds this copy's entity and no other copy's.
        let graph: serde_json::Value = serde_json::from_str(text(&a[3])).unwrap();
        let names: Vec<&str> = graph["entities"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: {graph}"))
            .iter()
            .filter_map(|e| e["name"].as_str())
            .collect();
        assert_eq!(names, [name.as_str()], "{name}: {graph}");
        assert_eq!(file(&format!("{name}.code")).trim(), "0", "{name}");
    }
}

#[test]
fn the_probe_starts_its_vm_from_the_warm_cache() {
    for name in ["probe_warm1", "probe_warm2"] {
        let c = results().case(name);
        assert_eq!(c.rc, 0, "{name}: {c:?}");
        let r = c.json();
        assert!(
            r["tools"].as_array().unwrap().iter().any(|t| t == "note"),
            "{name}: {r}"
        );
        // A restored VM's timings: the agent came back, it did not boot.
        let vm = &r["timings"]["vm"];
        assert!(vm["resumed"].is_number(), "{name}: {vm}");
        assert!(vm["boot_timer"].is_null(), "{name}: {vm}");
    }
    assert_eq!(file("probe-cache.txt").lines().count(), 1);
}
