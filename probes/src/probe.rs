//! A probe run: start the server, speak to it as a real client, then (if
//! asked) as a hostile one, and end it. The server never outlives the run.

use crate::report::result::{Lifecycle, Outcome, ProbeResult};
use crate::steps::conformance::{self, Handshake};
use crate::steps::robustness::{self, Context, Envelope, Target};
use crate::transport::wire::{Wire, WireError};

pub use crate::options::{LifecycleChoice, ProbeOptions, ToolArgs};

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("Cannot start the probe's runtime")]
    Runtime(#[source] std::io::Error),
    #[error("Cannot redact the secrets from the probe's result, so it is not shown")]
    Redact(#[source] serde_json::Error),
}

/// Probes the server that `command` starts, as a host process speaking
/// stdio (which is also how a microVM is reached: `mcpvm run` is one).
pub fn probe_process(command: &[String], opts: &ProbeOptions) -> Result<ProbeResult, ProbeError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ProbeError::Runtime)?;
    rt.block_on(probe(command, opts))
}

async fn probe(command: &[String], opts: &ProbeOptions) -> Result<ProbeResult, ProbeError> {
    let transport = if opts.vm_timings.is_some() {
        "vm"
    } else {
        "process"
    };
    let mut result = ProbeResult::new(command, transport);
    let extras = crate::transport::wire::Extras {
        env: opts.env.clone(),
        http: opts.http.clone(),
        fd3: opts.fd3.clone(),
        secrets: opts.secrets.clone(),
    };
    let mut wire = Wire::spawn_with(command, extras)?;
    let mut hs = conformance::handshake(&mut wire, opts, opts.lifecycle, &mut result.steps).await;
    if matches!(hs, Handshake::RetryWithInitialize) {
        wire.shutdown(opts.exit_grace).await;
        wire = wire.respawn(command)?;
        hs = conformance::handshake(
            &mut wire,
            opts,
            LifecycleChoice::Initialize,
            &mut result.steps,
        )
        .await;
    }
    result.timings.first_stdout_byte_ms = wire.first_stdout_byte_ms();
    result.timings.spawned_monotonic_ms =
        Some(mcpvm_protocol::timings::monotonic_ms(wire.spawned()));
    if let Handshake::Done(client, lifecycle) = hs {
        result.lifecycle = Some(lifecycle);
        let tools = conformance::exercise(&client, &wire, opts, &mut result).await;
        result.roles = crate::judge::roles::declared(&tools);
        if opts.measure_memory {
            result.memory_pss_kib = crate::memory::tree_pss_kib(wire.pid());
        }
        // Ends rmcp's client only; the wire stays open for the raw probes.
        let _ = tokio::time::timeout(opts.exit_grace, client.cancel()).await;
        if opts.robustness && !wire.exited() {
            let cx = Context {
                command,
                envelope: Envelope {
                    lifecycle,
                    protocol_version: result.protocol_version.clone().unwrap_or_else(|| {
                        match lifecycle {
                            Lifecycle::Stateless => "2026-07-28",
                            Lifecycle::Initialize => "2025-11-25",
                        }
                        .into()
                    }),
                },
                target: target(&result, &tools),
                answer_timeout: opts.answer_timeout,
                slow_timeout: opts.step_timeout,
                start_timeout: opts.init_timeout,
                exit_grace: opts.exit_grace,
                starts_fresh: opts.starts_fresh,
            };
            result.robustness = Some(robustness::run(&mut wire, &cx).await);
        }
    }
    result.exit = Some(wire.shutdown(opts.exit_grace).await);
    result.stderr = wire.stderr();
    result.stdout_garbage_lines = wire.exchange.garbage_lines();
    result.exchange_lines_dropped = wire.exchange.dropped();
    result.background_lookups = opts.background_lookups;
    if let Some(path) = &opts.vm_timings {
        result.timings.vm = std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
    }
    if let Some(path) = &opts.vm_events {
        result.guest_events = std::fs::read_to_string(path)
            .ok()
            .map(|text| mcpvm_protocol::messages::EventLine::parse_all(&text));
    }
    if let Some(events) = &result.guest_events {
        let sent: Vec<_> = result
            .steps
            .iter()
            .map(|s| crate::judge::effects::requests(&s.exchange))
            .collect();
        if let Some((per_step, recording)) = crate::judge::effects::group(events, &sent) {
            for (step, effects) in result.steps.iter_mut().zip(per_step) {
                step.effects = effects;
            }
            result.recording = Some(recording);
        }
        crate::judge::roles::observe(
            &mut result.roles,
            &result.steps,
            events,
            &opts.roots,
            opts.background_lookups,
        );
        match crate::judge::findings::judge(&result.steps, events, &opts.roots) {
            // Beside what the listings showed (definitions.rs).
            Ok(f) => result.findings.extend(f),
            Err(why) if opts.security => result.not_judged = Some(why),
            Err(_) => {}
        }
        result.roots = opts.roots.clone();
    }
    if opts.security && result.guest_events.is_none() {
        result.not_judged = Some(
            "the VM's events were not read, so what the server did could not be judged".into(),
        );
    }
    result.conclude();
    opts.secrets.record(result).map_err(ProbeError::Redact)
}

/// The tool the argument probes aim at: one that answered a call,
/// preferably one with a string property to oversize.
fn target(result: &ProbeResult, tools: &[rmcp::model::Tool]) -> Option<Target> {
    let answered: Vec<Target> = tools
        .iter()
        .filter_map(|t| {
            let step = result.step(&format!("tools/call:{}", t.name))?;
            if !matches!(step.outcome, Outcome::Ok | Outcome::ToolError) {
                return None;
            }
            Some(Target {
                name: t.name.to_string(),
                schema: (*t.input_schema).clone(),
                arguments: step.detail["arguments"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            })
        })
        .collect();
    answered
        .iter()
        .find(|t| crate::calls::arguments::first_string_property(&t.schema).is_some())
        .or(answered.first())
        .cloned()
}
