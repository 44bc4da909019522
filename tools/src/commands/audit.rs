//! `mcpvm audit`: run catalogued servers × withholding profiles and
//! report what breaks (the runner is in `crate::audit`).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use crate::audit::{self, matrix, AuditOptions, DEFAULT_PROFILES};

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AuditArgs {
    #[command(subcommand)]
    command: Option<AuditCommand>,
    #[command(flatten)]
    run: RunAudit,
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Combine the output directories of shards into one report.
    Merge {
        /// Where the merged results and reports go.
        #[arg(long)]
        out: PathBuf,
        /// The shards' --out directories.
        #[arg(required = true)]
        shards: Vec<PathBuf>,
    },
}

#[derive(Args)]
struct RunAudit {
    #[command(flatten)]
    catalogue: mcpvm::server::CatalogueArg,
    /// The image store [default: ~/.cache/mcpvm/images].
    #[arg(long)]
    images: Option<PathBuf>,
    /// Servers to audit, comma-separated [default: every catalogued server
    /// that runs offline without credentials].
    #[arg(long, value_delimiter = ',')]
    servers: Option<Vec<String>>,
    /// Profiles, comma-separated; each may compose with '+'
    /// [default: the ten built-in profiles].
    #[arg(long, value_delimiter = ',')]
    profiles: Option<Vec<String>>,
    /// Profiles file (TOML) adding to the built-in profiles.
    #[arg(long)]
    profiles_file: Option<PathBuf>,
    /// Runs at once [default: CPUs, fewer if memory is short].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    jobs: Option<u64>,
    /// Output directory; an audit already there resumes.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Run only shard I of N (0-based): cells whose index is I mod N.
    #[arg(long, value_parser = matrix::parse_shard)]
    shard: Option<matrix::Shard>,
    /// List the profiles (built-in and --profiles-file) and exit.
    #[arg(long)]
    list_profiles: bool,
    /// Seconds one run's microVM may live.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    run_timeout: u64,
    /// Seconds for the server to start and answer the handshake.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    init_timeout: u64,
    /// Seconds for each later step.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    step_timeout: u64,
    /// Start each cell's VM from the warm-start cache (docs/snapshots.md):
    /// each server × profile is snapshotted after `initialize` on first
    /// use, and a later audit restores it instead of booting.
    #[arg(long)]
    warm: bool,
    /// Runs per cell, in a row: with 5 or more, each cell's first
    /// response has a spread, and a profile that slows a server's start
    /// beyond noise shows as such (docs/audit.md).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
    repeat: u64,
    /// Add a `security` column: every tool of every server attacked
    /// (`mcpvm probe --security`), judged by what the server then did in
    /// its VM; findings in the reports and in findings.sarif.
    #[arg(long)]
    security: bool,
    /// Also send the probe's hostile input (`mcpvm probe --robustness`)
    /// in the first profile's cells: what a `not_fit` compatibility
    /// verdict is judged on (compat.json).
    #[arg(long)]
    robustness: bool,
    /// The warm-start cache [default: ~/.cache/mcpvm/snapshots].
    #[arg(long, value_name = "DIR", requires = "warm")]
    snapshots: Option<PathBuf>,
    /// Exit with status 5 when the audit's findings (every server's)
    /// include one at or above this severity (low, medium, high,
    /// critical): a CI pipeline's gate [default: none].
    #[arg(long, value_name = "SEVERITY")]
    fail_on: Option<probes::judge::gate::Severity>,
    /// Hold every server the pin file names to its pin (`mcpvm pin`):
    /// rug pulls, drift and re-deployments are findings of what it
    /// declares.
    #[arg(long, value_name = "FILE")]
    pinned: Option<PathBuf>,
}

pub fn run(args: AuditArgs, json: bool) -> Result<u8, audit::AuditError> {
    if let Some(AuditCommand::Merge { out, shards }) = args.command {
        return audit::merge(&out, &shards, json);
    }
    let a = args.run;
    if a.list_profiles {
        let profiles = mcpvm::withholding::Profiles::from_option(a.profiles_file.as_deref())?;
        for name in profiles.names() {
            let p = profiles.resolve(&name)?;
            if json {
                println!("{}", serde_json::to_string(&p)?);
            } else {
                println!("{name:<22} {}", p.description);
            }
        }
        return Ok(0);
    }
    let out = a.out.ok_or(audit::AuditError::NoOut)?;
    let fail_on = a.fail_on;
    let out_dir = out.clone();
    let code = audit::run(
        AuditOptions {
            catalogue: a.catalogue,
            images: a.images,
            servers: a.servers,
            profiles: a
                .profiles
                .unwrap_or_else(|| DEFAULT_PROFILES.iter().map(|s| s.to_string()).collect()),
            profiles_file: a.profiles_file,
            jobs: a.jobs.map(|j| j as usize),
            out,
            shard: a.shard.unwrap_or(matrix::Shard::ALL),
            run_timeout: a.run_timeout,
            init_timeout: a.init_timeout,
            step_timeout: a.step_timeout,
            warm: a
                .warm
                .then(|| a.snapshots.unwrap_or_else(mcpvm::run::warm::default_dir)),
            repeat: a.repeat as usize,
            security: a.security,
            robustness: a.robustness,
            pinned: match a.pinned {
                Some(path) => {
                    let keys = crate::pinning::read(&path)?.servers.into_keys().collect();
                    Some((path, keys))
                }
                None => None,
            },
        },
        json,
    )?;
    match fail_on {
        Some(at) => gate(&out_dir, at, code),
        None => Ok(code),
    }
}

/// `--fail-on`: the findings of every cell the audit recorded, against
/// the severity; the audit's own status when none reaches it.
fn gate(out: &Path, at: probes::judge::gate::Severity, code: u8) -> Result<u8, audit::AuditError> {
    let path = out.join("results.jsonl");
    let journal = audit::journal::Journal::open(&path)
        .map_err(|source| audit::AuditError::Journal { path, source })?;
    // What a server declares counts once (each of its cells lists the
    // same), what the attacks found once per cell.
    let mut declared = std::collections::BTreeMap::new();
    for r in journal.records.values().filter(|r| !r.declared.is_empty()) {
        declared.entry(r.server.as_str()).or_insert(&r.declared);
    }
    // Names across servers (shadowed tools, near-miss packages), judged
    // as the reports judge them.
    let across = std::fs::read(out.join("audit.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<audit::meta::Meta>(&b).ok())
        .map(|meta| audit::security::across(&meta, &journal.records))
        .unwrap_or_default();
    let findings = declared
        .values()
        .flat_map(|d| d.iter())
        .chain(across.values().flatten())
        .chain(
            journal
                .records
                .values()
                .filter_map(|r| r.security.as_ref())
                .flat_map(|s| &s.findings),
        );
    match probes::judge::gate::reaching(findings, at) {
        0 => Ok(code),
        n => {
            eprintln!(
                "mcpvm audit: {n} finding(s) at or above {at} (--fail-on {at}): exit {}",
                probes::judge::gate::FINDINGS_EXIT
            );
            Ok(probes::judge::gate::FINDINGS_EXIT)
        }
    }
}
