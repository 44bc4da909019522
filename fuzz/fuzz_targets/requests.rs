//! A request file another process hands `mcpvm run --request` or
//! `mcpvm probe --request` (written by mcpvm, but a file on disk that
//! anyone who shares the directory may replace): any bytes are read
//! into one request or refused with one error, never a crash; what is
//! read goes back through its file unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpvm::commands::run::RunRequest;
use mcpvm_tools::request::ProbeRequest;

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
        assert_eq!(RunRequest::read(&path).unwrap(), run);
    }
    if let Ok(probe) = ProbeRequest::read(&given) {
        let path = dir.path().join("probe-again.json");
        probe.write(&path).unwrap();
        assert_eq!(ProbeRequest::read(&path).unwrap(), probe);
    }
});
