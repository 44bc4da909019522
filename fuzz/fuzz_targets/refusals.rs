//! A server's refusal of a call (its text is the server's to choose),
//! read against a tool's schema (the server's too): any input gives a
//! bounded next call, quickly, and never a crash.
#![no_main]

use libfuzzer_sys::fuzz_target;
use probes::calls::arguments::{Hints, MAX_BYTES};
use probes::calls::feedback::{complains, read, retry};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // The first line is the schema when it is one; the rest the refusal.
    let (first, said) = text.split_once('\n').unwrap_or(("", &text));
    let schema = match serde_json::from_str(first) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::json!({"type": "object", "properties": {
            "path": {"type": "string"}, "mode": {"type": "string"}, "book_id": {"type": "string"}},
            "required": ["path"]})
        .as_object()
        .cloned()
        .unwrap_or_default(),
    };
    let args = probes::calls::arguments::generate(&schema);
    let hints = Hints {
        workspace: Some("/workspace".into()),
        description: said.chars().take(256).collect(),
        ..Hints::default()
    };
    let _ = read(said, &schema, &args);
    let _ = complains(said, &schema, &args);
    if let Some((next, why)) = retry(said, &schema, &args, &hints, &[]) {
        assert!(serde_json::to_string(&next).unwrap().len() <= 6 * MAX_BYTES + 2);
        assert!(why.len() <= 64 << 10, "{} bytes of why", why.len());
    }
    let _ = probes::calls::pattern::sample(said);
});
