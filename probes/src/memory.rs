//! What a server costs the host in memory: the proportional set size
//! (PSS, `/proc/PID/smaps_rollup`) of the process the probe started and
//! every process descended from it. For `mcpvm run` that is the VMM with
//! the guest memory it touched; for a bare server, the server and every
//! program it started (a browser's renderers). PSS splits a page shared
//! by several processes between them, so libraries shared with the rest
//! of the host count in part, and nothing is counted twice.

use std::collections::BTreeMap;
use std::fs;

/// PSS of `root` and its descendants, KiB; `None` if `root` is gone.
pub fn tree_pss_kib(root: u32) -> Option<u64> {
    let parents = parents();
    let tree = descendants(root, &parents);
    let mut total = pss_kib(root)?;
    // A process that ended meanwhile counts nothing.
    total += tree.iter().filter_map(|&p| pss_kib(p)).sum::<u64>();
    Some(total)
}

/// Every process's parent, from `/proc/PID/stat`.
fn parents() -> BTreeMap<u32, u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return BTreeMap::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            Some((pid, parent_of(&stat)?))
        })
        .collect()
}

/// The parent in a `stat` line: the field after the state, which follows
/// the command name's closing parenthesis (a name may hold spaces and
/// parentheses, so the last one counts).
fn parent_of(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The processes below `root` (not `root` itself).
fn descendants(root: u32, parents: &BTreeMap<u32, u32>) -> Vec<u32> {
    let mut found = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for (&child, &parent) in parents {
            if parent == p && child != root && !found.contains(&child) {
                found.push(child);
                frontier.push(child);
            }
        }
    }
    found
}

fn pss_kib(pid: u32) -> Option<u64> {
    let rollup = fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    kib_field(&rollup, "Pss:")
}

/// The value of the line starting with `key` (`Pss:`, `MemAvailable:`)
/// in a /proc file that counts in kB (smaps_rollup, meminfo).
pub fn kib_field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_is_read_past_a_name_with_parentheses_and_spaces() {
        assert_eq!(parent_of("42 (a) b (c)) S 7 42 42 0"), Some(7));
        assert_eq!(parent_of("1 (init) S 0 1 1"), Some(0));
        assert_eq!(parent_of("garbage"), None);
    }

    #[test]
    fn descendants_are_found_at_any_depth_and_cycles_end() {
        let parents = BTreeMap::from([(2, 1), (3, 2), (4, 3), (5, 1), (9, 8), (1, 4)]);
        let mut d = descendants(1, &parents);
        d.sort();
        assert_eq!(d, [2, 3, 4, 5]);
    }

    /// A shell whose child holds 64 MiB of touched memory: the shell's
    /// tree counts it, the shell alone does not.
    #[test]
    fn a_process_tree_counts_its_childrens_memory() {
        let mut shell = std::process::Command::new("/bin/sh")
            .args([
                "-c",
                "python3 -c 'import time; b = bytearray(64 << 20); b[::4096] = b\"x\" * (len(b) // 4096); print(1, flush=True); time.sleep(30)'; :",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(shell.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        let alone = pss_kib(shell.id());
        let tree = tree_pss_kib(shell.id());
        // The python child first: killing the shell would orphan it.
        let _ = std::process::Command::new("pkill")
            .args(["-P", &shell.id().to_string()])
            .status();
        let _ = shell.kill();
        let _ = shell.wait();
        let (alone, tree) = (alone.unwrap(), tree.unwrap());
        assert!(alone < 16 * 1024, "the shell alone: {alone} KiB");
        assert!(tree >= 60 * 1024, "the tree: {tree} KiB");
    }
}
