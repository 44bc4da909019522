//! Names that pass for others, across servers (the name-collision and
//! installer-spoofing threats): a tool whose name another audited server
//! also lists (a client with both connected can call the wrong one), a
//! tool that takes a well-known tool's name (a reference server's, or a
//! client's own built-in), and a package one or two edits from a popular
//! one (the corpus's names: `guest-image/corpus/popular.toml`). Findings
//! in the same model as the definitions checks, judged on listings and
//! catalogue entries alone.

use std::collections::BTreeMap;

use crate::judge::findings::Finding;

/// Tool names a reference server or a client's own tools carry, and
/// whose they are: a server of another package that lists one shadows it.
/// Distinctive names only (`search` or `fetch` alone say nothing).
pub const WELL_KNOWN: &[(&str, &str)] = &[
    ("read_file", "@modelcontextprotocol/server-filesystem"),
    ("read_text_file", "@modelcontextprotocol/server-filesystem"),
    ("write_file", "@modelcontextprotocol/server-filesystem"),
    ("edit_file", "@modelcontextprotocol/server-filesystem"),
    ("list_directory", "@modelcontextprotocol/server-filesystem"),
    ("directory_tree", "@modelcontextprotocol/server-filesystem"),
    ("move_file", "@modelcontextprotocol/server-filesystem"),
    ("search_files", "@modelcontextprotocol/server-filesystem"),
    (
        "list_allowed_directories",
        "@modelcontextprotocol/server-filesystem",
    ),
    ("git_status", "mcp-server-git"),
    ("git_diff", "mcp-server-git"),
    ("git_commit", "mcp-server-git"),
    ("git_checkout", "mcp-server-git"),
    ("create_entities", "@modelcontextprotocol/server-memory"),
    ("read_graph", "@modelcontextprotocol/server-memory"),
    (
        "sequentialthinking",
        "@modelcontextprotocol/server-sequential-thinking",
    ),
    ("get_current_time", "mcp-server-time"),
    ("browser_navigate", "@playwright/mcp"),
    // Clients' own tools: Cursor's agent, Claude Code's.
    ("run_terminal_cmd", "(Cursor's own tool)"),
    ("codebase_search", "(Cursor's own tool)"),
    ("Bash", "(Claude Code's own tool)"),
    ("Read", "(Claude Code's own tool)"),
    ("Write", "(Claude Code's own tool)"),
    ("Edit", "(Claude Code's own tool)"),
    ("WebFetch", "(Claude Code's own tool)"),
];

/// The popular packages a near-miss is measured against: the corpus's.
const CORPUS: &str = include_str!("../../../guest-image/corpus/popular.toml");

/// The corpus's package names.
pub fn popular() -> Vec<String> {
    let Ok(v) = CORPUS.parse::<toml::Table>() else {
        return Vec::new();
    };
    let mut names: Vec<String> = v
        .get("servers")
        .and_then(toml::Value::as_table)
        .into_iter()
        .flat_map(|t| t.values())
        .filter_map(|e| e.get("package")?.as_str().map(str::to_string))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Names a finding quotes are the server's: bounded, printable.
fn shown(name: &str) -> String {
    name.chars()
        .take(80)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// Per server, its tools that shadow another's: a name another audited
/// server lists too (medium), or a well-known tool's name of another
/// package (low). `servers`: server → (package, tool names listed).
pub fn shadowing(
    servers: &BTreeMap<String, (String, Vec<String>)>,
) -> BTreeMap<String, Vec<Finding>> {
    let mut by_tool: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (s, (_, tools)) in servers {
        for t in tools {
            by_tool.entry(t.as_str()).or_default().push(s.as_str());
        }
    }
    let mut out: BTreeMap<String, Vec<Finding>> = BTreeMap::new();
    for (s, (package, tools)) in servers {
        for t in tools {
            let others: Vec<&str> = by_tool[t.as_str()]
                .iter()
                .copied()
                .filter(|o| *o != s && servers[*o].0 != *package)
                .collect();
            if let Some(other) = others.first() {
                out.entry(s.clone()).or_default().push(Finding::declared(
                    "name-collision",
                    "tool-shadowing",
                    "medium",
                    format!("tools/list:{}", shown(t)),
                    format!(
                        "its tool '{}' has the name of a tool of '{}' ({} server(s) in all list it): a client with both connected can call the wrong one",
                        shown(t),
                        shown(other),
                        others.len() + 1
                    ),
                    format!("{}: {}; {}: {}", shown(s), shown(t), shown(other), shown(t)),
                ));
                continue;
            }
            if let Some((_, owner)) = WELL_KNOWN
                .iter()
                .find(|(name, owner)| *name == t.as_str() && *owner != package.as_str())
            {
                out.entry(s.clone()).or_default().push(Finding::declared(
                    "name-collision",
                    "well-known-name",
                    "low",
                    format!("tools/list:{}", shown(t)),
                    format!(
                        "its tool '{}' takes the name of {owner}'s tool: a client that has that one can call the wrong one",
                        shown(t)
                    ),
                    format!("{}: {}", shown(s), shown(t)),
                ));
            }
        }
    }
    out
}

/// Edit distance (insertions, deletions, substitutions and swaps of two
/// neighbours: optimal string alignment), at most `limit + 1`: a name is
/// compared with every popular one.
fn distance(a: &str, b: &str, limit: usize) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len().abs_diff(b.len()) > limit {
        return limit + 1;
    }
    // Three rows: the one before last (for swaps), the last, this one.
    let mut before: Vec<usize> = Vec::new();
    let mut last: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut row = vec![i];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (last[j - 1] + cost).min(last[j] + 1).min(row[j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            row.push(d);
        }
        if row.iter().min().is_some_and(|m| *m > limit) {
            return limit + 1;
        }
        before = std::mem::replace(&mut last, row);
    }
    last[b.len()].min(limit + 1)
}

/// A package one or two edits from a popular one it is not (a typo an
/// installer takes for the real thing), or that differs from one only in
/// characters that look alike.
pub fn near_miss(package: &str, popular: &[String]) -> Option<Finding> {
    if package.chars().count() > 214 || popular.iter().any(|p| p == package) {
        return None;
    }
    let folded = |s: &str| -> String {
        s.to_lowercase()
            .chars()
            .map(|c| match c {
                '0' => 'o',
                '1' | 'l' => 'i',
                '_' | '.' => '-',
                c if !c.is_ascii() => '?',
                c => c,
            })
            .collect()
    };
    // A scope and a name (`@scope/name`): a family's names differ in
    // their name by more than one edit (server-github, server-gitlab);
    // a typo changes it by one, or the scope alone by up to two.
    let split = |s: &str| -> (String, String) {
        match s.split_once('/') {
            Some((scope, name)) if s.starts_with('@') => (scope.to_string(), name.to_string()),
            _ => (String::new(), s.to_string()),
        }
    };
    let (my_scope, my_name) = split(&folded(package));
    popular.iter().find_map(|p| {
        let (scope, name) = split(&folded(p));
        let d_name = distance(&my_name, &name, 2);
        let d = d_name + distance(&my_scope, &scope, 2);
        let close = name.chars().count() >= 5 && d <= 2 && d_name <= 1;
        close.then(|| {
            Finding::declared(
                "installer-spoofing",
                "package-near-miss",
                "high",
                format!("package:{}", shown(package)),
                format!(
                    "its package '{}' is {} from the popular '{p}': a typo an installer takes for it, or one made to be taken",
                    shown(package),
                    match d {
                        0 => "a look-alike".to_string(),
                        1 => "one edit".to_string(),
                        n => format!("{n} edits"),
                    }
                ),
                format!("{} ~ {p}", shown(package)),
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_another_server_lists_or_a_well_known_name_is_shadowing() {
        let servers: BTreeMap<String, (String, Vec<String>)> = [
            (
                "filesystem",
                "@modelcontextprotocol/server-filesystem",
                vec!["read_file", "list_directory"],
            ),
            (
                "desktop",
                "@wonderwhy-er/desktop-commander",
                vec!["read_file", "start_process"],
            ),
            ("notes", "notes-mcp", vec!["run_terminal_cmd", "search"]),
            ("search", "other-mcp", vec!["search"]),
        ]
        .into_iter()
        .map(|(s, p, t)| {
            (
                s.to_string(),
                (p.to_string(), t.into_iter().map(String::from).collect()),
            )
        })
        .collect();
        let f = shadowing(&servers);
        let rules = |s: &str| -> Vec<(String, String)> {
            f.get(s)
                .into_iter()
                .flatten()
                .map(|f| (f.rule.clone(), f.step.clone()))
                .collect()
        };
        assert_eq!(
            rules("desktop"),
            [(
                "tool-shadowing".to_string(),
                "tools/list:read_file".to_string()
            )]
        );
        assert_eq!(
            rules("filesystem"),
            [(
                "tool-shadowing".to_string(),
                "tools/list:read_file".to_string()
            )],
            "both sides are told"
        );
        assert_eq!(
            rules("notes"),
            [
                (
                    "well-known-name".to_string(),
                    "tools/list:run_terminal_cmd".to_string()
                ),
                (
                    "tool-shadowing".to_string(),
                    "tools/list:search".to_string()
                )
            ]
        );
        assert!(
            f["desktop"][0].why.contains("'filesystem'"),
            "{}",
            f["desktop"][0].why
        );
    }

    #[test]
    fn a_package_a_typo_from_a_popular_one_is_a_near_miss() {
        let popular = popular();
        assert!(popular.len() >= 50, "the corpus's names: {}", popular.len());
        assert!(popular
            .iter()
            .any(|p| p == "@modelcontextprotocol/server-filesystem"));
        for typo in [
            "@modelcontextprotocol/server-filesytem",
            "@modelcontextprotcol/server-filesystem",
            "@modelcontextprotocoI/server-filesystem",
            "mcp-server-fecth",
        ] {
            let f = near_miss(typo, &popular).unwrap_or_else(|| panic!("{typo}"));
            assert_eq!(
                (f.class.as_str(), f.rule.as_str()),
                ("installer-spoofing", "package-near-miss")
            );
        }
        // The popular ones themselves, each against the others: none.
        for p in &popular {
            let others: Vec<String> = popular.iter().filter(|o| *o != p).cloned().collect();
            assert!(
                near_miss(p, &others).is_none(),
                "{p} is a near miss of {:?}",
                near_miss(p, &others).map(|f| f.why)
            );
        }
        assert!(near_miss(&"x".repeat(100_000), &popular).is_none());
    }

    #[test]
    fn distances_stop_past_their_limit() {
        assert_eq!(distance("kitten", "sitting", 5), 3);
        assert_eq!(distance("abc", "abc", 2), 0);
        assert_eq!(distance("a", "abcdefgh", 2), 3);
        assert_eq!(distance("fetch", "fecth", 2), 1, "a swap is one edit");
    }
}
