//! What a server that speaks Streamable HTTP sends back to the probe as
//! an event stream (`probes::transport::http::read_events`), in pieces cut where the
//! input says (HTTP itself is reqwest's): any bytes give messages, and the
//! messages never hold more than the stream did.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte cuts the rest into pieces of that many bytes (at
    // least one): the reader must not care where a network read ends.
    let Some((&cut, stream)) = data.split_first() else {
        return;
    };
    let messages = probes::transport::http::read_events(stream.chunks(usize::from(cut).max(1)));
    let total: usize = messages.iter().map(Vec::len).sum();
    assert!(
        total <= stream.len(),
        "{total} bytes of messages from {} bytes",
        stream.len()
    );
    let whole = probes::transport::http::read_events([stream]);
    assert_eq!(
        messages, whole,
        "the same messages however the stream is cut"
    );
});
