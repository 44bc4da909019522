//! `mcpvm audit merge` over shards another machine wrote: an `audit.json`
//! and a `results.jsonl` of any bytes (names that are paths or TOML
//! lines, counts of any size, records of cells the audit lacks). No
//! crash, no allocation sized by a hostile count (libFuzzer's memory
//! limit), and nothing written anywhere but under `--out`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // audit.json, then results.jsonl, split at the first NUL.
    let (meta, journal) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b""[..]),
    };
    let root = mcpvm_fuzz::scratch();
    let shard = root.path().join("shard");
    std::fs::create_dir(&shard).unwrap();
    std::fs::write(shard.join("audit.json"), meta).unwrap();
    std::fs::write(shard.join("results.jsonl"), journal).unwrap();
    let out = root.path().join("out");
    // With --calls-from-runs: the shard holds no runs/, so every record
    // keeps its own calls.
    let _ = mcpvm_tools::audit::merge(&out, &[shard.clone()], true, true);
    // Only the shard (as it was) and --out are in the scratch root.
    let mut names: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert!(
        names.iter().all(|n| n == "shard" || n == "out"),
        "a merge wrote beside --out: {names:?}"
    );
    assert_eq!(std::fs::read(shard.join("audit.json")).unwrap(), meta);
    assert_eq!(std::fs::read(shard.join("results.jsonl")).unwrap(), journal);
    assert_eq!(std::fs::read_dir(&shard).unwrap().count(), 2);
});
