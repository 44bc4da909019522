//! What a server prints on stdout, as the probe reads it: any bytes are
//! split into lines, recorded within bounds and forwarded when JSON.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use probes::transport::exchange::{Exchange, MAX_ENTRIES};

fuzz_target!(|data: &[u8]| {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let x = Exchange::new(std::time::Instant::now());
    let (tx, mut rx) = tokio::sync::mpsc::channel(1 << 16);
    rt.block_on(probes::transport::wire::read_stdout(
        data,
        tx,
        x.clone(),
        Arc::new(OnceLock::new()),
    ));
    let mut forwarded = 0;
    while rx.try_recv().is_ok() {
        forwarded += 1;
    }
    assert!(x.mark() <= MAX_ENTRIES);
    assert!(forwarded <= data.len());
});
