//! What a probe is asked to do: the lifecycle to speak, the calls to make
//! and with what, the hostile steps, the limits, and what the command is
//! given besides its argv.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LifecycleChoice {
    /// Try `server/discover` (2026-07-28); on an error or no answer within
    /// the discover timeout, use `initialize`.
    Auto,
    Initialize,
    Stateless,
}

/// What the user said about one tool.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolArgs {
    Given(Map<String, Value>),
    /// Never call it.
    Dangerous,
}

#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// Where the server sees the seeded workspace, if it has one: path
    /// arguments point into it (`arguments::Hints`).
    pub workspace: Option<String>,
    /// Where the guest serves that workspace over HTTP, if it does
    /// (`arguments::Hints::site`).
    pub site: Option<String>,
    /// Limit for the handshake (includes the server's start, and the
    /// microVM's boot when the command is `mcpvm run`).
    pub init_timeout: Duration,
    /// Limit for every later step.
    pub step_timeout: Duration,
    /// In auto mode, how long an unanswered `server/discover` waits before
    /// `initialize` is tried.
    pub discover_timeout: Duration,
    pub lifecycle: LifecycleChoice,
    pub calls: BTreeMap<String, ToolArgs>,
    /// The order the user named tools in (`only_tools`, then `calls`):
    /// they are made in it (a page is opened before it is filled in),
    /// given or generated, before any tool not named.
    pub call_order: Vec<String>,
    /// Call only the tools in `calls`.
    pub only_given: bool,
    /// Make each generated call once, taking no refusal's advice
    /// (`calls::feedback`): in a cell judged against its baseline, a tool
    /// is kept only if the call that worked there still works.
    pub no_retries: bool,
    /// Call none but these tools (the others are listed, not called): an
    /// audit's cell after its baseline needs call only the tools that
    /// worked there, for only those can it take away.
    pub only_tools: Option<std::collections::BTreeSet<String>>,
    /// Also make the varied second call (`arguments::vary`) of a call in
    /// `calls`: an audit's calls are there to show the server working;
    /// a user's `--call` is made exactly once.
    pub vary_given: bool,
    /// Also call tools annotated `destructiveHint: true`.
    pub allow_destructive: bool,
    pub robustness: bool,
    /// Every start of the command begins from the same state: a microVM
    /// whose workspace and disks are read-only keeps nothing of a run
    /// (its root overlay and /tmp are the guest's memory). The
    /// robustness probes' `reopen` would be the first start again, a
    /// whole boot for no evidence: it is not run.
    pub starts_fresh: bool,
    /// How long a robustness probe waits for an answer.
    pub answer_timeout: Duration,
    /// How long a server may take to exit after its stdin closes (a VM
    /// powers off and writes its reports).
    pub exit_grace: Duration,
    /// The command is `mcpvm run --timings FILE …`: read the VM's phases.
    pub vm_timings: Option<PathBuf>,
    /// … and `--events FILE`: read the guest agent's events.
    pub vm_events: Option<PathBuf>,
    /// The server starts a program that looks hosts up on its own, at any
    /// time (a browser's background services): a refused lookup during a
    /// call says nothing of what the call waits on, so calls are not cut
    /// short after one (`crate::calls::upstream`).
    pub background_lookups: bool,
    /// Measure the memory of the server's processes once its calls have
    /// answered (`ProbeResult::memory_pss_kib`).
    pub measure_memory: bool,
    /// Attack every called tool with `payloads` (`crate::steps::attacks`).
    pub security: bool,
    pub payloads: Vec<crate::steps::attacks::Payload>,
    /// The server's boundary (guest paths): what a traversal payload may
    /// reach (`crate::judge::findings`).
    pub roots: Vec<String>,
    /// The server speaks Streamable HTTP here (`crate::transport::http`), not on
    /// the command's stdio.
    pub http: Option<crate::transport::http::Endpoint>,
    /// Added to the command's environment (the server's variables when
    /// the command is `mcpvm run --env KEY`: values never go in argv).
    pub env: Vec<(String, String)>,
    /// Handed to the command as descriptor 3 (`crate::transport::wire::Extras`).
    pub fd3: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
    /// Values redacted from the result before anyone sees it.
    pub secrets: crate::report::redact::Secrets,
    /// Keep every listed definition in the result (`mcpvm pin`).
    pub keep_definitions: bool,
    /// Compare the listing with this pin (`--pinned`), the version the
    /// server runs now beside it (None: its `serverInfo` version).
    pub pinned: Option<(crate::judge::pin::Pinned, Option<String>)>,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            workspace: None,
            site: None,
            init_timeout: Duration::from_secs(120),
            step_timeout: Duration::from_secs(30),
            discover_timeout: Duration::from_secs(10),
            lifecycle: LifecycleChoice::Auto,
            calls: BTreeMap::new(),
            call_order: Vec::new(),
            only_given: false,
            no_retries: false,
            only_tools: None,
            vary_given: false,
            allow_destructive: false,
            robustness: false,
            starts_fresh: false,
            answer_timeout: Duration::from_secs(5),
            exit_grace: Duration::from_secs(10),
            vm_timings: None,
            vm_events: None,
            background_lookups: false,
            measure_memory: false,
            security: false,
            payloads: Vec::new(),
            roots: Vec::new(),
            http: None,
            env: Vec::new(),
            fd3: None,
            secrets: Default::default(),
            keep_definitions: false,
            pinned: None,
        }
    }
}

impl ProbeOptions {
    /// The events a call watches for a refused lookup, to be cut short
    /// after one (`crate::calls::upstream`): none for a server whose own
    /// programs look hosts up in the background.
    pub fn refusal_watch(&self) -> Option<&std::path::Path> {
        self.vm_events
            .as_deref()
            .filter(|_| !self.background_lookups)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_with_background_lookups_has_its_calls_never_cut_short() {
        let mut o = ProbeOptions {
            vm_events: Some("events.jsonl".into()),
            ..ProbeOptions::default()
        };
        assert_eq!(
            o.refusal_watch(),
            Some(std::path::Path::new("events.jsonl"))
        );
        o.background_lookups = true;
        assert_eq!(o.refusal_watch(), None);
    }
}
