//! The Slurm deployment end to end (deploy/slurm/e2e.sh): a single-node
//! cluster of its own, the audit's shards as an array job whose tasks run
//! in the testbed, a dependent merge that matches an unsharded audit of
//! the same slice, and a lost task that the merge names and a
//! re-submission of that index alone completes.

use std::path::Path;
use std::process::Command;

#[test]
fn a_sharded_audit_under_slurm_merges_to_the_unsharded_one() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/slurm/e2e.sh");
    let out = Command::new(script)
        .output()
        .expect("run deploy/slurm/e2e.sh");
    let said = String::from_utf8_lossy(&out.stderr);
    eprintln!("{said}");
    assert!(out.status.success(), "deploy/slurm/e2e.sh failed:\n{said}");
    assert!(
        said.contains("slurm-e2e: same 2 cells and verdicts"),
        "{said}"
    );
    assert!(said.contains("shard 1/2 is missing"), "{said}");
    assert!(said.trim_end().ends_with("slurm-e2e: ok"), "{said}");
}
