//! The guest kernel command line from any user text and device list: it
//! is built or refused with an error, never a panic, and what it builds
//! holds the VMM's own options first.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpvm_fuzz::Input;

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let console = input.u8() & 1 == 1;
    let devices: Vec<(u64, u32)> = (0..input.u8() % 40)
        .map(|_| (input.u64(), input.u32()))
        .collect();
    let user = String::from_utf8_lossy(input.bytes(usize::MAX)).into_owned();
    if let Ok(cl) = vmm::cmdline::compose(console, &devices, &user) {
        let s = cl
            .as_cstring()
            .expect("a built command line has no NUL")
            .into_string()
            .expect("utf-8");
        assert!(s.starts_with(vmm::cmdline::BASE), "{s}");
    }
});
