//! `mcpvm audit`: run catalogued servers × withholding profiles and
//! report what breaks (the runner is in `crate::audit`).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use crate::audit::{self, matrix, AuditOptions, DEFAULT_PROFILES};
use crate::commands::client::{Client as ClientKind, Scope};

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
        /// Make each record's calls again from its cell's whole probe
        /// result, kept in the shard's runs/ (a bench's shard-I/runs.tgz,
        /// unpacked): records written before a change to what a record
        /// keeps of its calls are then judged as a new one would be. A
        /// record whose result is not there keeps its own.
        #[arg(long)]
        calls_from_runs: bool,
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
    /// Run only shard I of N (0-based): the cells of the servers whose
    /// index is I mod N.
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
    /// Add a `proposed` column: each server run again held to the
    /// allow-list profile its logging cell proposes (profiles/<server>-
    /// minimal.toml, over that cell's profile); a tool that worked there
    /// and fails here is a gap in the proposal, named in the reports with
    /// the calls it was denied. Needs a profile that logs system calls
    /// (`baseline`).
    #[arg(long)]
    check_proposals: bool,
    /// Resume a journal (`--out`) whose servers' layers, packages or
    /// versions changed since it was written (a store built again on
    /// another machine): the changed servers' cells are run again, every
    /// other cell is kept. Anything else changed is still refused.
    #[arg(long)]
    rerun_changed: bool,
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
    /// Audit the servers this MCP client's configuration names, side by
    /// side: each published package it launches (`npx -y PKG@VER`, `uvx
    /// PKG==VER`, `mcpvm run --package`) built into a layer and audited
    /// with the security column, the flows across them in the report;
    /// what cannot be mapped is a row with why (setup.json). The file is
    /// only read, nothing it names runs on this host, and no value of
    /// its variables reaches a VM (each gets a marked dummy).
    #[arg(long, value_enum, conflicts_with_all = ["catalogue", "servers", "config"])]
    client: Option<ClientKind>,
    /// With --client: its project file (in this directory) or your user
    /// file [default: project; Claude Desktop has only user].
    #[arg(long = "client-scope", value_enum, requires = "client")]
    client_scope: Option<Scope>,
    /// Audit the servers of this MCP client configuration file (the
    /// `mcpServers` or VS Code's `servers` object), as --client does.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["catalogue", "servers"])]
    config: Option<PathBuf>,
    /// With --client or --config: pass this variable's real value, as
    /// the configuration sets it, to the servers that set it (repeatable;
    /// every other variable gets a marked dummy). Redacted from every
    /// output like a catalogue's credentials; never written to a file.
    #[arg(long = "with-credentials", value_name = "VAR")]
    with_credentials: Vec<String>,
    /// With --client or --config: also write DIR/fixed-config.json, the
    /// configuration with each audited server wrapped in `mcpvm run
    /// --package`, held to the minimal profile the audit proposed for it
    /// where there is one. The configuration itself is never changed.
    #[arg(long)]
    fix: bool,
}

pub fn run(args: AuditArgs, json: bool) -> Result<u8, audit::AuditError> {
    if let Some(AuditCommand::Merge {
        out,
        shards,
        calls_from_runs,
    }) = args.command
    {
        return audit::merge(&out, &shards, calls_from_runs, json);
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
    let (mut catalogue, mut servers, mut security) = (a.catalogue, a.servers, a.security);
    let mut profiles = a.profiles;
    let mut fix = None;
    let setup_only = [
        (a.fix, "--fix"),
        (!a.with_credentials.is_empty(), "--with-credentials"),
    ];
    if let Some((_, flag)) = setup_only
        .iter()
        .find(|(given, _)| *given && a.client.is_none() && a.config.is_none())
    {
        return Err(audit::AuditError::Setup(format!(
            "{flag} goes with a client's configuration: give --client CLIENT or --config FILE"
        )));
    }
    if a.client.is_some() || a.config.is_some() {
        let (path, key) = client_file(a.client, a.client_scope, a.config)?;
        let (generated, built, plan) = setup(
            &path,
            key,
            &a.with_credentials,
            &out,
            a.images.as_deref(),
            json,
        )?;
        fix = a.fix.then_some(plan);
        catalogue = mcpvm::server::CatalogueArg {
            path: Some(generated),
            only: true,
        };
        servers = Some(built);
        // The roles and flows need what each call did: the security
        // column, against a baseline with nothing else withheld.
        security = true;
        profiles = Some(profiles.unwrap_or_else(|| vec!["baseline".into()]));
    }
    let code = audit::run(
        AuditOptions {
            catalogue,
            images: a.images,
            servers,
            profiles: profiles
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
            security,
            robustness: a.robustness,
            check_proposals: a.check_proposals,
            rerun_changed: a.rerun_changed,
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
    if let Some(plan) = fix {
        write_fixed(&out_dir, &plan)?;
    }
    match fail_on {
        Some(at) => gate(&out_dir, at, code),
        None => Ok(code),
    }
}

/// What `--fix` rewrites: the configuration, its servers' key, and each
/// configured package's name there, its catalogue name and its listing.
struct FixPlan {
    config: serde_json::Value,
    key: String,
    packages: Vec<(String, String, mcpvm_images::registry::Listing)>,
}

/// `--fix`: DIR/fixed-config.json, each audited server of the
/// configuration wrapped in `mcpvm run --package`, with its proposed
/// minimal profile where the audit wrote one (DIR/profiles/).
fn write_fixed(out: &Path, plan: &FixPlan) -> Result<(), audit::AuditError> {
    let mcpvm = mcpvm::exe::vm().map_err(audit::AuditError::Tools)?;
    let fixed = fixed_config(out, plan, &mcpvm);
    audit::output::write_json(&out.join("fixed-config.json"), &fixed)
}

/// The configuration `plan` read, its audited servers wrapped.
fn fixed_config(out: &Path, plan: &FixPlan, mcpvm: &Path) -> serde_json::Value {
    let mut fixed = plan.config.clone();
    for (configured, name, l) in &plan.packages {
        let spec = match l.registry.as_str() {
            "npm" => format!("npm:{}@{}", l.package, l.version),
            _ => format!("pypi:{}=={}", l.package, l.version),
        };
        let mut args = vec!["run".to_string()];
        let profile = out.join("profiles").join(format!("{name}-minimal.toml"));
        if profile.is_file() {
            args.extend([
                "--profiles".into(),
                profile.display().to_string(),
                "--profile".into(),
                format!("{name}-minimal"),
            ]);
        }
        args.extend(["--package".into(), spec]);
        if let Ok((_, e)) = mcpvm_images::registry::entry(l) {
            if !e.args.is_empty() {
                args.push("--".into());
                args.extend(e.args);
            }
        }
        let entry = &mut fixed[plan.key.as_str()][configured.as_str()];
        entry["command"] = serde_json::json!(mcpvm.display().to_string());
        entry["args"] = serde_json::json!(args);
    }
    fixed
}

/// The client configuration to audit, and its servers' key.
fn client_file(
    client: Option<ClientKind>,
    scope: Option<Scope>,
    config: Option<PathBuf>,
) -> Result<(PathBuf, Option<&'static str>), audit::AuditError> {
    let Some(client) = client else {
        return Ok((config.expect("--client or --config"), None));
    };
    let scope = scope.unwrap_or(match client {
        ClientKind::ClaudeDesktop => Scope::User,
        _ => Scope::Project,
    });
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let path = client
        .file(scope, home.as_deref())
        .map_err(|e| audit::AuditError::Setup(e.to_string()))?;
    Ok((path, Some(client.servers_key())))
}

/// Reads the configuration at `path`, maps its servers (`crate::setup`),
/// writes what it found to `out` (setup.json, and setup.toml: the
/// catalogue made of the packages) and builds their layers into the
/// store; the catalogue and the servers that built.
fn setup(
    path: &Path,
    key: Option<&str>,
    with_credentials: &[String],
    out: &Path,
    images: Option<&Path>,
    json: bool,
) -> Result<(PathBuf, Vec<String>, FixPlan), audit::AuditError> {
    let fail = |why: String| audit::AuditError::Setup(why);
    let text = crate::commands::client::read_config(path)
        .map_err(|e| fail(mcpvm::error_chain(&e)))?
        .ok_or_else(|| {
            fail(format!(
                "{} does not exist: give the client's file with --config",
                path.display()
            ))
        })?;
    let config: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| fail(format!("{} is not JSON ({e})", path.display())))?;
    let key = key.unwrap_or(if config.get("servers").is_some() {
        "servers"
    } else {
        "mcpServers"
    });
    let configured = crate::setup::read(&config, key);
    if configured.is_empty() {
        return Err(fail(format!(
            "{} names no servers under \"{key}\"",
            path.display()
        )));
    }
    let mut listings: Vec<_> = configured
        .iter()
        .filter_map(|c| match &c.mapped {
            crate::setup::Mapped::Package { listing } => Some(listing.clone()),
            crate::setup::Mapped::NotRun { .. } => None,
        })
        .collect();
    pass_credentials(&config, key, with_credentials, &mut listings)?;
    let all: Vec<usize> = (0..listings.len()).collect();
    let (toml_text, made) = mcpvm_images::registry::catalogue(&listings, &all);
    mcpvm::host::files::own_dir(out).map_err(audit::output::out_err(out))?;
    let toml_path = out.join("setup.toml");
    audit::output::write_atomic(&toml_path, &toml_text)?;
    audit::output::write_json(
        &out.join("setup.json"),
        &serde_json::json!({"config": path, "key": key, "servers": configured, "catalogue": made}),
    )?;
    let names: Vec<String> = made.iter().filter_map(|r| r.name.clone()).collect();
    // The configured packages in order, as the catalogue's rows are.
    let packages = configured
        .iter()
        .filter(|c| matches!(c.mapped, crate::setup::Mapped::Package { .. }))
        .zip(&made)
        .filter_map(|(c, r)| Some((c.name.clone(), r.name.clone()?, r.listing.clone())))
        .collect();
    let plan = FixPlan {
        config: config.clone(),
        key: key.to_string(),
        packages,
    };
    for c in &configured {
        if let crate::setup::Mapped::NotRun { why } = &c.mapped {
            eprintln!(
                "audit: {}: not run: {why}",
                mcpvm::logger::printable(&c.name)
            );
        }
    }
    if names.is_empty() {
        return Err(fail(format!(
            "none of the servers of {} is a published package mcpvm can run (setup.json in {} says why)",
            path.display(),
            out.display()
        )));
    }
    let catalogue = mcpvm_images::catalogue::Catalogue::parse(&toml_text, "setup.toml")?;
    let store = images
        .map(Path::to_path_buf)
        .unwrap_or_else(mcpvm_images::store::default_dir);
    // What the store holds already is used as it is, as `run --package`
    // does: no runtime image to make, and no network, for a
    // configuration of packages built before.
    let missing: Vec<String> = names
        .iter()
        .filter(|n| !stored(&store, &catalogue, n))
        .cloned()
        .collect();
    if missing.is_empty() {
        if !json {
            eprintln!("image: every layer is in {}", store.display());
        }
        return Ok((toml_path, names, plan));
    }
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    let report = mcpvm_images::build::build(
        &catalogue,
        &missing,
        &[],
        &store,
        jobs,
        &crate::install::scripts::MicroVm::default(),
        &mut |msg| {
            if !json {
                eprintln!("image: {}", mcpvm::logger::printable_lines(msg));
            }
        },
    )
    .map_err(|e| fail(mcpvm::error_chain(&e)))?;
    for f in &report.failed {
        eprintln!(
            "audit: {}: its layer did not build: {}",
            f.name,
            mcpvm::logger::printable(&f.error)
        );
    }
    Ok((toml_path, names, plan))
}

/// Whether `store` holds `name`'s layer for its entry in `catalogue`.
fn stored(store: &Path, catalogue: &mcpvm_images::catalogue::Catalogue, name: &str) -> bool {
    let (Ok(index), Ok(entry)) = (mcpvm_images::store::Index::load(store), catalogue.get(name))
    else {
        return false;
    };
    let key = index.key_of(name, entry);
    index.resolve(store, name, &key).is_ok()
}

/// `--with-credentials VAR`: each listing whose entry sets VAR takes it
/// as a credential (its value from this process's environment, where it
/// is put from the configuration: the runs inherit it, the catalogue
/// never holds it). A variable the entries set to different values, or
/// none sets, is refused.
fn pass_credentials(
    config: &serde_json::Value,
    key: &str,
    vars: &[String],
    listings: &mut [mcpvm_images::registry::Listing],
) -> Result<(), audit::AuditError> {
    let fail = |why: String| audit::AuditError::Setup(why);
    for var in vars {
        if !credential_name(var) {
            return Err(fail(format!(
                "--with-credentials {}: not a credential's name (letters, digits and '_'; not one that steers this host's loader, shell or runtimes, such as LD_*, PATH, NODE_OPTIONS or PYTHON*)",
                mcpvm::logger::printable(var)
            )));
        }
        let values: std::collections::BTreeSet<&str> = config[key]
            .as_object()
            .into_iter()
            .flat_map(|servers| servers.values())
            .filter_map(|entry| entry["env"][var.as_str()].as_str())
            .collect();
        let value = match values.len() {
            0 => return Err(fail(format!("--with-credentials {var}: no server of the configuration sets {var}"))),
            1 => values.into_iter().next().expect("one"),
            _ => return Err(fail(format!("--with-credentials {var}: the servers set {var} to different values; audit them apart with --config"))),
        };
        // Before any thread or child: the cells' runs inherit it.
        std::env::set_var(var, value);
        for l in listings.iter_mut().filter(|l| l.required_env.contains(var)) {
            l.credentials.push(var.clone());
        }
    }
    Ok(())
}

/// Whether `var` may carry a configuration's value into this process's
/// environment: a variable's name, and not one that changes what the
/// host's own processes load or run (the value comes from a file the
/// user hands us, which may be hostile).
fn credential_name(var: &str) -> bool {
    const NAMES: &[&str] = &[
        "PATH", "HOME", "SHELL", "IFS", "ENV", "TMPDIR", "USER", "LANG",
    ];
    const PREFIXES: &[&str] = &[
        "LD_",
        "DYLD_",
        "BASH_",
        "MCPVM_",
        "RUST",
        "CARGO_",
        "NODE_",
        "NPM_CONFIG_",
        "PYTHON",
        "PIP_",
        "UV_",
        "PERL",
        "RUBY",
        "GIT_",
        "SSL_",
        "XDG_",
        "LC_",
    ];
    let upper = var.to_ascii_uppercase();
    !var.is_empty()
        && !var.starts_with(|c: char| c.is_ascii_digit())
        && var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !NAMES.contains(&upper.as_str())
        && !PREFIXES.iter().any(|p| upper.starts_with(p))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_never_steers_the_host() {
        for ok in [
            "GITHUB_TOKEN",
            "API_KEY",
            "BRAVE_API_KEY",
            "HOMEASSISTANT_TOKEN",
        ] {
            assert!(credential_name(ok), "{ok}");
        }
        for bad in [
            "LD_PRELOAD",
            "PATH",
            "NODE_OPTIONS",
            "PYTHONPATH",
            "BASH_ENV",
            "MCPVM_KERNEL",
            "A B",
            "",
            "1X",
            "HOME",
        ] {
            assert!(!credential_name(bad), "{bad}");
        }
    }

    #[test]
    fn fix_wraps_each_audited_server_and_leaves_the_rest_as_they_were() {
        let config = serde_json::json!({"mcpServers": {
            "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem@2026.1.14", "/home/u/p"], "env": {"DEBUG": "1"}},
            "mine": {"command": "node", "args": ["/home/u/server.js"]},
        }, "other": 1});
        let configured = crate::setup::read(&config, "mcpServers");
        let crate::setup::Mapped::Package { listing } = &configured[0].mapped else {
            panic!("fs maps")
        };
        let out = tempfile::tempdir().unwrap();
        std::fs::create_dir(out.path().join("profiles")).unwrap();
        std::fs::write(
            out.path().join("profiles/server-filesystem-minimal.toml"),
            "",
        )
        .unwrap();
        let plan = FixPlan {
            config: config.clone(),
            key: "mcpServers".into(),
            packages: vec![("fs".into(), "server-filesystem".into(), listing.clone())],
        };
        let fixed = fixed_config(out.path(), &plan, Path::new("/opt/mcpvm/bin/mcpvm"));
        let fs = &fixed["mcpServers"]["fs"];
        assert_eq!(fs["command"], "/opt/mcpvm/bin/mcpvm");
        let args: Vec<&str> = fs["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(args[0], "run");
        assert!(
            args.windows(2)
                .any(|w| w == ["--profile", "server-filesystem-minimal"]),
            "{args:?}"
        );
        assert!(args.windows(2).any(|w| w
            == [
                "--package",
                "npm:@modelcontextprotocol/server-filesystem@2026.1.14"
            ]));
        assert_eq!(args[args.len() - 2..], ["--", "/home/u/p"]);
        assert_eq!(fs["env"]["DEBUG"], "1", "its own settings stay");
        assert_eq!(fixed["mcpServers"]["mine"], config["mcpServers"]["mine"]);
        assert_eq!(fixed["other"], 1);
    }
}
