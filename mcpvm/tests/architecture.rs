//! The rule docs/architecture.md ("Modules: one direction") states, held
//! to by reading every crate's sources: inside a crate, no two modules
//! import each other, directly or through others. A module may use its
//! own ancestors and descendants (that is the tree, not a circle); between
//! branches, imports go one way. Paths are read from `crate::…` and
//! `super::…` (grouped imports included) outside comments and tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates held to it, by their source directories.
const CRATES: &[&str] = &[
    "vmm/src",
    "protocol/src",
    "syscall-table/src",
    "seccomp-lists/src",
    "withholding/src",
    "guest-agent/src",
    "guest-image/images/src",
    "probes/src",
    "mcpvm/src",
    "benches/src",
    "tools/src",
];

type Module = Vec<String>;

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() && p.file_name().is_some_and(|n| n != "bin") {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs` and `main.rs` the root.
fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Module = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The code of a file that counts: before its tests, without comments,
/// grouped imports spelled out one path a line.
fn code(text: &str) -> String {
    let before_tests = text.split("#[cfg(test)]").next().unwrap_or_default();
    let mut out: String = before_tests
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut extra = String::new();
    for root in ["crate::{", "super::{"] {
        let mut rest = out.as_str();
        while let Some(i) = rest.find(root) {
            let after = &rest[i + root.len()..];
            let Some(end) = after.find('}') else { break };
            for item in after[..end].split(',') {
                let item = item.trim().split(" as ").next().unwrap_or_default();
                if item.starts_with(|c: char| c.is_ascii_lowercase()) {
                    extra += &format!("\n{}{item}", &root[..root.len() - 1]);
                }
            }
            rest = &after[end..];
        }
    }
    out += &extra;
    out
}

/// The module paths (`crate::a::b`, `super::c`) in `code`, as written.
fn paths(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before_ok = i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric();
        let after = &rest[i + prefix.len()..];
        let path: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        if before_ok && !path.trim_matches(':').is_empty() {
            found.push(
                path.split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect(),
            );
        }
        rest = after;
    }
    found
}

/// Whether `code` names `child::…` by itself (not as `x::child::…`).
fn names_child(code: &str, child: &str) -> bool {
    let prefix = format!("{child}::");
    code.match_indices(&prefix).any(|(i, _)| {
        let before = code[..i].chars().next_back();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    })
}

/// Each module's imports of other branches of its crate.
fn edges(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut out = imports(src);
    for (m, deps) in out.iter_mut() {
        // Its own ancestors and descendants are the tree, not a circle.
        deps.retain(|d| !d.starts_with(m) && !m.starts_with(d));
    }
    out
}

/// Each module's imports of the crate's modules, itself left out.
fn imports(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut files = Vec::new();
    rs_files(src, &mut files);
    let modules: BTreeMap<Module, PathBuf> = files
        .iter()
        .map(|f| (module_of(src, f), f.clone()))
        .collect();
    let longest = |p: &[String]| -> Option<Module> {
        (1..=p.len())
            .rev()
            .map(|k| p[..k].to_vec())
            .find(|m| modules.contains_key(m))
    };
    let mut out = BTreeMap::new();
    for (m, f) in &modules {
        let code = code(&std::fs::read_to_string(f).unwrap());
        let mut deps = BTreeSet::new();
        for p in paths(&code, "crate::") {
            deps.extend(longest(&p));
        }
        let parent = &m[..m.len().saturating_sub(1)];
        for p in paths(&code, "super::") {
            deps.extend(longest(&[parent, &p[..]].concat()));
        }
        // A parent names its children by their own names (`child::x`).
        let children = modules
            .keys()
            .filter(|c| c.len() == m.len() + 1 && c.starts_with(m));
        for c in children {
            if names_child(&code, &c[m.len()]) {
                deps.insert(c.clone());
            }
        }
        deps.remove(m);
        out.insert(m.clone(), deps);
    }
    out
}

/// The groups of modules that import each other (strongly connected,
/// more than one), Tarjan's way.
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on: BTreeSet<&'a Module>,
        found: Vec<Vec<Module>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Module) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                s.low.insert(v, s.low[v].min(lw));
            } else if s.on.contains(w) {
                let iw = s.index[w];
                s.low.insert(v, s.low[v].min(iw));
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                group.push(w.clone());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                s.found.push(group);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.found
}

#[test]
fn no_two_modules_of_a_crate_import_each_other() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut said = Vec::new();
    for c in CRATES {
        let e = edges(&top.join(c));
        assert!(!e.is_empty(), "{c}: its modules are read");
        for group in circles(&e) {
            let name = |m: &Module| m.join("::");
            let inside: Vec<String> = group
                .iter()
                .flat_map(|m| {
                    e[m].iter()
                        .filter(|d| group.contains(d))
                        .map(move |d| format!("{} -> {}", name(m), name(d)))
                })
                .collect();
            said.push(format!("{c}: {}", inside.join(", ")));
        }
    }
    assert!(
        said.is_empty(),
        "modules that import each other:\n{}",
        said.join("\n")
    );
}

/// The arrows that run up inside a crate: a module importing its own
/// parent or an ancestor below the crate's root (the parent is the
/// orchestrator, made of its children, not a box of helpers they import
/// back), and a command imported from outside the command line (a
/// command is the top of its crate: only the root, `cli` and other
/// commands name one).
fn up_arrows(imports: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    let name = |m: &Module| m.join("::");
    let mut found = Vec::new();
    for (m, deps) in imports {
        for d in deps {
            // An ancestor that uses the branch this module is in.
            let ancestor = !d.is_empty()
                && d.len() < m.len()
                && m.starts_with(d)
                && imports.get(d).is_some_and(|back| {
                    back.iter()
                        .any(|b| b.len() > d.len() && m.starts_with(&b[..d.len() + 1]))
                });
            let command_line = m.is_empty() || m[0] == "commands" || m[0] == "cli";
            let command = d.first().is_some_and(|c| c == "commands") && d.len() > 1;
            if ancestor || (command && !command_line) {
                found.push(format!("{} -> {}", name(m), name(d)));
            }
        }
    }
    found
}

#[test]
fn no_arrow_runs_up_inside_a_crate() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut said = Vec::new();
    for c in CRATES {
        for arrow in up_arrows(&imports(&top.join(c))) {
            said.push(format!("{c}: {arrow}"));
        }
    }
    assert!(said.is_empty(), "arrows that run up:\n{}", said.join("\n"));
}

/// The product does not carry the benchmarks: the benchmark crate builds
/// on `mcpvm`, never the other way, and what runs a VM knows nothing of
/// either (docs/architecture.md).
#[test]
fn dependencies_point_one_way_between_crates() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let deps = |krate: &str| -> Vec<String> {
        let text = std::fs::read_to_string(top.join(krate).join("Cargo.toml")).unwrap();
        let table: toml::Table = text.parse().unwrap();
        // What is built into it (a test may check against another crate).
        table
            .get("dependencies")
            .and_then(|t| t.as_table())
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default()
    };
    let forbidden = [
        // The crate of the binary a VM runs in: no MCP client (tokio,
        // rmcp, reqwest), no report templates, no benchmarks.
        (
            "mcpvm",
            &["mcpvm-benches", "mcpvm-tools", "probes", "maud"][..],
        ),
        (
            "vmm",
            &["mcpvm", "mcpvm-protocol", "probes", "mcpvm-benches"],
        ),
        ("probes", &["mcpvm", "mcpvm-benches"]),
        ("guest-agent", &["mcpvm", "vmm", "probes"]),
        ("benches", &["mcpvm-tools"]),
    ];
    for (krate, never) in forbidden {
        let have = deps(krate);
        for d in never {
            assert!(!have.iter().any(|h| h == d), "{krate} depends on {d}");
        }
    }
    assert!(
        deps("benches").iter().any(|d| d == "mcpvm"),
        "the table is read"
    );
}

/// Functions of more than this many lines, outside tests: none
/// (docs/architecture.md, "Functions longer than a screen").
const LONGEST_FUNCTION: usize = 120;

/// Each function's lines in `text` before its tests: from its `fn` line
/// to the `}` at the indent it started at.
fn function_lengths(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text
        .split("#[cfg(test)]")
        .next()
        .unwrap_or_default()
        .lines()
        .collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        let indent = &line[..line.len() - code.len()];
        let Some(at) = code.find("fn ") else { continue };
        let before = &code[..at];
        let is_fn = before
            .split_whitespace()
            .all(|w| w.starts_with("pub") || ["const", "async", "unsafe"].contains(&w));
        if !is_fn || code.starts_with("//") || code.trim_end().ends_with(';') {
            continue;
        }
        let name: String = code[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if code.trim_end().ends_with('}') {
            out.push((name, 1));
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(end) = lines[i..].iter().position(|l| l.starts_with(&close)) {
            out.push((name, end + 1));
        }
    }
    out
}

#[test]
fn no_function_is_longer_than_two_screens() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut long = Vec::new();
    for c in CRATES {
        let mut files = Vec::new();
        rs_files(&top.join(c), &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for (name, n) in function_lengths(&text) {
                if n > LONGEST_FUNCTION {
                    long.push(format!("{} {name}: {n} lines", f.display()));
                }
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {LONGEST_FUNCTION} lines (split them into their steps):\n{}",
        long.join("\n")
    );
}

/// The reader finds a circle, and an arrow up, where there is one.
#[test]
fn a_circle_is_found() {
    let m = |s: &str| -> Module { s.split("::").map(str::to_string).collect() };
    let mut e = BTreeMap::new();
    e.insert(m("a"), BTreeSet::from([m("b")]));
    e.insert(m("b"), BTreeSet::from([m("c")]));
    e.insert(m("c"), BTreeSet::from([m("a")]));
    e.insert(m("d"), BTreeSet::from([m("a")]));
    let found = circles(&e);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].len(), 3);
    let mut up = BTreeMap::new();
    up.insert(
        m("a::b"),
        BTreeSet::from([m("a"), m("a::c"), m("commands::x")]),
    );
    up.insert(m("commands::y"), BTreeSet::from([m("commands::x")]));
    up.insert(m("cli"), BTreeSet::from([m("commands::x")]));
    up.insert(m("a"), BTreeSet::from([m("a::b")]));
    up.insert(m("d::e"), BTreeSet::from([m("d")]));
    assert_eq!(up_arrows(&up), ["a::b -> a", "a::b -> commands::x"]);
    assert!(names_child("use b::{x, y};", "b"));
    let text = "pub(crate) fn a(\n    x: u8,\n) {\n    1\n}\n\nfn b() {}\n    fn c() {\n        2\n    }\n";
    assert_eq!(
        function_lengths(text),
        [
            ("a".to_string(), 5),
            ("b".to_string(), 1),
            ("c".to_string(), 3)
        ]
    );
    assert!(!names_child("super::b::x; ab::x; a_b::x", "b"));
    let code = code("use crate::{a, b::c as d};\n// crate::z\nfn f() { super::x::y(); }");
    assert_eq!(paths(&code, "crate::"), [vec!["a"], vec!["b", "c"]]);
    assert_eq!(paths(&code, "super::"), [vec!["x", "y"]]);
}
