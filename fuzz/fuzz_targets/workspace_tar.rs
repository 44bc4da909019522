//! The tar a guest sends back for a writable workspace: whatever it holds,
//! nothing lands outside DIR, nothing protected is taken, and DIR is
//! either the guest's copy or unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let t = mcpvm_fuzz::scratch();
    let dir = t.path().join("ws");
    std::fs::create_dir(&dir).unwrap();
    std::fs::create_dir(dir.join(".git")).unwrap();
    std::fs::write(dir.join(".git/config"), "host").unwrap();
    // Where the workspace thread unpacks: a scratch directory inside DIR.
    let fresh = dir.join(format!("{}new-fuzz", mcpvm::workspace::SCRATCH));
    std::fs::create_dir(&fresh).unwrap();
    let _ = mcpvm::workspace::take_back(data, &dir, &fresh, 1 << 20);
    let _ = std::fs::remove_dir_all(&fresh);
    let scratch_left = std::fs::read_dir(&dir).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(mcpvm::workspace::SCRATCH)
    });
    assert!(!scratch_left, "the swap's scratch is gone");
    let names: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["ws"], "nothing beside the workspace");
    assert_eq!(
        std::fs::read_to_string(dir.join(".git/config")).unwrap(),
        "host"
    );
});
