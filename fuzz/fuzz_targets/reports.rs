//! An audit's records (server output, guest events) rendered as the
//! Markdown and HTML reports: no crash, and nothing a record says becomes
//! markup.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use mcpvm_tools::audit::meta::Meta;
use mcpvm_tools::audit::record::Record;
use mcpvm_tools::audit::report::{html, markdown};

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let (Ok(meta), Ok(records)) = (
        serde_json::from_value::<Meta>(v["meta"].clone()),
        serde_json::from_value::<Vec<Record>>(v["records"].clone()),
    ) else {
        return;
    };
    let records: BTreeMap<_, _> = records
        .into_iter()
        .map(|r| ((r.server.clone(), r.profile.clone()), r))
        .collect();
    let _ = markdown(&meta, &records);
    let h = html(&meta, &records);
    for r in records.values() {
        for e in &r.evidence.errors {
            if e.contains("<script") {
                assert!(!h.contains("<script"), "a record's text became markup");
            }
        }
    }
});
