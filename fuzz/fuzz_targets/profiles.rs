//! Withholding profile files as users write them: any text is parsed or
//! refused with an error; every profile a file defines resolves, alone
//! and composed with a built-in, or is refused with an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use withholding::Profiles;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(profiles) = Profiles::parse(text, "fuzz.toml") else {
        return;
    };
    for name in profiles.names() {
        let _ = profiles.resolve(&name);
        let _ = profiles.resolve(&format!("{name}+deny-exec"));
    }
});
