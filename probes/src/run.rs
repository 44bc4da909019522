//! A probe run against a server started as a child process.

use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use tokio::process::Command;

use crate::result::{Outcome, ProbeResult, StepResult};

pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone)]
pub struct ToolCall {
    pub name: String,
    pub arguments: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// Limit for the handshake (includes the server's start, and the
    /// microVM's boot when the command is `mcpvm run`).
    pub init_timeout: Duration,
    /// Limit for every later step.
    pub step_timeout: Duration,
    pub calls: Vec<ToolCall>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("No command to probe")]
    NoCommand,
    #[error("Cannot start {command}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("Cannot start the probe's runtime")]
    Runtime(#[source] std::io::Error),
}

/// How long a server may take to exit after its stdin closes.
const EXIT_GRACE: Duration = Duration::from_secs(10);

/// Owns the end of the server process: waits for it, or SIGKILLs it.
struct KillGuard(Option<u32>);

impl KillGuard {
    fn pid(&self) -> Option<i32> {
        self.0.and_then(|p| i32::try_from(p).ok())
    }

    /// Waits up to `grace` for the server to exit, reaping it.
    fn reap_within(&mut self, grace: Duration) {
        let Some(pid) = self.pid() else { return };
        let until = Instant::now() + grace;
        while Instant::now() < until {
            // SAFETY: waitpid on our own child's pid, no status wanted.
            let r = unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
            if r == pid || r < 0 {
                self.0 = None;
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for KillGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.pid() {
            // SAFETY: kill and waitpid on our own child's pid, not yet reaped.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
        }
    }
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// Starts `command`, then: initialize, tools/list, each requested call.
/// Steps after a failed handshake are not attempted.
pub fn probe_process(command: &[String], opts: &ProbeOptions) -> Result<ProbeResult, ProbeError> {
    let (program, args) = command.split_first().ok_or(ProbeError::NoCommand)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ProbeError::Runtime)?;
    rt.block_on(async {
        let mut cmd = Command::new(program);
        cmd.args(args);
        let spawn_err = |source| ProbeError::Spawn {
            command: program.clone(),
            source,
        };
        let start = Instant::now();
        let transport = TokioChildProcess::new(cmd).map_err(spawn_err)?;
        // rmcp kills the child on drop from a task on this runtime, which
        // is gone by then when we return early: kill it ourselves, so a hung
        // or half-started server never outlives the probe.
        let mut guard = KillGuard(transport.id());
        let mut result = ProbeResult {
            schema: SCHEMA_VERSION,
            command: command.to_vec(),
            protocol_version: None,
            server_name: None,
            tools: Vec::new(),
            steps: Vec::new(),
        };
        let step = |name: &str, outcome, t0: Instant, detail| StepResult {
            step: name.to_string(),
            outcome,
            at_ms: ms(start.elapsed()),
            took_ms: ms(t0.elapsed()),
            detail,
        };

        let t0 = Instant::now();
        let client = match tokio::time::timeout(opts.init_timeout, ().serve(transport)).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                result.steps.push(step(
                    "initialize",
                    Outcome::Closed,
                    t0,
                    serde_json::json!(e.to_string()),
                ));
                return Ok(result);
            }
            Err(_) => {
                result.steps.push(step(
                    "initialize",
                    Outcome::Timeout,
                    t0,
                    serde_json::Value::Null,
                ));
                return Ok(result);
            }
        };
        let info = client
            .peer_info()
            .map(|i| serde_json::to_value(&*i).unwrap_or_default())
            .unwrap_or_default();
        result.protocol_version = info["protocolVersion"].as_str().map(str::to_string);
        result.server_name = info["serverInfo"]["name"].as_str().map(str::to_string);
        result.steps.push(step("initialize", Outcome::Ok, t0, info));

        let t0 = Instant::now();
        match tokio::time::timeout(opts.step_timeout, client.list_all_tools()).await {
            Ok(Ok(tools)) => {
                result.tools = tools.iter().map(|t| t.name.to_string()).collect();
                result.steps.push(step(
                    "tools/list",
                    Outcome::Ok,
                    t0,
                    serde_json::json!(result.tools),
                ));
            }
            Ok(Err(e)) => result.steps.push(step(
                "tools/list",
                Outcome::Error,
                t0,
                serde_json::json!(e.to_string()),
            )),
            Err(_) => result.steps.push(step(
                "tools/list",
                Outcome::Timeout,
                t0,
                serde_json::Value::Null,
            )),
        }

        for call in &opts.calls {
            let name = format!("tools/call:{}", call.name);
            let t0 = Instant::now();
            let params = CallToolRequestParams::new(call.name.clone())
                .with_arguments(call.arguments.clone());
            let s = match tokio::time::timeout(opts.step_timeout, client.call_tool(params)).await {
                Ok(Ok(r)) => {
                    let text: Vec<String> = r
                        .content
                        .iter()
                        .filter_map(|c| c.as_text().map(|t| t.text.to_string()))
                        .collect();
                    let outcome = if r.is_error == Some(true) {
                        Outcome::Error
                    } else {
                        Outcome::Ok
                    };
                    step(&name, outcome, t0, serde_json::json!(text.join("")))
                }
                Ok(Err(e)) => {
                    let outcome = if client.is_closed() {
                        Outcome::Closed
                    } else {
                        Outcome::Error
                    };
                    step(&name, outcome, t0, serde_json::json!(e.to_string()))
                }
                Err(_) => step(&name, Outcome::Timeout, t0, serde_json::Value::Null),
            };
            result.steps.push(s);
        }
        // Graceful: close stdin and give the server time to exit by itself
        // (a VM powers off and writes its reports); only then kill it.
        let _ = tokio::time::timeout(EXIT_GRACE, client.cancel()).await;
        guard.reap_within(EXIT_GRACE);
        Ok(result)
    })
}
