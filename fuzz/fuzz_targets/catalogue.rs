//! Server catalogues as users write them: any text is parsed or refused
//! with an error; every entry of a parsed catalogue gives its command line
//! and directory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpvm_images::catalogue::Catalogue;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(cat) = Catalogue::parse(text, "fuzz.toml") else {
        return;
    };
    for (name, entry) in &cat.servers {
        let argv = entry.argv(name);
        assert!(!argv.is_empty(), "{name}: an entry with no command");
        assert!(cat.get(name).is_ok());
    }
});
