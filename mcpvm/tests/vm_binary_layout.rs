//! The VM's binary as `scripts/build` links it: the functions a run
//! executes (`mcpvm/hot-text.txt`, written by `scripts/text-order`) sit
//! together at the start of its code, so a VMM maps them and little else
//! (docs/benchmarks.md, "Density"). A list gone stale, or a link that
//! dropped it, costs every VMM about a megabyte: this says so.

mod common;

use std::collections::HashSet;
use std::process::Command;

/// (address, size, name) of the function symbols of `binary`, by address.
fn functions(binary: &std::path::Path) -> Vec<(u64, u64, String)> {
    let out = Command::new("nm")
        .args(["-n", "-S", "--defined-only"])
        .arg(binary)
        .output()
        .expect("nm (binutils) runs");
    assert!(out.status.success(), "nm {}", binary.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f.as_slice() {
                [addr, size, kind, name] if "tTwW".contains(*kind) => Some((
                    u64::from_str_radix(addr, 16).ok()?,
                    u64::from_str_radix(size, 16).ok()?,
                    name.to_string(),
                )),
                _ => None,
            }
        })
        .collect()
}

#[test]
fn the_code_a_run_executes_is_laid_out_together() {
    let binary = common::artifact("bin/mcpvm");
    let list = std::fs::read_to_string(common::workspace().join("mcpvm/hot-text.txt")).unwrap();
    let listed: HashSet<&str> = list
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    let funcs = functions(&binary);
    let hot: Vec<&(u64, u64, String)> = funcs
        .iter()
        .filter(|(_, _, n)| listed.contains(n.as_str()))
        .collect();
    let names: HashSet<&str> = hot.iter().map(|(_, _, n)| n.as_str()).collect();
    assert!(
        names.len() * 10 >= listed.len() * 9,
        "only {} of the {} functions in mcpvm/hot-text.txt are in {}: the list is out of date; renew it with scripts/text-order",
        names.len(),
        listed.len(),
        binary.display()
    );
    // Laid out together: nine in ten of them within the first 1.5 times
    // their own size of code. Scattered as the compiler leaves them, they
    // spread over the whole text (about half of them in that span).
    let start = funcs.first().map(|f| f.0).unwrap_or(0);
    let size: u64 = hot.iter().map(|f| f.1).sum();
    let within = hot.iter().filter(|f| f.0 < start + size * 3 / 2).count();
    assert!(
        within * 10 >= hot.len() * 9,
        "{within} of {} listed functions lie in the first {} KiB of {}'s code: scripts/build did not lay them out (lld's --symbol-ordering-file)",
        hot.len(),
        size * 3 / 2 / 1024,
        binary.display()
    );
}
