//! A server's tool input schema: any JSON gives arguments within the
//! budget, quickly, and never a crash.
#![no_main]

use libfuzzer_sys::fuzz_target;
use probes::calls::arguments::{first_string_property, generate, wrong_types, MAX_BYTES, MAX_VALUES};

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
    // Copies of the schema's own values (const, default, examples) count
    // against the same budget as what is made.
    assert!(count(&args) <= MAX_VALUES + 1);
    // Strings made printable by escaping grow up to six times (\u0000).
    assert!(args.to_string().len() <= 6 * MAX_BYTES + 2);
    let _ = wrong_types(&schema);
    let _ = first_string_property(&schema);
});
