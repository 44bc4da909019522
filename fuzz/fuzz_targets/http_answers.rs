//! What a server that speaks Streamable HTTP sends back to the probe
//! (`probes::http::parse`): any bytes are read as a status, a session and
//! messages, or refused with an error; the messages never hold more than
//! the answer did.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(answer) = probes::http::parse(data) {
        let total: usize = answer.messages.iter().map(Vec::len).sum();
        assert!(total <= data.len(), "{total} bytes of messages from {} bytes", data.len());
    }
});
