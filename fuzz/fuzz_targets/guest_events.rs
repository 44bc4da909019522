//! What a guest's agent sends on CONTROL: any bytes are read as events,
//! bounded (lines, count and file size), and never crash the host. The
//! same bytes as an install microVM's events file: its record stays
//! bounded (programs, calls kept per rule) and so do its findings.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpvm::run::events::{EventSink, MAX_EVENTS, MAX_FILE_BYTES};

fuzz_target!(|data: &[u8]| {
    let file = tempfile::tempfile().unwrap();
    let mut sink = EventSink::new(
        std::time::Instant::now(),
        Some(file.try_clone().unwrap()),
        None,
    );
    sink.read_from(data);
    let len = file.metadata().unwrap().len();
    assert!(len <= MAX_FILE_BYTES + 128, "{len}");
    let _ = MAX_EVENTS;

    let rec = mcpvm_tools::install::record::from_lines(data);
    assert!(rec.programs.len() <= 50, "{}", rec.programs.len());
    let mut rules: Vec<&str> = rec.beyond.iter().map(|b| b.rule.as_str()).collect();
    rules.dedup();
    for r in &rules {
        let kept = rec.beyond.iter().filter(|b| b.rule == *r).count();
        assert!(kept <= probes::judge::install::KEPT_PER_RULE, "{r}: {kept}");
    }
    let _ = mcpvm_tools::install::record::summary(&rec);
    for f in mcpvm_tools::install::record::findings(&rec) {
        assert!(!f.why.contains('\u{1b}'), "{}", f.why);
    }
});
