//! A snapshot's state file is input: any bytes are read and checked, or
//! refused with an error, never a crash; a target directory that is not a
//! snapshot is refused.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let t = mcpvm_fuzz::scratch();
    let dir = t.path().join("snap");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join(vmm::snapshot::STATE_FILE), data).unwrap();
    std::fs::write(dir.join(vmm::snapshot::MEMORY_FILE), [0u8; 4096]).unwrap();
    let _ = vmm::snapshot::read(&dir);
    let _ = vmm::snapshot::check_target(&dir);
});
