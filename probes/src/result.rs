//! The probe's output, stable and serialisable (docs/probe-result.md).

use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    /// The server answered with a JSON-RPC error or a tool error.
    Error,
    Timeout,
    /// The transport closed (the server exited or crashed).
    Closed,
}

#[derive(Debug, Clone, Serialize)]
pub struct StepResult {
    /// `initialize`, `tools/list`, `tools/call:<name>`.
    pub step: String,
    pub outcome: Outcome,
    /// Time since the server process was spawned, at the answer.
    pub at_ms: f64,
    /// Duration of this step alone.
    pub took_ms: f64,
    /// Step details: server info, tool names, call result text.
    pub detail: serde_json::Value,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProbeResult {
    /// Result format version.
    pub schema: u32,
    pub command: Vec<String>,
    pub protocol_version: Option<String>,
    pub server_name: Option<String>,
    pub tools: Vec<String>,
    pub steps: Vec<StepResult>,
}

impl ProbeResult {
    /// True when every step succeeded.
    pub fn ok(&self) -> bool {
        self.steps.iter().all(|s| s.outcome == Outcome::Ok)
    }

    /// A short human summary.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "server {} (protocol {}), {} tools\n",
            self.server_name.as_deref().unwrap_or("?"),
            self.protocol_version.as_deref().unwrap_or("?"),
            self.tools.len()
        );
        for st in &self.steps {
            s += &format!(
                "  {:<28} {:<8} at {:>9.1} ms (took {:.1} ms)\n",
                st.step,
                format!("{:?}", st.outcome).to_lowercase(),
                st.at_ms,
                st.took_ms
            );
        }
        s
    }
}
