//! Catalogued MCP servers in microVMs on real KVM (the testbed here), in
//! two testbed sessions that run at the same time (a testbed host has one
//! CPU; the machines this runs on have two):
//!
//! - `servers`: every offline server answering a real MCP client, the
//!   filesystem server on a host workspace, and clear errors;
//! - `audit`: `mcpvm audit` over three servers × four profiles, stopped and
//!   resumed, each allow-list profile it proposes checked by running it, and
//!   the security column.

mod common;

/// Starts both sessions on first use, each on its own thread.
fn start_sessions() {
    static START: std::sync::Once = std::sync::Once::new();
    START.call_once(|| {
        std::thread::spawn(|| {
            servers::results();
        });
        std::thread::spawn(|| {
            audit::results();
        });
    });
}

/// Catalogues for a scenario, as `NAME.toml` in its directory: the
/// built-in one (`catalogue`) and the test fixtures (`cve`, `runtimes`,
/// `apt`).
fn catalogues(names: &[&str]) -> Vec<String> {
    let ws = common::workspace();
    names
        .iter()
        .map(|n| {
            let src = match *n {
                "catalogue" => ws.join("guest-image/catalogue.toml"),
                fixture => ws.join(format!("mcpvm/tests/fixtures/{fixture}-catalogue.toml")),
            };
            format!("{}:{n}.toml", src.display())
        })
        .collect()
}

mod servers {
    // Catalogued MCP servers (npm and PyPI packages on the runtime image plus
    // their layers, built by `mcpvm image build` in scripts/build) answering
    // a real MCP client inside microVMs, on real KVM (the testbed here).

    use std::sync::OnceLock;

    use super::common::{call, run_scenario_within, Case, Results};

    pub fn results() -> &'static Results {
        super::start_sessions();
        static R: OnceLock<Results> = OnceLock::new();
        R.get_or_init(|| {
            let mut files = super::common::run_payload();
            // The store as built: the index and every image it names.
            files.extend(super::common::image_store_files(&[]));
            files.extend(super::catalogues(&["catalogue", "cve", "runtimes", "apt"]));
            let scenario = super::common::workspace().join("mcpvm/tests/scenarios/servers.sh");
            // Node and python start-ups under nested emulation take tens of
            // seconds each (docs/testbed.md).
            run_scenario_within(&scenario, &files, 2400)
        })
    }

    fn case(name: &str) -> &'static Case {
        results().case(name)
    }

    fn answered(name: &str) -> serde_json::Value {
        let c = case(&format!("server_{name}"));
        assert_eq!(c.rc, 0, "{name}: {c:?}");
        let r = c.json();
        assert_eq!(r["transport"], "vm");
        assert!(r["lifecycle"].is_string(), "{name}: no handshake: {r}");
        assert!(
            !r["tools"].as_array().unwrap().is_empty(),
            "{name}: no tools: {r}"
        );
        r
    }

    #[test]
    fn node_servers_answer_in_a_vm() {
        // server-memory and server-sequential-thinking: mod audit below, in
        // the baseline runs of its audit.
        let r = answered("everything");
        assert_eq!(r["lifecycle"], "initialize");
        assert!(!r["prompts"].as_array().unwrap().is_empty());
    }

    #[test]
    fn python_servers_answer_in_a_vm() {
        // Report every server that failed, not only the first.
        // mcp-server-git: mod audit below (baseline and deny-exec runs).
        let failed: Vec<&str> = ["time", "sqlite", "markitdown"]
            .into_iter()
            .filter(|s| std::panic::catch_unwind(|| answered(s)).is_err())
            .collect();
        assert!(failed.is_empty(), "no answer in a VM from: {failed:?}");
        assert_eq!(answered("time")["lifecycle"], "stateless");
    }

    #[test]
    fn the_filesystem_server_works_on_a_host_workspace_written_back_only_when_writable() {
        for (case, listing) in [
            ("filesystem", "ws_ro_after.txt"),
            ("filesystem_rw", "ws_rw_after.txt"),
        ] {
            let r = answered(case);
            let read = call(&r, "read_text_file");
            assert_eq!(read["outcome"], "ok", "{read}");
            assert!(
                read["detail"]["text"]
                    .as_str()
                    .unwrap()
                    .contains("hello from the host workspace"),
                "{read}"
            );
            // Inside the guest the write succeeds either way.
            assert_eq!(call(&r, "write_file")["outcome"], "ok");
            let files: Vec<&str> = results().file(listing).split_whitespace().collect();
            if case == "filesystem" {
                assert_eq!(files, ["hello.txt"], "read-only: nothing came back");
            } else {
                assert_eq!(files, ["hello.txt", "new.txt"]);
            }
        }
        assert_eq!(results().file("ws_rw_new.txt"), "written-in-the-guest");
    }

    /// Ground truth for `--security`: the release of server-filesystem
    /// with CVE-2025-53110 (a prefix taken for a directory) and
    /// CVE-2025-53109 (a symlink followed out) yields both, with the
    /// canary read and its token in the answer; mcp-server-git's with
    /// CVE-2025-68144 and CVE-2025-68145 yields both; the catalogue's
    /// fixed releases, attacked the same way, yield nothing.
    #[test]
    fn security_finds_the_published_cves_and_nothing_on_the_fixed_releases() {
        let rules = |name: &str| -> Vec<(String, String)> {
            let c = case(name);
            assert_eq!(c.rc, 0, "{name}: {c:?}");
            let r = c.json();
            let mut v: Vec<(String, String)> = r["findings"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|f| {
                            (
                                f["rule"].as_str().unwrap().to_string(),
                                f["step"].as_str().unwrap().to_string(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            v.sort();
            v.dedup();
            v
        };
        let cve = rules("security_cve");
        for rule in [
            "sibling-prefix",
            "symlink-escape",
            "canary-read",
            "token-in-answer",
        ] {
            assert!(
                cve.iter()
                    .any(|(r, step)| r == rule && step == "attack:read_file"),
                "{rule} on read_file: {cve:?}"
            );
        }
        assert!(
            cve.iter().all(|(_, step)| step == "attack:read_file"),
            "only the attacks on read_file: {cve:?}"
        );
        assert_eq!(rules("security_fixed"), Vec::<(String, String)>::new());
        // mcp-server-git 2025.11.25: git_diff hands "--output=FILE" to git
        // (CVE-2025-68144) and repo_path opens any repository, the
        // canary one beside the workspace included (CVE-2025-68145).
        let git = rules("security_git_cve");
        assert!(
            git.iter()
                .any(|(r, step)| r == "marker-made" && step == "attack:git_diff"),
            "argument injection in git_diff: {git:?}"
        );
        assert!(
            git.iter().any(|(r, _)| r == "sibling-prefix"),
            "repo_path not held to --repository: {git:?}"
        );
        assert_eq!(rules("security_git_fixed"), Vec::<(String, String)>::new());
    }

    /// @sentry/mcp-server declares node >= 22.13 (its install is refused
    /// on `node20`: `image_build`); with `runtime = "node22"`
    /// its layer carries that node, and the server runs on it.
    #[test]
    fn a_server_needing_node_22_runs_on_the_node_its_layer_carries() {
        let c = case("server_node22");
        let r = c.json();
        assert!(r["lifecycle"].is_string(), "no handshake: {c:?}");
        assert_eq!(r["server_name"], "Sentry MCP", "{c:?}");
        let own = "/opt/mcp/sentry-node22/.mcpvm-node/bin/node";
        let execs: Vec<&str> = r["guest_events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["event"] == "effect")
            .filter_map(|e| e["exe"].as_str())
            .collect();
        assert!(execs.contains(&own), "the server's processes ran {execs:?}");
        assert!(!execs.contains(&"/usr/bin/node"), "{execs:?}");
    }

    /// `--package npm:NAME@VERSION`: the server runs from the layer the
    /// store has for that package (built on first use; here by
    /// scripts/build), with the command the build found in it.
    #[test]
    fn a_server_named_by_its_package_runs_from_its_cached_layer() {
        let c = case("server_package");
        let r = c.json();
        assert!(r["lifecycle"].is_string(), "no handshake: {c:?}");
        assert_eq!(r["server_name"], "memory-server", "{c:?}");
        let tools: Vec<&str> = r["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t.as_str())
            .collect();
        assert!(tools.contains(&"create_entities"), "{tools:?}");
        assert!(
            !c.stderr.contains("building its layer"),
            "it was cached: {c:?}"
        );
    }

    /// `apt = ["ripgrep"]`: the package the runtime lacks is in the
    /// server's layer and runs in the guest (its setup line prints the
    /// version), and the server still starts over it.
    #[test]
    fn a_debian_package_in_the_layer_runs_in_the_guest() {
        let c = case("server_apt");
        assert_eq!(c.rc, 0, "{c:?}");
        assert!(c.stderr.contains("ripgrep 13."), "{c:?}");
    }

    /// Observed, each call shows what it did inside the VM: the read
    /// opened the workspace file, the write created its file; node's own
    /// start is start-up, not a call.
    #[test]
    fn an_observed_server_shows_what_each_call_did() {
        let r = answered("filesystem_rw");
        let effects = |tool: &str| call(&r, tool)["effects"].clone();
        let read = effects("read_text_file");
        assert!(
            read["read"]
                .as_array()
                .is_some_and(|a| a.iter().any(|p| p == "/workspace/hello.txt")),
            "{read}"
        );
        assert_eq!(read["written"], serde_json::json!([]), "{read}");
        let write = effects("write_file");
        assert!(
            write["written"]
                .as_array()
                .is_some_and(|a| a.iter().any(|p| p == "/workspace/new.txt")),
            "{write}"
        );
        let recording = &r["recording"];
        let start = &recording["outside_calls"]["start_up"];
        assert!(
            start["executed"]
                .as_array()
                .is_some_and(|a| a.iter().any(|argv| argv.to_string().contains("node"))),
            "node starts before any call: {recording}"
        );
        assert!(recording["recorded"].as_u64().unwrap() > 0, "{recording}");
        assert_eq!(recording["dropped"], 0, "{recording}");
    }

    /// Generated arguments that make sense: with no calls given, every
    /// non-destructive tool of every offline server is called with
    /// arguments from its schema, its names and the seeded workspace, and
    /// only calls no generated argument can make work fail.
    #[test]
    fn every_offline_server_takes_generated_arguments_but_a_known_few() {
        let c = case("generated");
        assert_eq!(c.rc, 0, "{c:?}");
        let records: Vec<serde_json::Value> = results()
            .file("generated.jsonl")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        // What cannot work offline or from a schema alone: a URL fetch (no
        // network), a tool that needs the client's task augmentation, and
        // git calls whose order or values only a reader of the repository
        // would know (docs/benchmarks.md, "Generated arguments").
        let known: &[(&str, &[&str])] = &[
            (
                "everything",
                &["gzip-file-as-resource", "simulate-research-query"],
            ),
            ("git", &["git_commit", "git_add", "git_branch"]),
        ];
        let mut servers = Vec::new();
        for r in &records {
            let s = r["server"].as_str().unwrap();
            servers.push(s);
            let ok = r["tools_ok"].as_array().unwrap();
            assert!(!ok.is_empty(), "{s} answered no call: {r}");
            let allowed = known.iter().find(|k| k.0 == s).map(|k| k.1).unwrap_or(&[]);
            for failed in r["tools_failed"].as_array().unwrap() {
                assert!(
                    allowed.contains(&failed.as_str().unwrap()),
                    "{s}: {failed} failed on generated arguments: {}",
                    r["evidence"]["errors"]
                );
            }
            // Tool calls are what the arguments decide; a later step may
            // still fail on the server's own account (mcp-server-sqlite
            // sometimes exits when the probe cancels a request).
            assert!(
                matches!(r["outcome"].as_str(), Some("ok" | "degraded")),
                "{r}"
            );
        }
        servers.sort();
        assert_eq!(
            servers,
            [
                "everything",
                "filesystem",
                "git",
                "markitdown",
                "memory",
                "sequential-thinking",
                "sqlite",
                "time"
            ]
        );
    }

    /// A failure the baseline also has is the server's, not the
    /// profile's: the matrix says `=`, and the report names the baseline
    /// failure apart from what profiles did.
    #[test]
    fn a_failure_the_baseline_also_has_is_not_blamed_on_the_profile() {
        let c = case("judged");
        assert_eq!(c.rc, 0, "{c:?}");
        let md = results().file("judged_report.md");
        assert!(md.contains("| everything | ◐ | = |"), "{md}");
        assert!(
            md.contains("- **deny-exec**: nothing the baseline did not have"),
            "{md}"
        );
        let own = md
            .find("Servers that fail under `baseline` itself")
            .unwrap_or_else(|| panic!("{md}"));
        assert!(md[own..].contains("- **everything**: degraded"), "{md}");
    }

    #[test]
    fn missing_credentials_and_unknown_servers_are_clear_errors() {
        let c = case("server_needs_key");
        assert_eq!(c.rc, 1, "{c:?}");
        assert!(
            c.stderr.contains("needs the credential GITHUB_TOKEN"),
            "{}",
            c.stderr
        );
        let c = case("server_unknown");
        assert_eq!(c.rc, 1, "{c:?}");
        assert!(
            c.stderr.contains("No server 'no-such-server'"),
            "{}",
            c.stderr
        );
    }
}

mod audit {
    // `mcpvm audit` on real KVM (the testbed here): real catalogued servers
    // under withholding profiles, the outcomes and evidence in the reports,
    // an interrupted audit that resumes without repeating a cell, and the
    // allow-list profile it proposes working for its server.

    use std::collections::BTreeMap;
    use std::sync::OnceLock;

    use super::common::{run_scenario_within, Results};
    use serde_json::Value;

    pub fn results() -> &'static Results {
        super::start_sessions();
        static R: OnceLock<Results> = OnceLock::new();
        R.get_or_init(|| {
            let mut files = super::common::run_payload();
            files.extend(super::common::image_store_files(&[
                "memory",
                "git",
                "sequential-thinking",
                "time",
                "everything",
                "filesystem-cve",
                "brave-search",
                "fetch",
            ]));
            files.extend(super::catalogues(&["catalogue", "cve"]));
            let scenario = super::common::workspace().join("mcpvm/tests/scenarios/audit.sh");
            // Twelve runs of node and python servers under nested emulation.
            run_scenario_within(&scenario, &files, 2400)
        })
    }

    /// results.jsonl by (server, profile).
    /// Each server of a slice gets its compatibility verdict from what it
    /// did: time fit (hostile input handled), brave-search started
    /// without its key needs credentials (quoting its message), an entry
    /// that never built is `install_failed`, and the audit ran the rest.
    #[test]
    fn each_server_gets_a_compatibility_verdict_with_its_evidence() {
        let c = results().case("compat");
        assert_eq!(c.rc, 0, "{c:?}");
        let verdicts: Vec<Value> =
            serde_json::from_str(results().file("compat_compat.json")).unwrap();
        let of = |s: &str| {
            verdicts
                .iter()
                .find(|v| v["server"] == s)
                .unwrap_or_else(|| panic!("{s}: {verdicts:?}"))
                .clone()
        };
        let time = of("time");
        assert_eq!(time["verdict"], "fit", "{time}");
        assert!(time["reason"].is_null());
        // `reopen` is not run: the cell's workspace is read-only, so a
        // second start of its VM would be the first again.
        assert!(
            time["evidence"]
                .to_string()
                .contains("8 of 8 hostile inputs handled"),
            "{time}"
        );
        let brave = of("brave-search");
        assert_eq!(
            (brave["verdict"].as_str(), brave["reason"].as_str()),
            (Some("inconclusive"), Some("needs_credentials")),
            "{brave}"
        );
        assert!(
            brave["evidence"].to_string().contains("BRAVE_API_KEY"),
            "{brave}"
        );
        let never = of("never-built");
        assert_eq!(never["reason"], "install_failed", "{never}");
        assert!(
            c.stderr
                .contains("never-built: not run, its layer did not build"),
            "{c:?}"
        );
        let md = results().file("compat_report.md");
        let compat = md
            .find("## Compatibility")
            .unwrap_or_else(|| panic!("{md}"));
        assert!(compat < md.find("## Matrix").unwrap(), "{md}");
        assert!(md.contains("1 of 3 fit, 0 not fit, 2 inconclusive"), "{md}");
    }

    fn records() -> BTreeMap<(String, String), Value> {
        results()
            .file("results.jsonl")
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .map(|r| {
                let key = (
                    r["server"].as_str().unwrap().to_string(),
                    r["profile"].as_str().unwrap().to_string(),
                );
                (key, r)
            })
            .collect()
    }

    fn record(server: &str, profile: &str) -> Value {
        records()
            .remove(&(server.to_string(), profile.to_string()))
            .unwrap_or_else(|| panic!("no record for {server} × {profile}"))
    }

    /// `mcpvm audit --security`: sound servers, every tool called and
    /// attacked, have no finding; the vulnerable filesystem release
    /// beside them has its CVEs in the column, the findings section and
    /// the SARIF log.
    #[test]
    fn the_security_column_finds_the_cves_and_nothing_on_sound_servers() {
        // `mcpvm audit --security`: sound servers, every tool called and
        // attacked, have no finding (a finding there would be a false
        // positive; everything's get-env shows its environment by design,
        // canary variable included: no finding); the vulnerable
        // filesystem release beside them has its CVEs in the column, the
        // findings section and the SARIF log.
        // --fail-on high: the gate closes on the CVEs' findings.
        let c = results().case("security_audit");
        assert_eq!(c.rc, 5, "{c:?}");
        assert!(c.stderr.contains("(--fail-on high): exit 5"), "{c:?}");
        let lines = results().file("security_results.jsonl");
        let cell = |server: &str| -> serde_json::Value {
            lines
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .find(|r| r["server"] == server && r["profile"] == "security")
                .unwrap_or_else(|| panic!("no security cell for {server}: {lines}"))
        };
        for s in ["memory", "time", "everything"] {
            let sec = &cell(s)["security"];
            assert!(
                sec["attacks"].as_u64().unwrap() > 0,
                "{s} was attacked: {sec}"
            );
            assert_eq!(sec["findings"], serde_json::json!([]), "{s}: {sec}");
        }
        let fs = &cell("filesystem-cve")["security"];
        let fs_rules: Vec<&str> = fs["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["rule"].as_str().unwrap())
            .collect();
        for rule in ["sibling-prefix", "symlink-escape"] {
            assert!(fs_rules.contains(&rule), "{rule}: {fs}");
        }
        assert_eq!(
            fs["roots"],
            serde_json::json!(["/workspace", "/opt/mcp/filesystem-cve"])
        );
        let report = results().file("security_report.md");
        assert!(report.contains("## Security findings"), "{report}");
        assert!(report.contains("| memory | ✓ | ○ |"), "{report}");
        assert!(
            report.contains("reproduce: mcpvm probe --server filesystem-cve --profile observe"),
            "{report}"
        );
        let sarif: serde_json::Value =
            serde_json::from_str(results().file("security_findings.sarif")).unwrap();
        let runs = sarif["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 5, "a run per server attacked");
        let fs_run = runs
            .iter()
            .find(|r| r["properties"]["server"] == "filesystem-cve")
            .unwrap();
        let fs_results = fs_run["results"].as_array().unwrap();
        assert!(fs_results.iter().any(|r| r["ruleId"] == "path-traversal"));
        // Located at the entry's line in the catalogue the audit read, and
        // fingerprinted; the log is valid SARIF 2.1.0.
        let catalogue = results().file("security_catalogue.toml");
        for r in fs_results {
            let at = &r["locations"][0]["physicalLocation"];
            assert_eq!(at["artifactLocation"]["uri"], "security.toml", "{r}");
            let line = at["region"]["startLine"].as_u64().unwrap() as usize;
            assert_eq!(
                catalogue.lines().nth(line - 1),
                Some("[servers.filesystem-cve]"),
                "{r}"
            );
            assert_eq!(
                r["partialFingerprints"]["mcpvmFinding/v1"]
                    .as_str()
                    .unwrap()
                    .len(),
                32
            );
        }
        let text = results().file("security_findings.sarif");
        assert_eq!(crate::common::sarif_errors(text), None);
    }

    /// Two real servers in one audit make a flow neither makes alone:
    /// fetch brings in untrusted content and sends its arguments off the
    /// VM (its URL's host looked up), and the vulnerable filesystem
    /// release reads outside its roots under attack. One assistant holding
    /// both can be made to read a secret and send it out: the report's
    /// flow names each link's server, tool and the step that showed it.
    #[test]
    fn a_flow_across_two_servers_is_found_from_what_each_did() {
        let report = results().file("security_report.md");
        let roles = report
            .find("## What the tools were seen to do")
            .unwrap_or_else(|| panic!("{report}"));
        let flows = report[roles..]
            .find("## Flows across the servers")
            .map(|i| &report[roles + i..])
            .unwrap_or_else(|| panic!("{report}"));
        let exfiltration: Vec<&str> = flows
            .lines()
            .skip_while(|l| !l.starts_with("- **exfiltration** (high)"))
            .skip(1)
            .take_while(|l| l.starts_with("  - "))
            .collect();
        let link = |role: &str| {
            exfiltration
                .iter()
                .find(|l| l.starts_with(&format!("  - {role}: ")))
                .unwrap_or_else(|| panic!("no {role} link: {flows}"))
                .to_string()
        };
        assert!(
            link("brings in untrusted content").contains("fetch/fetch (seen in tools/call:fetch)"),
            "{flows}"
        );
        assert!(
            link("reads private data")
                .contains("filesystem-cve/read\\_file (seen in attack:read\\_file)"),
            "{flows}"
        );
        assert!(
            link("a public sink").contains("fetch/fetch (seen in tools/call:fetch)"),
            "{flows}"
        );
    }

    #[test]
    fn every_server_passes_its_baseline_and_logs_its_calls() {
        for s in ["memory", "git", "sequential-thinking"] {
            let r = record(s, "baseline");
            assert_eq!(r["outcome"], "ok", "{r}");
            for t in ["handshake_ms", "boot_ms", "tools_list_ms"] {
                assert!(
                    r["timings"][t].as_f64().is_some_and(|v| v > 0.0),
                    "{t}: {r}"
                );
            }
            let used = r["syscalls_used"].as_array().unwrap();
            assert!(used.iter().any(|u| u["syscall"] == "execve"), "{r}");
            assert!(results()
                .file(&format!("proposal_{s}-minimal.toml"))
                .contains("allow = ["));
        }
    }

    #[test]
    fn deny_exec_breaks_mcp_server_git_with_execve_as_evidence() {
        // GitPython runs `git version` when it is imported: the server
        // cannot start at all.
        let r = record("git", "deny-exec");
        assert_eq!(r["outcome"], "broken", "{r}");
        let stderr = r["evidence"]["stderr_tail"].as_str().unwrap();
        assert!(stderr.contains("Bad git executable"), "{r}");
        let denied = r["evidence"]["denied"].as_array().unwrap();
        assert!(
            denied
                .iter()
                .any(|d| d["syscall"] == "execve" && d["errno"] == "EPERM"),
            "{r}"
        );
        // A server that runs no programs does not notice.
        assert_eq!(record("memory", "deny-exec")["outcome"], "ok");
    }

    #[test]
    fn a_server_that_writes_its_file_fails_without_a_writable_tmp_with_erofs() {
        // server-memory keeps its graph in /tmp/memory.jsonl (the catalogue's
        // MEMORY_FILE_PATH): without /tmp its write fails, with the root
        // read-only it does not care.
        let r = record("memory", "no-tmp");
        assert_eq!(r["outcome"], "degraded", "{r}");
        assert!(r.to_string().contains("EROFS"), "{r}");
        assert_eq!(record("memory", "ro-root")["outcome"], "ok");
    }

    #[test]
    fn the_interrupted_audit_resumed_without_repeating_a_cell() {
        assert_ne!(results().case("first").rc, 0, "stopped by SIGTERM");
        assert_eq!(results().file("after_kill.txt").trim(), "", "left running");
        let first: Value = serde_json::from_str(results().file("first_record.json")).unwrap();
        let resume = results().case("resume");
        assert_eq!(resume.rc, 0, "{resume:?}");
        assert!(
            resume
                .stderr
                .contains("15 runs, 1 already recorded, 14 to go"),
            "{}",
            resume.stderr
        );
        let lines = results().file("results.jsonl").lines().count();
        assert_eq!(lines, 15);
        assert_eq!(records().len(), 15, "one line per cell");
        let again = record(
            first["server"].as_str().unwrap(),
            first["profile"].as_str().unwrap(),
        );
        assert_eq!(again, first, "the recorded cell was not run again");
    }

    #[test]
    fn the_reports_show_the_matrix_and_the_evidence() {
        let md = results().file("report.md");
        assert!(
            md.contains("| server | baseline | no-tmp | deny-exec | ro-root |"),
            "{md}"
        );
        assert!(md.contains("15 of 15 runs recorded"), "{md}");
        assert!(md.contains("denied execve"), "{md}");
        // Judged against the baseline: deny-exec newly broke git, with the
        // denied call that explains it; what each profile did comes first.
        let did = md.find("## What each profile did").unwrap();
        assert!(did < md.find("## Matrix").unwrap(), "{md}");
        let line = md[did..]
            .lines()
            .find(|l| l.starts_with("- **deny-exec**"))
            .unwrap_or_else(|| panic!("{md}"));
        assert!(
            line.contains("broke **git**") && line.contains("execve"),
            "{line}"
        );
        let html = results().file("report.html");
        assert!(html.contains("<svg") && html.contains("class=\"grid\""));
        let meta: Value = serde_json::from_str(results().file("audit.json")).unwrap();
        assert_eq!(meta["servers"]["git"]["package"], "mcp-server-git");
        assert!(meta["profile_definitions"]["deny-exec"]["policy"]["seccomp"].is_object());
        assert_eq!(meta["kernel_sha256"].as_str().unwrap().len(), 16);
    }

    #[test]
    fn a_repeated_audit_keeps_every_runs_first_response() {
        let c = results().case("repeat");
        assert_eq!(c.rc, 0, "{c:?}");
        let meta: Value = serde_json::from_str(results().file("repeat_audit.json")).unwrap();
        assert_eq!(meta["repeat"], 2);
        let lines: Vec<Value> = results()
            .file("repeat_results.jsonl")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "one line per cell, not per run");
        for r in &lines {
            let samples = r["samples"].as_array().unwrap_or_else(|| panic!("{r}"));
            assert_eq!(samples.len(), 2, "{r}");
            // The first sample is the run the record describes.
            assert_eq!(
                samples[0]["handshake_ms"], r["timings"]["handshake_ms"],
                "{r}"
            );
            assert!(
                samples
                    .iter()
                    .all(|s| s["handshake_ms"].as_f64().is_some_and(|v| v > 0.0)),
                "{r}"
            );
        }
        let runs = results().file("repeat_runs.txt");
        for f in [
            "baseline.json",
            "baseline.run2.json",
            "deny-exec.json",
            "deny-exec.run2.json",
        ] {
            assert!(runs.lines().any(|l| l == f), "{f} missing: {runs}");
        }
        // Two runs a side cannot tell a slower start from noise: none is
        // claimed, and the report says how the cells ran.
        let md = results().file("repeat_report.md");
        assert!(md.contains("Each cell ran 2 times in a row"), "{md}");
        assert!(md.contains("2 runs)"), "{md}");
        assert!(!md.contains("slowed"), "{md}");
    }

    /// `--check-proposals`: each server run again under the allow-list
    /// its baseline cell proposed, judged against that cell.
    #[test]
    fn each_proposed_allow_list_is_checked_by_running_the_server_under_it() {
        let checks: Vec<Value> = serde_json::from_str(results().file("proposals.json")).unwrap();
        let of = |s: &str| {
            checks
                .iter()
                .find(|c| c["server"] == s)
                .unwrap_or_else(|| panic!("no check of {s}: {checks:?}"))
                .clone()
        };
        for s in ["memory", "git", "sequential-thinking"] {
            let c = of(s);
            assert_eq!(c["proposer"], "baseline", "{c}");
            assert_ne!(c["verdict"], "not_checked", "{c}");
            let r = record(s, "proposed");
            // Run under the list, logging: what it denied is evidence.
            assert!(r["syscalls_used"].as_array().is_some(), "{r}");
            // A gap is named with the calls it denied, and the proposal
            // written takes them in.
            if c["verdict"] == "breaks" {
                let proposal = results().file(&format!("proposal_{s}-minimal.toml"));
                for d in c["denied"].as_array().unwrap() {
                    assert!(proposal.contains(&format!("{d}")), "{d} in {proposal}");
                }
            }
        }
        // server-memory's calls all worked under its own list.
        let memory = of("memory");
        assert_eq!(memory["verdict"], "holds", "{memory}");
        assert!(memory["tools"].as_u64().unwrap() > 0, "{memory}");
        let md = results().file("report.md");
        assert!(md.contains("## Proposed allow-lists, checked"), "{md}");
        assert!(md.contains("- **memory**: holds: the "), "{md}");
        // Every other cell against its baseline, as data.
        let effects: Vec<Value> = serde_json::from_str(results().file("effects.json")).unwrap();
        let git_exec = effects
            .iter()
            .find(|e| e["server"] == "git" && e["profile"] == "deny-exec")
            .unwrap();
        assert_eq!(git_exec["effect"], "newly_broken", "{git_exec}");
        assert!(
            git_exec["denied"].to_string().contains("execve EPERM"),
            "{git_exec}"
        );
    }
}
