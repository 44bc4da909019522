//! A server's tool input schema: any JSON gives arguments within the
//! budget, quickly, and never a crash.
#![no_main]

use libfuzzer_sys::fuzz_target;
use probes::arguments::{
    first_string_property, generate, wrong_types, MAX_STRING_BYTES, MAX_VALUES,
};

fn count(v: &serde_json::Value) -> usize {
    1 + match v {
        serde_json::Value::Array(a) => a.iter().map(count).sum(),
        serde_json::Value::Object(m) => m.values().map(count).sum(),
        _ => 0,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(serde_json::Value::Object(schema)) = serde_json::from_slice(data) else {
        return;
    };
    let args = serde_json::Value::Object(generate(&schema));
    // Values the schema holds itself (const, default, examples) are
    // copied, not made: count what was made on top of the input's size.
    assert!(count(&args) <= MAX_VALUES + 1 + count(&serde_json::Value::Object(schema.clone())));
    assert!(args.to_string().len() <= MAX_STRING_BYTES + data.len() * 2 + 64 * MAX_VALUES);
    let _ = wrong_types(&schema);
    let _ = first_string_property(&schema);
});
