//! A request file another process hands `mcpvm run --request` or
//! `mcpvm probe --request` (written by mcpvm, but a file on disk that
//! anyone who shares the directory may replace): any bytes are read
//! into one request or refused with one error, never a crash; what is
//! read goes back through its file unchanged (its variables named once
//! each, as a request is written).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpvm::commands::run::{RunRequest, VmRequest};
use mcpvm_tools::request::ProbeRequest;

/// A request as its file gives it back: variables are written as names,
/// each once (`run::request`'s `names_only`).
fn names_once(vm: &VmRequest) -> VmRequest {
    let mut env: Vec<(String, Option<String>)> = Vec::new();
    for (k, v) in &vm.env {
        if !env.iter().any(|(seen, _)| seen == k) {
            env.push((k.clone(), v.clone()));
        }
    }
    VmRequest {
        env,
        ..vm.clone()
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(dir) = tempfile::tempdir() else { return };
    let given = dir.path().join("given.json");
    if std::fs::write(&given, data).is_err() {
        return;
    }
    if let Ok(run) = RunRequest::read(&given) {
        let again = dir.path().join("again");
        std::fs::create_dir(&again).unwrap();
        let path = run.write_in(&again).unwrap();
        let want = RunRequest {
            vm: names_once(&run.vm),
            ..run
        };
        assert_eq!(RunRequest::read(&path).unwrap(), want);
    }
    if let Ok(probe) = ProbeRequest::read(&given) {
        let path = dir.path().join("probe-again.json");
        probe.write(&path).unwrap();
        let want = ProbeRequest {
            vm: names_once(&probe.vm),
            ..probe
        };
        assert_eq!(ProbeRequest::read(&path).unwrap(), want);
    }
});
