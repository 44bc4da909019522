//! What a probe is asked to do, as one typed value: `mcpvm probe`'s
//! command line parses onto it (`commands::probe::ProbeArgs`), and an
//! audit's cell hands it to its probe as a file (`mcpvm probe --request
//! FILE`) instead of writing it out as arguments to be parsed back. The
//! VM it asks for is `mcpvm run`'s own request ([`VmRequest`]), passed on
//! as it is.

use std::path::{Path, PathBuf};

use mcpvm::commands::run::VmRequest;
use mcpvm::run::request::RequestError;
use probes::judge::gate::Severity;
use probes::{LifecycleChoice, ToolArgs};
use serde::{Deserialize, Serialize};

pub const INIT_TIMEOUT: u64 = 120;
pub const STEP_TIMEOUT: u64 = 30;
pub const ANSWER_TIMEOUT: u64 = 5;
pub const EXIT_GRACE: u64 = 5;

/// A probe of one server (each field is the `mcpvm probe` flag of the
/// same name; `in_vm` is `--vm`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProbeRequest {
    /// Tools to call with these arguments, in this order.
    pub call: Vec<(String, ToolArgs)>,
    /// Per-tool arguments from a JSON file.
    pub calls: Option<PathBuf>,
    /// Tools never to call.
    pub dangerous: Vec<String>,
    pub only_given: bool,
    /// Call none but these tools, in this order.
    pub only_tools: Option<Vec<String>>,
    pub no_retries: bool,
    pub vary_given: bool,
    pub allow_destructive: bool,
    pub robustness: bool,
    pub security: bool,
    pub payloads: Option<PathBuf>,
    pub roots: Vec<String>,
    pub sarif: Option<PathBuf>,
    pub fail_on: Option<Severity>,
    pub pinned: Option<PathBuf>,
    pub pin_out: Option<PathBuf>,
    pub lifecycle: LifecycleChoice,
    pub init_timeout: u64,
    pub step_timeout: u64,
    pub discover_timeout: Option<u64>,
    pub answer_timeout: u64,
    pub exit_grace: u64,
    /// Run the server in a microVM (a named server always is).
    pub in_vm: bool,
    pub warm: bool,
    pub snapshots: Option<PathBuf>,
    /// The microVM, when the server runs in one.
    pub vm: VmRequest,
    /// The server command (none for a named server).
    pub command: Vec<String>,
}

/// What `mcpvm probe` is given when no option is set.
impl Default for ProbeRequest {
    fn default() -> Self {
        ProbeRequest {
            call: Vec::new(),
            calls: None,
            dangerous: Vec::new(),
            only_given: false,
            only_tools: None,
            no_retries: false,
            vary_given: false,
            allow_destructive: false,
            robustness: false,
            security: false,
            payloads: None,
            roots: Vec::new(),
            sarif: None,
            fail_on: None,
            pinned: None,
            pin_out: None,
            lifecycle: LifecycleChoice::Auto,
            init_timeout: INIT_TIMEOUT,
            step_timeout: STEP_TIMEOUT,
            discover_timeout: None,
            answer_timeout: ANSWER_TIMEOUT,
            exit_grace: EXIT_GRACE,
            in_vm: false,
            warm: false,
            snapshots: None,
            vm: VmRequest::default(),
            command: Vec::new(),
        }
    }
}

impl ProbeRequest {
    /// Reads a probe request another mcpvm process wrote (bounded,
    /// every field known, each checked as its flag would be).
    pub fn read(path: &Path) -> Result<ProbeRequest, RequestError> {
        mcpvm::run::request::read(path)
    }

    /// Writes the request as `path` (a new file, its owner's alone).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        mcpvm::run::request::write(self, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_request_goes_whole_through_its_file() {
        let t = tempfile::tempdir().unwrap();
        let mut given = serde_json::Map::new();
        given.insert("a".into(), serde_json::json!(2));
        let req = ProbeRequest {
            call: vec![
                ("add".into(), ToolArgs::Given(given)),
                ("drop".into(), ToolArgs::Dangerous),
            ],
            calls: Some("calls.json".into()),
            dangerous: vec!["delete_all".into()],
            only_given: true,
            only_tools: Some(vec!["add".into()]),
            no_retries: true,
            vary_given: true,
            allow_destructive: true,
            robustness: true,
            security: true,
            payloads: Some("mine.toml".into()),
            roots: vec!["/workspace/repo".into()],
            sarif: Some("findings.sarif".into()),
            fail_on: Some(Severity::Medium),
            pinned: Some("pins.json".into()),
            pin_out: Some("out.json".into()),
            lifecycle: LifecycleChoice::Stateless,
            init_timeout: 300,
            step_timeout: 120,
            discover_timeout: Some(9),
            answer_timeout: 4,
            exit_grace: 20,
            in_vm: true,
            warm: true,
            snapshots: Some("/cache".into()),
            vm: VmRequest {
                server: Some("memory".into()),
                profile: Some("baseline".into()),
                timeout: Some(600),
                ..VmRequest::default()
            },
            command: vec![],
        };
        let path = t.path().join("probe.json");
        req.write(&path).unwrap();
        assert_eq!(ProbeRequest::read(&path).unwrap(), req);
        assert!(req.write(&path).is_err(), "never over a file there");
        // A field this version does not know is refused, not ignored.
        std::fs::write(&path, r#"{"in_vm": true, "vm": {}, "shell": "x"}"#).unwrap();
        let e = ProbeRequest::read(&path).unwrap_err().to_string();
        assert!(e.contains("unknown field `shell`"), "{e}");
        std::fs::write(&path, r#"{"fail_on": "dire"}"#).unwrap();
        let e = ProbeRequest::read(&path).unwrap_err().to_string();
        assert!(e.contains("unknown variant `dire`"), "{e}");
    }
}
