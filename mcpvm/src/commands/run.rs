//! `mcpvm run -- <command> [args…]`: a drop-in stdio MCP server that runs
//! the command in its own microVM. Our stdin goes to the server's stdin,
//! its stdout to our stdout, byte for byte; its stderr to our stderr; its
//! exit status becomes ours.
//!
//! [`run`] is the recipe; its steps live in `crate::run` (the plan, the
//! channels and their relays, events, the snapshot's template client, and
//! `run::warm`, the warm-start cache).

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Instant;

use vmm::VmHandle;

use crate::host::rundir::RunDir;
use crate::logger::printable_lines;
use crate::run::channels::{HostChannels, Relays, Stdio, RELAY_DRAIN};
use crate::run::events::EventSink;
pub use crate::run::options::{RunArgs, VmOptions};
pub use crate::run::request::{Checked, RunRequest, VmRequest};
use crate::run::start::Start;
use crate::run::template::{self, INITIALIZE_FILE};
use crate::run::RunError;

/// `mcpvm run`: the run its options or `--request` ask for.
pub fn run(args: RunArgs, start: Instant, json: bool) -> Result<u8, RunError> {
    serve(args.into_request()?, start, json)
}

/// The run, step by step.
pub fn serve(mut args: RunRequest, start: Instant, json: bool) -> Result<u8, RunError> {
    // 1. Nothing inherited (but a --listen socket the caller bound for
    // us), and outputs that can be written.
    let mut inherited_listener = crate::run::inbound::adopt(args.vm.listen_fd)?;
    let keep = inherited_listener.as_ref().map(|fd| fd.as_raw_fd());
    if let Err(e) = vmm::host_seccomp::close_inherited_fds_except(keep) {
        log::warn!("cannot close inherited file descriptors: {e}");
    }
    check_writable(args.timings.as_deref())?;
    if let Some(dir) = &args.snapshot_to {
        // Refused now, not after a boot: only a new directory or an older
        // snapshot is written to.
        vmm::snapshot::check_target(dir)?;
    }
    let caught = vmm::signals::catch(args.snapshot_to.is_some()).map_err(vmm::VmmError::Signals)?;

    // 2. How the VM starts, decided once: booted from the plan, restored
    //    from (3.) the warm cache's snapshot of it (taken now if there is
    //    none), or restored from --from-snapshot.
    let mut how = Start::decide(&args)?;

    // 4. The files the run writes, opened while the host's paths can be
    //    named; then the jail (while this process still has one thread).
    let console: Box<dyn Write + Send> = match &args.vm.console {
        Some(path) => Box::new(create(path)?),
        None => Box::new(io::sink()),
    };
    let (console, console_tail) = crate::run::console::Keeping::new(console);
    // Appended to: a server the probe restarts (robustness) runs again
    // with the same argv, and its first life's events must stay.
    let events_file = args.events.as_deref().map(append).transpose()?;
    // (A jailed run could not name the timings file when it ends: it is
    // made now and filled then.)
    let timings_file = args.timings.as_deref().map(create).transpose()?;
    // The egress proxy, outside the jail: the guest's network, when the
    // plan gives it one (docs/network.md).
    let egress = match how.plan().and_then(|p| p.network.as_ref()) {
        Some(policy) => Some(
            crate::egress::process::Egress::spawn(policy, args.vm.seccomp)
                .map_err(RunError::Egress)?,
        ),
        None => None,
    };
    // --listen: bound now, in the host's network namespace (or handed
    // to us bound), with the gate every connection passes.
    let inbound = match args.vm.listen {
        Some(addr) => Some(crate::run::inbound::bind(addr, inherited_listener.take())?),
        None => None,
    };
    let jail = crate::run::jail::enter(
        args.vm.jail,
        crate::run::jail::RunPaths {
            vm: how.paths_mut(),
            snapshot_to: args.snapshot_to.as_mut(),
            workspace: args
                .vm
                .workspace
                .as_mut()
                .map(|w| (&mut w.path, w.writable)),
        },
    )?;

    // 5. The channels, where the guest's connections arrive.
    let dir = RunDir::create().map_err(RunError::RunDir)?;
    let mut channels = HostChannels::open(dir.path(), args.vm.workspace.is_some())?;
    if let Some(egress) = &egress {
        connect_egress(egress, &channels, events_file.as_ref(), start)?;
    }
    let transfer = match (&args.vm.workspace, channels.take_workspace()) {
        (Some(ws), Some(listener)) => Some(crate::workspace::start_transfer(
            listener,
            ws.clone(),
            args.vm.workspace_limit << 20,
            args.vm.seccomp,
        )),
        _ => None,
    };

    // 6. The VM.
    let first = how.first_line();
    let channels_uds = channels.vsock().uds_path;
    let vm = VmHandle::build(how.config(&args, channels.vsock(), Box::new(console), start))?;

    // 7. The relays, then the VM runs until it ends.
    let answer = template::Answer::default();
    let stdio = match args.snapshot_to {
        Some(_) => Stdio::Template(answer.clone()),
        None => Stdio::Relay,
    };
    let mut sink = EventSink::new(start, events_file, Some(vm.control()));
    sink.host(jail);
    let relays = channels.serve(first, stdio, sink, args.vm.seccomp)?;
    if let Some((listener, gate)) = inbound {
        crate::run::inbound::forward_all(listener, channels_uds, gate, args.vm.seccomp);
    }
    let _forwarding = caught.forward_to(&vm)?;
    let outcome = vm.wait()?;
    relays.drain(Instant::now() + RELAY_DRAIN);
    drop(egress);

    // 8. What the run leaves: the workspace back, the snapshot's
    //    `initialize` answer, the timings, the exit status.
    if let Some(t) = transfer {
        say_workspace(t);
    }
    if let Some(dir) = &args.snapshot_to {
        keep_initialize_answer(dir, &outcome.reason, &answer)?;
    }
    if let (Some(path), Some(file)) = (&args.timings, timings_file) {
        write_timings(path, file, &outcome, &relays, start)?;
    }
    Ok(report(&outcome.reason, &console_tail, json))
}

/// Hands the egress proxy the socket the guest's egress connections
/// arrive on, and the events file it records them in.
fn connect_egress(
    egress: &crate::egress::process::Egress,
    channels: &HostChannels,
    events: Option<&File>,
    start: Instant,
) -> Result<(), RunError> {
    let path = channels
        .vsock()
        .port_path(mcpvm_protocol::ports::EGRESS_PORT);
    let listener = std::os::unix::net::UnixListener::bind(&path)
        .map_err(|source| RunError::Listen { path, source })?;
    egress
        .hand_over(listener, events, start.elapsed().as_secs_f64() * 1000.0)
        .map_err(RunError::Egress)
}

/// Says what came of the workspace's copy once the VM ended: the
/// server's status stays the run's, a workspace problem is only said.
fn say_workspace(t: crate::workspace::Transfer) {
    match t.finish() {
        Some(Ok(Some(back))) if back.refused.is_empty() => {
            log::info!("workspace: the guest's copy is back in place ({back})")
        }
        Some(Ok(Some(back))) => {
            eprintln!("mcpvm: workspace: {}", printable_lines(&back.to_string()))
        }
        Some(Ok(None)) | None => {}
        Some(Err(e)) => eprintln!("mcpvm: {}", printable_lines(&crate::error_chain(&e))),
    }
}

/// Says how the VM ended (when it was not the server's own exit) and
/// returns the exit status; a kernel panic with the console's last
/// lines, its only account of why.
fn report(reason: &vmm::ExitReason, console: &crate::run::console::Tail, json: bool) -> u8 {
    log::debug!("{reason} (exit code {})", reason.exit_code());
    if json {
        eprintln!(
            "{}",
            serde_json::json!({"exit": reason.kind(), "code": reason.exit_code()})
        );
    }
    if !matches!(reason, vmm::ExitReason::PowerOff(_)) {
        eprintln!("mcpvm: {reason}");
    }
    if *reason == vmm::ExitReason::Panic {
        let lines = console.lines();
        eprintln!("mcpvm: the console's last {} lines:", lines.len());
        for line in lines {
            eprintln!("mcpvm: console: {line}");
        }
    }
    reason.exit_code().clamp(0, 255) as u8
}

/// A file the run writes after the VM ends must be writable now, not
/// found wanting after the run.
fn check_writable(path: Option<&Path>) -> Result<(), RunError> {
    let Some(path) = path else { return Ok(()) };
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if dir.is_some_and(|d| !d.is_dir()) {
        return Err(RunError::File {
            path: path.to_path_buf(),
            source: io::Error::new(io::ErrorKind::NotFound, "its directory does not exist"),
        });
    }
    Ok(())
}

fn create(path: &Path) -> Result<File, RunError> {
    File::create(path).map_err(|source| RunError::File {
        path: path.to_path_buf(),
        source,
    })
}

fn append(path: &Path) -> Result<File, RunError> {
    File::options()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|source| RunError::File {
            path: path.to_path_buf(),
            source,
        })
}

/// After a snapshot run: the server's answer to the template
/// `initialize`, beside the snapshot, for the person (and cache) using it.
fn keep_initialize_answer(
    dir: &Path,
    reason: &vmm::ExitReason,
    answer: &template::Answer,
) -> Result<(), RunError> {
    if !matches!(reason, vmm::ExitReason::Snapshot(_)) {
        return Err(RunError::NoSnapshot {
            dir: dir.to_path_buf(),
            why: reason.to_string(),
        });
    }
    let said = answer.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(line) = said {
        crate::run::warm::write_private(&dir.join(INITIALIZE_FILE), line.as_bytes())?;
    }
    Ok(())
}

/// The VMM's phases and when each kind of agent event first came, as one
/// JSON object (ms since start).
fn write_timings(
    path: &Path,
    mut file: File,
    outcome: &vmm::RunOutcome,
    relays: &Relays,
    start: Instant,
) -> Result<(), RunError> {
    let timings = mcpvm_protocol::timings::RunTimings {
        phases: super::boot::vm_phases(&outcome.timings),
        exits_to_vmm: outcome.exits.iter().map(|e| e.count).sum(),
        started_monotonic_ms: Some(mcpvm_protocol::timings::monotonic_ms(start)),
        first_event: relays
            .first_seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone(),
    };
    serde_json::to_writer(&mut file, &timings)
        .map_err(std::io::Error::from)
        .map_err(|source| RunError::File {
            path: path.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    #[test]
    fn a_run_survives_the_trip_through_arguments() {
        let cases = [
            RunRequest {
                vm: VmRequest {
                    mem: Some(512),
                    env: vec![("K".into(), None)],
                    ..VmRequest::default()
                },
                timings: Some("t.json".into()),
                events: Some("e.jsonl".into()),
                warm: true,
                snapshots: Some("cache".into()),
                command: vec!["/bin/server".into(), "--flag".into(), "-- x".into()],
                ..RunRequest::default()
            },
            RunRequest {
                snapshot_to: Some("snap".into()),
                command: vec!["/bin/mcp-fixture".into()],
                ..RunRequest::default()
            },
            RunRequest {
                from_snapshot: Some("snap".into()),
                ..RunRequest::default()
            },
        ];
        for req in cases {
            let argv = std::iter::once("mcpvm".to_string()).chain(req.to_args());
            let back = Cli::try_parse_from(argv)
                .unwrap_or_else(|e| panic!("{:?}: {e}", req.to_args()))
                .run
                .into_request()
                .unwrap();
            assert_eq!(back, req);
        }
    }
}
