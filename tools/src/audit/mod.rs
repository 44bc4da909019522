//! `mcpvm audit`: servers × withholding profiles, each cell a probe of the
//! server in its own microVM, run with bounded parallelism, recorded in an
//! append-only journal, and reported (docs/audit.md).
//!
//! A cell is a child `mcpvm probe --json --server S --profile P` process:
//! a cell that hangs or crashes cannot take the audit with it, and its
//! wall limit is enforced by killing it (the VM has its own `--timeout`
//! too, and powers off when its stdin closes).

pub mod allow;
pub mod calls;
pub mod carry;
pub mod compat;
pub mod coverage;
pub mod document;
pub mod effects;
pub mod flows;
pub mod journal;
pub mod matrix;
pub mod meta;
pub mod network;
pub mod output;
pub mod pages;
pub mod proposals;
pub mod record;
pub mod released;
pub mod render;
pub mod report;
pub mod security;
pub mod seed;
pub mod text;
pub mod verdict;

use std::collections::{BTreeMap, VecDeque};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use mcpvm_images::catalogue::Catalogue;

use crate::request::ProbeRequest;
use carry::Carried;
use journal::Journal;
use matrix::{Cell, Shard};
pub use matrix::{DEFAULT_PROFILES, PROPOSED, SECURITY};
use mcpvm::commands::run::VmRequest;
use mcpvm::withholding::Profiles;
use meta::{Meta, ServerMeta};
pub use output::AuditError;
use output::{out_err, write_atomic, write_json};
use probes::ToolArgs;
use record::{Outcome, Record, Sample};
use verdict::BASELINE;

pub struct AuditOptions {
    pub catalogue: mcpvm::server::CatalogueArg,
    pub images: Option<PathBuf>,
    pub servers: Option<Vec<String>>,
    pub profiles: Vec<String>,
    pub profiles_file: Option<PathBuf>,
    pub jobs: Option<usize>,
    pub out: PathBuf,
    pub shard: Shard,
    /// Seconds one cell's VM may run.
    pub run_timeout: u64,
    pub init_timeout: u64,
    pub step_timeout: u64,
    /// Start cells from this warm-start cache (`mcpvm run --warm`).
    pub warm: Option<PathBuf>,
    /// Runs per cell, in a row: more than one gives each cell's first
    /// response a spread to judge against the baseline's.
    pub repeat: usize,
    /// Add the `security` column.
    pub security: bool,
    /// Send the probe's hostile input in the first profile's cells (what
    /// a `not_fit` verdict is judged on).
    pub robustness: bool,
    /// Add the `proposed` column (`matrix::PROPOSED`).
    pub check_proposals: bool,
    /// Resume a journal whose servers changed, running theirs again.
    pub rerun_changed: bool,
    /// A pin file, and the servers it names: their cells are held to it.
    pub pinned: Option<(PathBuf, std::collections::BTreeSet<String>)>,
}

fn sha256_16(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    match std::fs::File::open(path) {
        Ok(mut f) => {
            let _ = std::io::copy(&mut f, &mut h);
            h.finalize()
                .iter()
                .take(8)
                .map(|b| format!("{b:02x}"))
                .collect()
        }
        Err(_) => "missing".into(),
    }
}

/// How many cells at once: one per CPU, and no more VMs than the
/// available memory holds (each needs its guest memory plus about
/// 256 MiB for the VMM, the probe and the page cache it touches).
pub fn default_jobs(guest_mib: u64) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let avail_mib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(4096, |kib| kib / 1024);
    let by_mem = (avail_mib.saturating_sub(512) / (guest_mib + 256)) as usize;
    cpus.min(by_mem).max(1)
}

/// Everything an audit is about, checked before any VM starts.
fn prepare(o: &AuditOptions) -> Result<(Meta, Catalogue), AuditError> {
    let catalogue = Catalogue::choose(o.catalogue.path.as_deref(), o.catalogue.only)?;
    let names: Vec<String> = match &o.servers {
        Some(list) => list.clone(),
        None => catalogue
            .servers
            .iter()
            .filter(|(_, e)| e.network.is_empty() && e.credentials.is_empty())
            .map(|(n, _)| n.clone())
            .collect(),
    };
    if names.is_empty() {
        return Err(AuditError::NoServers);
    }
    let (columns, definitions) = columns(o)?;
    let (servers, runtime_image) = server_metas(o, &catalogue, &names)?;
    let kernel = mcpvm::exe::default_artifact(
        "kernel",
        std::env::var_os("MCPVM_KERNEL").map(PathBuf::from),
        "kernel/vmlinux",
    )?;
    let origins = catalogue
        .origins
        .iter()
        .filter(|(name, _)| servers.contains_key(*name))
        .map(|(n, o)| (n.clone(), o.clone()))
        .collect();
    let meta = Meta {
        schema: 1,
        mcpvm_version: env!("CARGO_PKG_VERSION").into(),
        kernel_sha256: sha256_16(&kernel),
        kernel: kernel.display().to_string(),
        runtime_image,
        catalogue: catalogue.source.clone(),
        servers,
        profiles: columns,
        profile_definitions: definitions,
        shard: o.shard,
        started_at: record::now(),
        warm: o.warm.is_some(),
        order: matrix::ORDER.into(),
        repeat: o.repeat.max(1),
        origins,
        gaps: Vec::new(),
    };
    Ok((meta, catalogue))
}

/// The audit's columns (its profiles, then the security column) and
/// what each runs under.
type Columns = (Vec<String>, BTreeMap<String, serde_json::Value>);

fn columns(o: &AuditOptions) -> Result<Columns, AuditError> {
    let profiles = Profiles::from_option(o.profiles_file.as_deref())?;
    let mut definitions = BTreeMap::new();
    let mut columns = o.profiles.clone();
    for p in &o.profiles {
        if p == SECURITY {
            return Err(AuditError::SecurityIsAColumn);
        }
        if p == PROPOSED {
            return Err(AuditError::ProposedIsAColumn);
        }
        definitions.insert(p.clone(), serde_json::to_value(profiles.resolve(p)?)?);
    }
    if o.check_proposals {
        let over = proposer(&o.profiles, &profiles)?;
        let mut proposed = definitions[&over].clone();
        proposed["description"] = format!(
            "each server held to the allow-list its {over} cell proposed (profiles/<server>-minimal.toml), over {over}: a tool that worked there and fails here is a gap in the proposal"
        )
        .into();
        definitions.insert(PROPOSED.to_string(), proposed);
        columns.push(PROPOSED.to_string());
    }
    if o.security {
        let mut observe = serde_json::to_value(profiles.resolve("observe")?)?;
        observe["description"] = "every tool attacked (mcpvm probe --security) under the observe profile; findings judged by what the server did".into();
        definitions.insert(SECURITY.to_string(), observe);
        columns.push(SECURITY.to_string());
    }
    Ok((columns, definitions))
}

/// The first of `profiles` that logs every system call: its cells
/// propose each server's allow-list.
fn proposer(names: &[String], profiles: &Profiles) -> Result<String, AuditError> {
    for p in names {
        let logs = profiles.resolve(p)?.policy.seccomp.is_some_and(|s| s.log);
        if logs {
            return Ok(p.clone());
        }
    }
    Err(AuditError::NothingProposes(names.join(", ")))
}

/// What the audit records of each server named: its layer, lock and
/// install where it built, why not where it did not; and the runtime
/// image the layers run on.
fn server_metas(
    o: &AuditOptions,
    catalogue: &Catalogue,
    names: &[String],
) -> Result<(BTreeMap<String, ServerMeta>, String), AuditError> {
    let mut servers = BTreeMap::new();
    let mut runtime_image = String::new();
    let index = o
        .images
        .clone()
        .unwrap_or_else(mcpvm_images::store::default_dir);
    let index = mcpvm_images::store::Index::load(&index).unwrap_or_default();
    let file = |p: &Path| {
        p.file_name()
            .map(|f| f.to_string_lossy().to_string())
            .unwrap_or_default()
    };
    for name in names {
        let entry = catalogue.get(name)?;
        // A server whose layer could not be built is a row with why (its
        // build's own error where the store kept it), not a stop.
        let plan = match mcpvm::server::plan(name, &o.catalogue, &o.images) {
            Ok(plan) => plan,
            Err(
                e @ mcpvm::server::ServerError::Store(
                    mcpvm_images::store::StoreError::Missing { .. }
                    | mcpvm_images::store::StoreError::Stale { .. },
                ),
            ) => {
                let why = index
                    .failed
                    .get(name.as_str())
                    .map(|f| f.error.clone())
                    .unwrap_or_else(|| mcpvm::error_chain(&e));
                servers.insert(
                    name.clone(),
                    ServerMeta {
                        install_error: Some(why),
                        ..ServerMeta::of(entry)
                    },
                );
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        runtime_image = file(&plan.runtime);
        servers.insert(
            name.clone(),
            ServerMeta {
                layer: file(&plan.layer),
                lock: index
                    .servers
                    .get(name.as_str())
                    .and_then(|r| r.lock.clone()),
                install: index
                    .servers
                    .get(name.as_str())
                    .and_then(|r| r.install.clone()),
                roots: match o.security {
                    true => entry.roots(name, mcpvm_protocol::ports::WORKSPACE_DIR),
                    false => Vec::new(),
                },
                ..ServerMeta::of(entry)
            },
        );
    }
    Ok((servers, runtime_image))
}

/// Runs the audit; returns the process exit code (0: every cell ran).
pub fn run(o: AuditOptions, json: bool) -> Result<u8, AuditError> {
    // 1. What the audit is, and a host that can run it.
    let (meta, catalogue) = prepare(&o)?;
    // Every cell would fail to boot: say so once, before anything is
    // written, instead of recording each one as broken.
    match vmm::kvm::open(false) {
        Ok(_) => {}
        Err(vmm::kvm::HostError::Pvm) => return Err(AuditError::Pvm),
        Err(e) => return Err(AuditError::Host(e)),
    }
    // 2. A new audit, or the same one resumed.
    std::fs::create_dir_all(o.out.join("runs")).map_err(out_err(&o.out))?;
    let meta = start_or_resume(&o.out, meta, o.rerun_changed)?;
    let mut journal = Journal::open(&o.out.join("results.jsonl")).map_err(out_err(&o.out))?;
    let servers: Vec<String> = meta.servers.keys().cloned().collect();
    // Servers that did not install have no cells: their row says why.
    let installed = meta.installed();
    for (s, m) in meta
        .servers
        .iter()
        .filter(|(_, m)| m.install_error.is_some())
    {
        eprintln!(
            "audit: {s}: not run, its layer did not build: {}",
            mcpvm::logger::printable(m.install_error.as_deref().unwrap_or_default())
        );
    }
    let all = matrix::cells(&installed, &meta.profiles, o.shard);
    let todo: VecDeque<Cell> = all
        .iter()
        .filter(|c| !journal.has(&c.server, &c.profile))
        .cloned()
        .collect();
    let guest_mib = meta
        .profile_definitions
        .values()
        .filter_map(|d| d["mem_mib"].as_u64())
        .max()
        .unwrap_or(512);
    let jobs = o.jobs.unwrap_or_else(|| default_jobs(guest_mib)).max(1);
    eprintln!(
        "audit: {} servers × {} profiles{}: {} runs, {} already recorded, {} to go, {} at a time",
        servers.len(),
        meta.profiles.len(),
        if o.shard.count > 1 {
            format!(" (shard {}/{})", o.shard.index, o.shard.count)
        } else {
            String::new()
        },
        all.len(),
        all.len() - todo.len(),
        todo.len(),
        jobs
    );

    // 3. The cells, `jobs` at a time, each recorded as it ends.
    let ctx = CellContext {
        exe: mcpvm::exe::tools().map_err(AuditError::Tools)?,
        out: o.out.clone(),
        catalogue: o.catalogue.clone(),
        images: o.images.clone(),
        profiles_file: o.profiles_file.clone(),
        calls: write_calls_files(&o.out, &servers, &catalogue)?,
        run_timeout: o.run_timeout,
        init_timeout: o.init_timeout,
        step_timeout: o.step_timeout,
        warm: o.warm.clone(),
        repeat: meta.repeat,
        robustness: o.robustness.then(|| {
            meta.profiles
                .iter()
                .find(|p| *p != SECURITY)
                .cloned()
                .unwrap_or_default()
        }),
        workspace: match o.warm {
            Some(_) => None,
            None => Some(seed::write(&o.out).map_err(out_err(&o.out))?),
        },
        pinned: o.pinned.clone(),
        proposed_over: match o.check_proposals {
            true => Some(proposer(
                &o.profiles,
                &Profiles::from_option(o.profiles_file.as_deref())?,
            )?),
            false => None,
        },
    };
    let ctx = Arc::new(ctx);
    run_cells(todo, ctx.clone(), jobs, &mut journal)?;
    // 3b. A server that died at start on today's dependencies, once more
    // as released (released.rs).
    as_released(&o, &ctx, &catalogue, &meta, &mut journal)?;

    // 4. The reports.
    write_reports(&o.out, &meta, &journal.records)?;
    say_done(&o.out, &journal, json);
    let errors = journal
        .records
        .values()
        .any(|r| r.outcome == Outcome::Error);
    Ok(if errors { 3 } else { 0 })
}

/// The audit's `audit.json`: written for a new audit; for an existing
/// one, its inputs must be these (or the results would not be one
/// audit's), but for servers whose entries changed when `rerun_changed`
/// says to run theirs again.
fn start_or_resume(out: &Path, meta: Meta, rerun_changed: bool) -> Result<Meta, AuditError> {
    let meta_path = out.join("audit.json");
    let Ok(bytes) = std::fs::read(&meta_path) else {
        write_atomic(&meta_path, &serde_json::to_string_pretty(&meta)?)?;
        return Ok(meta);
    };
    let before: Meta = serde_json::from_slice(&bytes).map_err(|e| AuditError::Changed {
        path: out.to_path_buf(),
        what: format!("audit.json is unreadable: {e}"),
    })?;
    if !before.servers.keys().eq(meta.servers.keys()) {
        return Err(AuditError::OtherServers {
            path: out.to_path_buf(),
            what: other_servers(&before, &meta),
        });
    }
    let mut what = before.same_inputs(&meta);
    if before.shard != meta.shard {
        what.push("shard");
    }
    let only_servers = what == [meta::SERVERS_CHANGED];
    if rerun_changed && only_servers {
        return rerun_changed_servers(out, before, meta);
    }
    if !what.is_empty() {
        return Err(AuditError::Changed {
            path: out.to_path_buf(),
            what: what.join(", "),
        });
    }
    Ok(before)
}

/// Which servers one audit has and the other has not, a few of each
/// named: a journal resumes only with its own servers (its cells were
/// split and ordered over them).
fn other_servers(journal: &Meta, given: &Meta) -> String {
    let names = |a: &Meta, b: &Meta| -> Vec<String> {
        a.servers
            .keys()
            .filter(|s| !b.servers.contains_key(*s))
            .cloned()
            .collect()
    };
    let list = |v: Vec<String>| {
        let more = v.len().saturating_sub(5);
        let mut text = v.into_iter().take(5).collect::<Vec<_>>().join(", ");
        if more > 0 {
            text.push_str(&format!(" and {more} more"));
        }
        text
    };
    let mut parts = Vec::new();
    let (added, gone) = (names(given, journal), names(journal, given));
    if !added.is_empty() {
        parts.push(format!("given, not in its journal: {}", list(added)));
    }
    if !gone.is_empty() {
        parts.push(format!("in its journal, not given: {}", list(gone)));
    }
    parts.join("; ")
}

/// Resumes `before`'s journal with `now`'s servers: the cells of those
/// whose entry changed (and of their runs as released) leave the journal
/// and run again; the rest stay. Both files are replaced whole.
fn rerun_changed_servers(out: &Path, before: Meta, now: Meta) -> Result<Meta, AuditError> {
    let changed: Vec<String> = now
        .servers
        .iter()
        .filter(|(s, m)| before.servers.get(*s) != Some(m))
        .map(|(s, _)| s.clone())
        .collect();
    let gone = |server: &str| {
        changed
            .iter()
            .any(|c| server == c || server == released::derived(c))
    };
    let journal = out.join("results.jsonl");
    let text = match std::fs::read_to_string(&journal) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(out_err(&journal)(e)),
    };
    let (mut kept, mut dropped) = (String::new(), 0);
    for line in text.split_inclusive('\n') {
        let server = serde_json::from_str::<serde_json::Value>(line)
            .ok()
            .and_then(|v| v["server"].as_str().map(String::from));
        match server {
            Some(s) if gone(&s) => dropped += 1,
            _ => kept.push_str(line),
        }
    }
    let meta = Meta {
        servers: now.servers,
        ..before
    };
    write_atomic(&journal, &kept)?;
    write_atomic(
        &out.join("audit.json"),
        &serde_json::to_string_pretty(&meta)?,
    )?;
    eprintln!(
        "audit: resuming {}: {} changed since its journal ({}); their {dropped} recorded cells run again",
        out.display(),
        match changed.len() {
            1 => "1 server".to_string(),
            n => format!("{n} servers"),
        },
        mcpvm::logger::printable(&changed.join(", ")),
    );
    Ok(meta)
}

/// Per-server calls files, for servers whose catalogue entry names its
/// calls.
fn write_calls_files(
    out: &Path,
    servers: &[String],
    catalogue: &Catalogue,
) -> Result<BTreeMap<String, PathBuf>, AuditError> {
    let calls_dir = out.join("calls");
    let mut calls = BTreeMap::new();
    for s in servers {
        let entry = catalogue.get(s)?;
        if !entry.audit_calls.is_empty() {
            std::fs::create_dir_all(&calls_dir).map_err(out_err(&calls_dir))?;
            let path = calls_dir.join(format!("{s}.json"));
            write_atomic(&path, &serde_json::to_string_pretty(&entry.audit_calls)?)?;
            calls.insert(s.clone(), path);
        }
    }
    Ok(calls)
}

/// Runs `todo` on `jobs` workers, appending each record to the journal
/// as it comes, with progress and an ETA. A server's cells run in order
/// on one worker, each given what the ones before it showed (carry.rs).
fn run_cells(
    todo: VecDeque<Cell>,
    ctx: Arc<CellContext>,
    jobs: usize,
    journal: &mut Journal,
) -> Result<(), AuditError> {
    let total = todo.len();
    let mut servers: VecDeque<(Carried, Vec<Cell>)> = VecDeque::new();
    for c in todo {
        match servers.back_mut() {
            Some((_, cells)) if cells[0].server == c.server => cells.push(c),
            _ => {
                let before = journal
                    .records
                    .iter()
                    .filter(|((s, _), _)| *s == c.server)
                    .map(|(_, r)| r);
                servers.push_back((Carried::from_records(before), vec![c]));
            }
        }
    }
    let workers_wanted = jobs.min(servers.len().max(1));
    let queue = Arc::new(Mutex::new(servers));
    let (tx, rx) = mpsc::channel::<Record>();
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..workers_wanted {
        let (queue, tx, ctx) = (queue.clone(), tx.clone(), ctx.clone());
        workers.push(std::thread::spawn(move || loop {
            let Some((mut carried, cells)) = queue.lock().ok().and_then(|mut q| q.pop_front())
            else {
                return;
            };
            for cell in cells {
                let r = ctx.run(&cell, &carried);
                carried.learn(&r);
                if tx.send(r).is_err() {
                    return;
                }
            }
        }));
    }
    drop(tx);
    let mut done = 0;
    for r in rx {
        done += 1;
        let elapsed = started.elapsed().as_secs_f64();
        let eta = elapsed / done as f64 * (total - done) as f64;
        eprintln!(
            "audit: {} {done}/{total} {} × {}: {}{} in {:.1} s; ETA {}",
            bar(done, total, 20),
            r.server,
            r.profile,
            r.outcome.name(),
            r.failed_step
                .as_deref()
                .map(|s| format!(" ({})", mcpvm::logger::printable(s)))
                .unwrap_or_default(),
            r.timings.wall_ms / 1000.0,
            human(eta)
        );
        journal.append(r).map_err(out_err(journal.path()))?;
    }
    for w in workers {
        let _ = w.join();
    }
    Ok(())
}

/// Runs again, as released, each server whose first-profile cell died at
/// start on its dependencies; its layer built first, its record filed
/// under the server with the profile `as-released`.
fn as_released(
    o: &AuditOptions,
    ctx: &CellContext,
    catalogue: &Catalogue,
    meta: &Meta,
    journal: &mut Journal,
) -> Result<(), AuditError> {
    let Some(first) = meta.profiles.iter().find(|p| *p != SECURITY) else {
        return Ok(());
    };
    let servers = released::candidates(&journal.records, catalogue, first);
    if servers.is_empty() {
        return Ok(());
    }
    eprintln!(
        "audit: {} died at start on today's dependencies: building and running {} as released",
        servers.join(", "),
        if servers.len() == 1 { "it" } else { "them" }
    );
    let file = o.out.join("as-released.toml");
    write_atomic(
        &file,
        &released::catalogue_text(catalogue, &servers).map_err(AuditError::Released)?,
    )?;
    let failed = released::build(&ctx.exe, &file, &servers, &o.images);
    // The store's index says the day each tree was frozen at.
    let store = o
        .images
        .clone()
        .unwrap_or_else(mcpvm_images::store::default_dir);
    let index = mcpvm_images::store::Index::load(&store).unwrap_or_default();
    let cx = CellContext {
        catalogue: mcpvm::server::CatalogueArg {
            path: Some(file),
            only: true,
        },
        robustness: None,
        ..ctx.clone()
    };
    let mut records = Vec::new();
    for s in &servers {
        let r = match failed.get(s) {
            Some(why) => Record::failed(
                s,
                released::PROFILE,
                Outcome::Error,
                format!("as released: its layer did not build: {why}"),
                0.0,
            ),
            None => {
                let day = index
                    .servers
                    .get(&released::derived(s))
                    .and_then(|l| l.released_on.as_deref());
                released::refile(
                    cx.run(&released::cell(s, first), &Carried::released_on(day)),
                    s,
                )
            }
        };
        let said = match (failed.get(s), &r.lifecycle) {
            (Some(why), _) => format!(
                " (its layer did not build: {})",
                mcpvm::logger::printable(why)
            ),
            (None, Some(_)) => " (it starts)".to_string(),
            (None, None) => " (it does not start either)".to_string(),
        };
        eprintln!("audit: {s} as released: {}{said}", r.outcome.name());
        records.push(r);
    }
    released::append(journal, records).map_err(out_err(journal.path()))?;
    Ok(())
}

fn say_done(out: &Path, journal: &Journal, json: bool) {
    let counts = count(&journal.records);
    if json {
        println!(
            "{}",
            serde_json::json!({"out": out, "runs": journal.records.len(), "outcomes": counts})
        );
    } else {
        eprintln!(
            "audit: {} runs recorded ({}); reports in {}",
            journal.records.len(),
            counts
                .iter()
                .map(|(k, v)| format!("{v} {k}"))
                .collect::<Vec<_>>()
                .join(", "),
            out.display()
        );
    }
}

fn count(records: &BTreeMap<(String, String), Record>) -> BTreeMap<&'static str, usize> {
    let mut c = BTreeMap::new();
    for r in records.values() {
        *c.entry(r.outcome.name()).or_default() += 1;
    }
    c
}

/// `[#####-----]`: a line-per-run progress bar that reads well in a log
/// as in a terminal.
fn bar(done: usize, total: usize, width: usize) -> String {
    let filled = (done * width).checked_div(total).unwrap_or(width);
    format!("[{}{}]", "#".repeat(filled), "-".repeat(width - filled))
}

fn human(secs: f64) -> String {
    if secs < 90.0 {
        format!("{secs:.0} s")
    } else {
        format!("{:.0} min", secs / 60.0)
    }
}

/// report.md, report.html and the proposed allow-list profiles.
pub fn write_reports(
    out: &Path,
    meta: &Meta,
    records: &BTreeMap<(String, String), Record>,
) -> Result<(), AuditError> {
    let compat = compat::all(meta, records);
    write_json(&out.join("compat.json"), &compat)?;
    if pages::paged(meta) {
        pages::write(out, meta, records, &compat)?;
    } else {
        write_atomic(&out.join("report.md"), &report::markdown(meta, records))?;
        write_atomic(&out.join("report.html"), &report::html(meta, records))?;
    }
    if let Some(text) = coverage::learnt_toml(meta, records) {
        write_atomic(&out.join("learnt-calls.toml"), &text)?;
    }
    // With --security, or when a listing was flagged (those need no
    // attack).
    if meta.profiles.iter().any(|p| p == SECURITY)
        || records.values().any(|r| !r.declared.is_empty())
        || !security::across(meta, records).is_empty()
    {
        let path = out.join("findings.sarif");
        mcpvm::host::files::write_whole_with(&path, |w| security::write_sarif(w, meta, records))
            .map_err(out_err(&path))?;
    }
    if meta.profiles.iter().any(|p| p == PROPOSED) {
        write_json(&out.join("proposals.json"), &proposals::all(meta, records))?;
    }
    let effects = effects::all(meta, records);
    if !effects.is_empty() {
        write_json(&out.join("effects.json"), &effects)?;
    }
    let dir = out.join("profiles");
    for s in meta.servers.keys() {
        if let Some(text) = report::proposal(meta, records, s) {
            // Under --out only: a link planted at `profiles` is refused,
            // and `s` is a checked server name, never a path.
            mcpvm::host::files::own_dir(&dir).map_err(out_err(&dir))?;
            write_atomic(&dir.join(format!("{s}-minimal.toml")), &text)?;
        }
    }
    Ok(())
}

/// Largest `audit.json` a merge reads (one of `MAX_SERVERS` servers
/// takes a few hundred bytes).
const MAX_META_BYTES: u64 = 256 << 20;

/// A shard given to a merge: its split, its directory, the cells its
/// journal holds.
type Given = (Shard, PathBuf, Vec<(String, String)>);

/// `mcpvm audit merge`: shards of one audit into one report.
pub fn merge(
    out: &Path,
    shards: &[PathBuf],
    calls_from_runs: bool,
    json: bool,
) -> Result<u8, AuditError> {
    let mut meta: Option<(Meta, PathBuf)> = None;
    let mut records = BTreeMap::new();
    let mut remade = 0;
    // Each shard given: its split, and the cells its journal holds.
    let mut given: Vec<Given> = Vec::new();
    for dir in shards {
        // Shards come from other machines: their files are read only,
        // bounded, and everything in them checked before it is used.
        let meta_path = dir.join("audit.json");
        let bytes = match mcpvm::host::files::read_regular(&meta_path, MAX_META_BYTES) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(AuditError::NotAudit { path: dir.clone() })
            }
            r => r.map_err(|source| AuditError::BadShard {
                path: meta_path.clone(),
                why: source.to_string(),
            })?,
        };
        let m: Meta = serde_json::from_slice(&bytes)
            .map_err(|_| AuditError::NotAudit { path: dir.clone() })?;
        m.check().map_err(|why| AuditError::BadShard {
            path: meta_path.clone(),
            why,
        })?;
        let split = m.shard;
        if let Some((first, first_dir)) = &meta {
            let diff = first.same_inputs(&m);
            if !diff.is_empty() {
                return Err(AuditError::ShardsDiffer {
                    what: diff.join(", "),
                    a: first_dir.clone(),
                    b: dir.clone(),
                });
            }
        } else {
            meta = Some((m, dir.clone()));
        }
        let first = &meta.as_ref().expect("set above").0;
        let journal = Journal::read(&dir.join("results.jsonl"), |r| {
            let column = first.profiles.contains(&r.profile) || r.profile == released::PROFILE;
            match first.servers.contains_key(&r.server) && column {
                true => Ok(()),
                false => Err("a record of a cell this audit does not have".into()),
            }
        })
        .map_err(|source| AuditError::BadShard {
            path: dir.join("results.jsonl"),
            why: source.to_string(),
        })?;
        let mut journal = journal;
        if calls_from_runs {
            remade += remake_calls(dir, &mut journal);
        }
        given.push((split, dir.clone(), journal.keys().cloned().collect()));
        records.extend(journal);
    }
    let Some((mut meta, _)) = meta else {
        return Err(AuditError::NoShards);
    };
    meta.shard = Shard::ALL;
    meta.gaps = gaps(&meta, &given)?;
    std::fs::create_dir_all(out).map_err(out_err(out))?;
    let results = out.join("results.jsonl");
    mcpvm::host::files::write_whole_with(&results, |w| {
        for r in records.values() {
            serde_json::to_writer(&mut *w, r).map_err(std::io::Error::other)?;
            w.write_all(b"\n")?;
        }
        Ok(())
    })
    .map_err(out_err(&results))?;
    write_atomic(
        &out.join("audit.json"),
        &serde_json::to_string_pretty(&meta)?,
    )?;
    write_reports(out, &meta, &records)?;
    let total = meta.servers.len() * meta.profiles.len();
    if json {
        println!(
            "{}",
            serde_json::json!({"out": out, "runs": records.len(), "of": total, "gaps": meta.gaps})
        );
    } else {
        for g in &meta.gaps {
            eprintln!("audit merge: {g}");
        }
        if calls_from_runs {
            eprintln!(
                "audit merge: the calls of {remade} of {} records made again from their cells' whole results",
                records.len()
            );
        }
        eprintln!(
            "audit merge: {} of {total} runs from {} shards; reports in {}",
            records.len(),
            shards.len(),
            out.display()
        );
    }
    // Incomplete, as an audit some of whose cells could not run.
    Ok(if meta.gaps.is_empty() { 0 } else { 3 })
}

/// Bytes of one cell's whole probe result read back (the largest of the
/// corpus's is about 30 MB: a listing of hundreds of tools, exchanged
/// whole).
const MAX_RESULT_BYTES: u64 = 256 << 20;

/// `audit merge --calls-from-runs`: each record of `dir`'s journal whose
/// cell's whole result is in `dir/runs/<server>/<profile>.json` gets its
/// calls made again from it. How many did. The names were checked with
/// the shard's audit.json (a server name, a profile spec: no path in
/// them); a result that cannot be read or parsed leaves its record as it
/// was.
fn remake_calls(dir: &Path, journal: &mut BTreeMap<(String, String), Record>) -> usize {
    let mut n = 0;
    for ((server, profile), r) in journal.iter_mut() {
        let path = dir
            .join("runs")
            .join(server)
            .join(format!("{profile}.json"));
        let Ok(bytes) = mcpvm::host::files::read_regular(&path, MAX_RESULT_BYTES) else {
            continue;
        };
        let Ok(probe) = serde_json::from_slice::<probes::report::result::ProbeResult>(&bytes)
        else {
            continue;
        };
        r.calls = record::Call::of_probe(&probe);
        n += 1;
    }
    n
}

/// What the shards given do not cover: a shard of the split not given
/// (its task never ran or was lost), or one whose journal lacks cells it
/// should have run (killed part-way). Each said with what completes it.
/// Shards of different splits cannot be one audit.
fn gaps(meta: &Meta, given: &[Given]) -> Result<Vec<String>, AuditError> {
    let Some((first, first_dir, _)) = given.first() else {
        return Ok(Vec::new());
    };
    let n = first.count;
    if let Some((other, dir, _)) = given.iter().find(|(s, _, _)| s.count != n) {
        return Err(AuditError::ShardsDiffer {
            what: format!("splits ({} and {} shards)", n, other.count),
            a: first_dir.clone(),
            b: dir.clone(),
        });
    }
    // Every cell once, dealt to the shards as the audit's order dealt
    // them. A split is checked first: a hostile audit.json's count must
    // not set how much is allocated and listed (a split into more shards
    // than cells is allowed, as --shard allows it, up to 1024).
    let installed = meta.installed();
    let all = matrix::cells(&installed, &meta.profiles, Shard::ALL);
    for (s, dir, _) in given {
        if s.count == 0 || s.index >= s.count || s.count > all.len().max(1024) {
            return Err(AuditError::NotASplit {
                path: dir.join("audit.json"),
                index: s.index,
                count: s.count,
                cells: all.len(),
            });
        }
    }
    let dealt = (0..n).map(|index| {
        matrix::dealt(
            &meta.order,
            &installed,
            &meta.profiles,
            Shard { index, count: n },
        )
    });
    let mut gaps = Vec::new();
    for (index, want) in dealt.into_iter().enumerate() {
        let have: std::collections::HashSet<&(String, String)> = given
            .iter()
            .filter(|(s, _, _)| s.index == index)
            .flat_map(|(_, _, cells)| cells)
            .collect();
        if want.is_empty() {
            continue;
        }
        if !given.iter().any(|(s, _, _)| s.index == index) {
            gaps.push(format!(
                "shard {index}/{n} is missing: its {} cells are not in this report; run `mcpvm audit --shard {index}/{n}` with the same inputs and merge again",
                want.len()
            ));
            continue;
        }
        let lacking = want
            .iter()
            .filter(|c| !have.contains(&(c.server.clone(), c.profile.clone())))
            .count();
        if lacking > 0 {
            let what = match n {
                1 => "the audit".to_string(),
                _ => format!("shard {index}/{n}"),
            };
            gaps.push(format!(
                "{what} is partial: {} of its {} cells ran; run it again with the same --out (it resumes from its journal) and merge again",
                want.len() - lacking,
                want.len()
            ));
        }
    }
    Ok(gaps)
}

trait PdeathSig {
    /// The child gets SIGTERM if this thread ends first (the audit was
    /// killed), and passes it on to its VM the same way.
    fn pre_exec_pdeathsig(&mut self) -> &mut Self;
}

impl PdeathSig for Command {
    fn pre_exec_pdeathsig(&mut self) -> &mut Self {
        // SAFETY: the hook makes only async-signal-safe calls.
        unsafe { self.pre_exec(probes::transport::wire::die_with_parent(std::process::id())) }
    }
}

/// What a worker needs to run a cell.
#[derive(Clone)]
struct CellContext {
    /// `mcpvm-tools`, whose `probe` runs each cell.
    exe: PathBuf,
    out: PathBuf,
    catalogue: mcpvm::server::CatalogueArg,
    images: Option<PathBuf>,
    profiles_file: Option<PathBuf>,
    calls: BTreeMap<String, PathBuf>,
    run_timeout: u64,
    init_timeout: u64,
    step_timeout: u64,
    warm: Option<PathBuf>,
    repeat: usize,
    /// The profile whose cells also get the robustness probes.
    robustness: Option<String>,
    /// The seeded workspace every cell gets (none for warm starts: a
    /// snapshot holds no workspace).
    workspace: Option<PathBuf>,
    /// `--pinned`: the pin file and the servers it names.
    pinned: Option<(PathBuf, std::collections::BTreeSet<String>)>,
    /// `--check-proposals`: the profile whose cells propose, which the
    /// proposed cells run over.
    proposed_over: Option<String>,
}

impl CellContext {
    /// What one cell asks of its probe.
    fn probe_request(&self, c: &Cell, carried: &Carried) -> ProbeRequest {
        let calls = self.calls.get(&c.server).cloned();
        // The security column attacks under `observe` (named here: a
        // profiles file needs a profile), and always boots: its canaries
        // and recording start with the server.
        let security = c.profile == SECURITY;
        // Judged against the baseline: only what worked there can be
        // taken away, by the calls that worked there, made once each.
        // The security column attacks every tool, and an audit with no
        // baseline cell (the corpus's: deny-net first) judges nothing
        // against one: its cells search for arguments as a baseline does.
        let judged = c.profile != BASELINE && !security && carried.worked.is_some();
        ProbeRequest {
            call: match judged {
                true => carried
                    .replay
                    .iter()
                    .map(|(tool, args)| (tool.clone(), ToolArgs::Given(args.clone())))
                    .collect(),
                false => Vec::new(),
            },
            no_retries: judged,
            security,
            robustness: self.robustness.as_deref() == Some(c.profile.as_str()),
            only_given: calls.is_some(),
            // Its calls are evidence, made in a VM that is thrown away.
            vary_given: true,
            calls,
            pinned: self
                .pinned
                .as_ref()
                .filter(|(_, servers)| servers.contains(&c.server))
                .map(|(path, _)| path.clone()),
            lifecycle: carried.lifecycle(),
            only_tools: carried.worked.clone().filter(|_| judged),
            init_timeout: self.init_timeout,
            step_timeout: self.step_timeout,
            // Python servers under emulation take seconds to exit; a
            // killed VM leaves no timings.
            exit_grace: 20,
            warm: self.warm.is_some() && !security,
            snapshots: self.warm.clone().filter(|_| !security),
            vm: VmRequest {
                server: Some(c.server.clone()),
                profile: Some(match (security, &self.proposed_over) {
                    (true, _) => "observe".to_string(),
                    (false, Some(over)) if c.profile == PROPOSED => {
                        format!("{over}+{}-minimal", c.server)
                    }
                    _ => c.profile.clone(),
                }),
                timeout: Some(self.run_timeout),
                catalogue: self.catalogue.clone(),
                images: self.images.clone(),
                profiles: match c.profile == PROPOSED {
                    true => Some(self.proposal_path(&c.server)),
                    false => self.profiles_file.clone(),
                },
                workspace: self
                    .workspace
                    .as_ref()
                    .and_then(|w| mcpvm::workspace::parse_workspace(&w.display().to_string()).ok()),
                ..VmRequest::default()
            },
            ..ProbeRequest::default()
        }
    }

    /// Where a server's proposed cell finds its profiles: the audit's
    /// own (`--profiles-file`) with the proposal added.
    fn proposal_path(&self, server: &str) -> PathBuf {
        self.out
            .join("runs")
            .join(server)
            .join("proposed.profiles.toml")
    }

    /// Writes the profiles a proposed cell runs under: the audit's own
    /// profiles file, and `<server>-minimal` allowing only the calls the
    /// proposing cell saw (as profiles/<server>-minimal.toml will), read
    /// back as `mcpvm run` will read it. Err: why the cell cannot run.
    fn write_proposal(&self, server: &str, carried: &Carried) -> Result<(), String> {
        let over = self.proposed_over.as_deref().unwrap_or_default();
        let Some(calls) = carried.syscalls.get(over) else {
            return Err(format!(
                "no allow-list to check: the {over} cell recorded no system calls"
            ));
        };
        let mut doc = match &self.profiles_file {
            Some(p) => std::fs::read_to_string(p)
                .map_err(|e| format!("cannot read {}: {e}", p.display()))?
                .parse::<toml::Table>()
                .map_err(|e| format!("{} is not TOML: {}", p.display(), e.message()))?,
            None => toml::Table::new(),
        };
        let Some(profiles) = doc
            .entry("profile")
            .or_insert_with(|| toml::Table::new().into())
            .as_table_mut()
        else {
            return Err("the profiles file's `profile` is not a table".into());
        };
        let mut minimal = toml::Table::new();
        minimal.insert(
            "description".into(),
            format!(
                "Only the {} system calls {server} made in its {over} run",
                calls.len()
            )
            .into(),
        );
        minimal.insert("allow".into(), calls.clone().into());
        profiles.insert(format!("{server}-minimal"), minimal.into());
        let path = self.proposal_path(server);
        write_atomic(&path, &doc.to_string()).map_err(|e| e.to_string())?;
        Profiles::load(&path)
            .and_then(|p| p.resolve(&format!("{over}+{server}-minimal")))
            .map(|_| ())
            .map_err(|e| format!("the proposal is not a profile mcpvm can run: {e}"))
    }

    /// The `mcpvm probe` of one cell, its request written to `request`
    /// (kept beside the cell's result: what the cell asked).
    fn command(&self, c: &Cell, carried: &Carried, request: &Path) -> std::io::Result<Command> {
        // A cell run again (a resumed audit, a repeat) asks anew.
        match std::fs::remove_file(request) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        self.probe_request(c, carried).write(request)?;
        let mut cmd = Command::new(&self.exe);
        cmd.args(["--json", "probe", "--request"]).arg(request);
        Ok(cmd)
    }

    /// Runs one cell to a record: once, or `repeat` times in a row, the
    /// first run's record with every run's timings as samples. A first
    /// run that never answered the handshake is not repeated: it has no
    /// first response to spread, and a cell that times out would cost
    /// `repeat` times its limit.
    fn run(&self, c: &Cell, carried: &Carried) -> Record {
        let t0 = Instant::now();
        let mut first = self.run_once(c, 1, carried);
        if self.repeat > 1 && first.timings.handshake_ms.is_some() {
            let mut samples = vec![Sample::of(&first)];
            for round in 2..=self.repeat {
                samples.push(Sample::of(&self.run_once(c, round, carried)));
            }
            first.samples = samples;
            first.timings.wall_ms = t0.elapsed().as_secs_f64() * 1000.0;
        }
        first
    }

    /// Runs a cell once; the probe's full result and its log are kept
    /// under runs/<server>/ (`<profile>.json`, `<profile>.run2.json`, …).
    fn run_once(&self, c: &Cell, round: usize, carried: &Carried) -> Record {
        let t0 = Instant::now();
        let wall = || t0.elapsed().as_secs_f64() * 1000.0;
        let dir = self.out.join("runs").join(&c.server);
        let stem = match round {
            1 => c.profile.clone(),
            n => format!("{}.run{n}", c.profile),
        };
        let log = dir.join(format!("{stem}.log"));
        let request = dir.join(format!("{stem}.request.json"));
        if let Some(why) = carried.skips(&c.profile) {
            return Record::failed(&c.server, &c.profile, Outcome::Error, why, wall());
        }
        if c.profile == PROPOSED {
            let written = std::fs::create_dir_all(&dir)
                .map_err(|e| e.to_string())
                .and_then(|_| self.write_proposal(&c.server, carried));
            if let Err(why) = written {
                return Record::failed(&c.server, &c.profile, Outcome::Error, why, wall());
            }
        }
        let spawned = std::fs::create_dir_all(&dir)
            .and_then(|_| std::fs::File::create(&log))
            .and_then(|log| {
                self.command(c, carried, &request)?
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(log)
                    .process_group(0)
                    .pre_exec_pdeathsig()
                    .spawn()
            });
        let mut child = match spawned {
            Ok(ch) => ch,
            Err(e) => {
                return Record::failed(
                    &c.server,
                    &c.profile,
                    Outcome::Error,
                    format!("cannot start the probe: {e}"),
                    wall(),
                )
            }
        };
        let mut stdout = child.stdout.take().expect("piped");
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stdout.read_to_string(&mut s);
            s
        });
        // The probe's own limits end a slow server; this catches the rest.
        let limit = Duration::from_secs(self.run_timeout + 60);
        let mut killed = false;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if t0.elapsed() > limit && !killed => {
                    // SAFETY: a signal to the probe's own process group.
                    unsafe { libc::kill(-(child.id() as i32), libc::SIGTERM) };
                    std::thread::sleep(Duration::from_secs(5));
                    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                    killed = true;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(100)),
                Err(_) => break,
            }
        }
        let _ = child.wait();
        let text = reader.join().unwrap_or_default();
        if killed {
            return Record::failed(
                &c.server,
                &c.profile,
                Outcome::Timeout,
                format!(
                    "the run outlived its {} s limit and was killed",
                    limit.as_secs()
                ),
                wall(),
            );
        }
        match serde_json::from_str::<probes::report::result::ProbeResult>(text.trim()) {
            Ok(probe) => {
                let _ = std::fs::write(dir.join(format!("{stem}.json")), &text);
                Record::from_probe(&c.server, &c.profile, &probe, wall())
            }
            Err(_) => {
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                let last = said
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("no output");
                Record::failed(
                    &c.server,
                    &c.profile,
                    Outcome::Error,
                    format!("the probe gave no result: {last}"),
                    wall(),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A merge names each shard of the split that is missing or lacks
    /// cells, with what completes it; a server whose install failed has
    /// no cells to lack; shards of different splits are refused.
    #[test]
    fn a_merge_names_the_shards_missing_or_partial() {
        let mut meta = report::tests::meta();
        meta.servers.insert(
            "broken".into(),
            ServerMeta {
                install_error: Some("npm ci failed".into()),
                ..ServerMeta::default()
            },
        );
        let installed = ["git".to_string(), "time".to_string()];
        let shard = |index| Shard { index, count: 3 };
        let ran = |index| -> Given {
            let cells = matrix::cells(&installed, &meta.profiles, shard(index));
            let keys = cells.into_iter().map(|c| (c.server, c.profile)).collect();
            (shard(index), format!("s{index}").into(), keys)
        };
        let whole = vec![ran(0), ran(1), ran(2)];
        assert!(gaps(&meta, &whole).unwrap().is_empty());
        // Two servers' four cells in three shards: 0 runs git's two, 1
        // time's two, and 2 none, so it lacks nothing when it is not given.
        let mut part = vec![ran(0)];
        part[0].2.pop();
        let g = gaps(&meta, &part).unwrap();
        assert_eq!(g.len(), 2, "{g:?}");
        assert!(
            g[0].starts_with("shard 0/3 is partial: 1 of its 2 cells ran"),
            "{g:?}"
        );
        assert!(
            g[1].starts_with("shard 1/3 is missing: its 2 cells"),
            "{g:?}"
        );
        assert!(g[1].contains("mcpvm audit --shard 1/3"), "{g:?}");
        // One audit cut short: said as the audit.
        let mut one = vec![(Shard::ALL, "a".into(), Vec::new())];
        one[0].2.push(("git".to_string(), "baseline".to_string()));
        let g = gaps(&meta, &one).unwrap();
        assert_eq!(g, ["the audit is partial: 1 of its 4 cells ran; run it again with the same --out (it resumes from its journal) and merge again"]);
        // A split no audit makes is refused before anything is sized by it.
        let hostile = vec![(
            Shard {
                index: 0,
                count: usize::MAX,
            },
            "h".into(),
            Vec::new(),
        )];
        assert!(matches!(
            gaps(&meta, &hostile),
            Err(AuditError::NotASplit { .. })
        ));
        let outside = vec![(Shard { index: 3, count: 3 }, "o".into(), Vec::new())];
        assert!(matches!(
            gaps(&meta, &outside),
            Err(AuditError::NotASplit { .. })
        ));
        // Shards of two splits are not one audit.
        let mixed = vec![
            ran(0),
            (Shard { index: 1, count: 2 }, "t".into(), Vec::new()),
        ];
        assert!(matches!(
            gaps(&meta, &mixed),
            Err(AuditError::ShardsDiffer { .. })
        ));
    }

    /// A shard directory with `meta` as its audit.json and `journal` as
    /// its results.jsonl.
    fn shard_dir(root: &Path, name: &str, meta: &serde_json::Value, journal: &str) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("audit.json"), meta.to_string()).unwrap();
        std::fs::write(dir.join("results.jsonl"), journal).unwrap();
        dir
    }

    /// `--calls-from-runs`: a record written when only a call's first
    /// try was kept gets every try again from its cell's whole result
    /// under the shard's runs/; one whose result is missing or unreadable
    /// keeps its own. Without the flag, the records are merged as kept.
    #[test]
    fn merge_makes_calls_again_from_the_cells_whole_results() {
        let root = tempfile::tempdir().unwrap();
        let base = serde_json::to_value(report::tests::meta()).unwrap();
        let probe = record::tests::retried_call();
        let mut git = Record::from_probe("git", "baseline", &probe, 1.0);
        git.calls.truncate(1);
        let mut time = Record::from_probe("time", "baseline", &probe, 1.0);
        time.calls.truncate(1);
        let journal: String = [&git, &time]
            .iter()
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect();
        let dir = shard_dir(root.path(), "shard", &base, &journal);
        for (server, text) in [
            ("git", serde_json::to_string(&probe).unwrap()),
            ("time", "{not json".into()),
        ] {
            std::fs::create_dir_all(dir.join("runs").join(server)).unwrap();
            std::fs::write(dir.join("runs").join(server).join("baseline.json"), text).unwrap();
        }
        let calls = |remake: bool| {
            let out = root.path().join(format!("out-{remake}"));
            merge(&out, std::slice::from_ref(&dir), remake, true).unwrap();
            let text = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
            text.lines()
                .map(|l| serde_json::from_str::<Record>(l).unwrap())
                .map(|r| {
                    (
                        r.server,
                        r.calls
                            .iter()
                            .map(|c| c.outcome.clone())
                            .collect::<Vec<_>>(),
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            calls(true),
            [
                (
                    "git".to_string(),
                    vec!["tool_error".to_string(), "ok".to_string()]
                ),
                ("time".to_string(), vec!["tool_error".to_string()]),
            ]
        );
        assert_eq!(calls(false)[0].1, ["tool_error"]);
    }

    /// Shards come from other machines: a name that is a path, a profile
    /// that is TOML lines, a matrix too large to hold, a journal that is
    /// a link: each refused with one error naming the file, and nothing
    /// written anywhere but under --out.
    #[test]
    fn a_hostile_shard_is_refused_before_anything_is_written_or_sized() {
        let root = tempfile::tempdir().unwrap();
        let victim = root.path().join("victim");
        std::fs::create_dir_all(&victim).unwrap();
        let base = serde_json::to_value(report::tests::meta()).unwrap();
        let server = base["servers"]["git"].clone();
        let merged =
            |dir: &Path| merge(&root.path().join("out"), &[dir.to_path_buf()], false, true);
        let refused = |dir: &Path, why: &str| {
            let e = merged(dir).unwrap_err().to_string();
            assert!(e.contains("cannot be merged") && e.contains(why), "{e}");
        };
        for (n, name) in ["../../x/pwn", "/abs/victim/v", "a\nb", "Upper"]
            .iter()
            .enumerate()
        {
            let mut m = base.clone();
            m["servers"][name] = server.clone();
            let dir = shard_dir(root.path(), &format!("names{n}"), &m, "");
            refused(&dir, "is not a server name");
        }
        let mut m = base.clone();
        m["profiles"] = serde_json::json!(["baseline", "x\"]\n[profile.evil]\nallow = [\"execve"]);
        refused(
            &shard_dir(root.path(), "profile", &m, ""),
            "is not a profile name",
        );
        // 20,000 × 20,000: refused at once, by its counts.
        let mut m = base.clone();
        let many: serde_json::Map<String, serde_json::Value> = (0..20_000)
            .map(|i| (format!("s{i}"), server.clone()))
            .collect();
        m["servers"] = many.into();
        m["profiles"] = (0..20_000).map(|i| format!("p{i}")).collect();
        let t = std::time::Instant::now();
        refused(
            &shard_dir(root.path(), "huge", &m, ""),
            "more than an audit holds",
        );
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
        // A journal that links to a file of the user's: not read, not cut.
        let dir = shard_dir(root.path(), "linked", &base, "");
        let precious = victim.join("precious.jsonl");
        std::fs::write(&precious, "not a journal, half a line").unwrap();
        std::fs::remove_file(dir.join("results.jsonl")).unwrap();
        std::os::unix::fs::symlink(&precious, dir.join("results.jsonl")).unwrap();
        refused(&dir, "symbolic link");
        assert_eq!(
            std::fs::read_to_string(&precious).unwrap(),
            "not a journal, half a line"
        );
        // A record of a cell the audit does not have.
        let stray = serde_json::to_string(&record::Record::failed(
            "intruder",
            "baseline",
            Outcome::Error,
            "x".into(),
            1.0,
        ))
        .unwrap();
        refused(
            &shard_dir(root.path(), "stray", &base, &(stray + "\n")),
            "a cell this audit does not have",
        );
        // Nothing of any of them reached the victim's directory, nor --out.
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 1);
        assert!(!root.path().join("out").exists());
        assert!(!root.path().join("x").exists());
    }

    #[test]
    fn other_servers_are_named_a_few_at_a_time() {
        let journal = report::tests::meta();
        let mut given = journal.clone();
        given.servers.remove("time");
        let extra = given.servers["git"].clone();
        for i in 0..7 {
            given.servers.insert(format!("s{i}"), extra.clone());
        }
        assert_eq!(
            other_servers(&journal, &given),
            "given, not in its journal: s0, s1, s2, s3, s4 and 2 more; in its journal, not given: time"
        );
    }

    /// A journal resumed with a server's layer built again elsewhere:
    /// refused as other inputs unless told to run that server's cells
    /// again; then its cells (and its run as released) leave the journal,
    /// the others stay, and `audit.json` names the new layer. Anything
    /// else changed is still refused.
    #[test]
    fn a_journal_resumes_with_the_changed_servers_run_again() {
        let out = tempfile::tempdir().unwrap();
        let before = report::tests::meta();
        std::fs::write(
            out.path().join("audit.json"),
            serde_json::to_string(&before).unwrap(),
        )
        .unwrap();
        let line = |s: &str, p: &str| {
            serde_json::to_string(&report::tests::record(s, p, Outcome::Ok, 10.0)).unwrap() + "\n"
        };
        let journal = [
            line("git", "baseline"),
            line("time", "baseline"),
            line("time", "deny-exec"),
            line("time-as-released", "as-released"),
        ]
        .concat();
        std::fs::write(out.path().join("results.jsonl"), &journal).unwrap();
        let mut now = before.clone();
        now.servers.get_mut("time").unwrap().layer = "layer-time-new.erofs".into();
        now.started_at = 99;

        let refused = start_or_resume(out.path(), now.clone(), false).unwrap_err();
        assert!(refused.to_string().contains("--rerun-changed"), "{refused}");
        let mut other = now.clone();
        other.kernel_sha256 = "ffff".into();
        assert!(start_or_resume(out.path(), other, true).is_err());
        // Another set of servers is another split: named, never rerun.
        let mut fewer = now.clone();
        fewer.servers.remove("git");
        let refused = start_or_resume(out.path(), fewer, true)
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("in its journal, not given: git")
                && !refused.contains("--rerun-changed"),
            "{refused}"
        );
        assert_eq!(
            std::fs::read_to_string(out.path().join("results.jsonl")).unwrap(),
            journal,
            "nothing left the journal"
        );

        let resumed = start_or_resume(out.path(), now.clone(), true).unwrap();
        assert_eq!(resumed.servers, now.servers);
        assert_eq!(
            resumed.started_at, before.started_at,
            "the journal's own start"
        );
        let kept = std::fs::read_to_string(out.path().join("results.jsonl")).unwrap();
        assert_eq!(kept, line("git", "baseline"));
        let written: Meta =
            serde_json::from_slice(&std::fs::read(out.path().join("audit.json")).unwrap()).unwrap();
        assert_eq!(written, resumed);
        // Resumed again with the same inputs: nothing else goes.
        start_or_resume(out.path(), now, false).unwrap();
        assert_eq!(
            std::fs::read_to_string(out.path().join("results.jsonl")).unwrap(),
            line("git", "baseline")
        );
    }

    #[test]
    fn the_progress_bar_fills_with_the_runs() {
        assert_eq!(bar(0, 4, 8), "[--------]");
        assert_eq!(bar(1, 4, 8), "[##------]");
        assert_eq!(bar(4, 4, 8), "[########]");
        assert_eq!(bar(0, 0, 4), "[####]");
        assert_eq!(human(30.0), "30 s");
        assert_eq!(human(600.0), "10 min");
    }

    /// A cell's context as the tests start from: robustness in the
    /// baseline, nothing else given.
    fn context() -> CellContext {
        CellContext {
            exe: "mcpvm".into(),
            out: "out".into(),
            catalogue: Default::default(),
            images: None,
            profiles_file: None,
            calls: BTreeMap::new(),
            run_timeout: 600,
            init_timeout: 300,
            step_timeout: 120,
            warm: None,
            repeat: 1,
            robustness: Some("baseline".into()),
            workspace: None,
            pinned: None,
            proposed_over: None,
        }
    }

    #[test]
    fn a_proposed_cell_runs_under_the_allow_list_its_logging_cell_saw() {
        let t = tempfile::tempdir().unwrap();
        let own = t.path().join("tb.toml");
        std::fs::write(&own, "[defaults]\nvcpus = 1\ndeny_net = true\n").unwrap();
        let ctx = CellContext {
            out: t.path().join("out"),
            profiles_file: Some(own),
            proposed_over: Some("baseline".into()),
            ..context()
        };
        let cell = Cell {
            server: "memory".into(),
            profile: PROPOSED.into(),
        };
        // Nothing logged (the server never started): nothing to check,
        // and the cell says so instead of running unconfined.
        let none = ctx.run_once(&cell, 1, &Carried::default());
        assert_eq!(none.outcome, Outcome::Error);
        assert!(none.evidence.errors[0].contains("no allow-list to check: the baseline cell"));
        let mut carried = Carried::default();
        carried.syscalls.insert(
            "baseline".into(),
            vec!["read".into(), "write".into(), "exit_group".into()],
        );
        // Read back as `mcpvm run` would: a list it would refuse is the
        // cell's error, before a VM starts.
        assert!(ctx
            .write_proposal("memory", &carried)
            .unwrap_err()
            .contains("without execve the server cannot start"));
        carried
            .syscalls
            .get_mut("baseline")
            .unwrap()
            .push("execve".into());
        ctx.write_proposal("memory", &carried).unwrap();
        let req = ctx.probe_request(&cell, &carried);
        assert_eq!(req.vm.profile.as_deref(), Some("baseline+memory-minimal"));
        let file = req.vm.profiles.unwrap();
        assert_eq!(
            file,
            t.path().join("out/runs/memory/proposed.profiles.toml")
        );
        // The audit's own profiles file holds for the proposed cell too.
        let p = Profiles::load(&file)
            .unwrap()
            .resolve("baseline+memory-minimal")
            .unwrap();
        assert_eq!((p.vcpus, p.network.deny), (1, true));
        let seccomp = p.policy.seccomp.unwrap();
        assert!(seccomp.log);
        let allowed = seccomp.allow.unwrap().syscalls;
        assert_eq!(allowed.len(), 4);
        assert!(allowed.contains(&"write".to_string()));
        // Its other cells keep the audit's own file.
        let baseline = Cell {
            server: "memory".into(),
            profile: "baseline".into(),
        };
        let req = ctx.probe_request(&baseline, &carried);
        assert_eq!(req.vm.profiles, Some(t.path().join("tb.toml")));
        assert_eq!(req.vm.profile.as_deref(), Some("baseline"));
    }

    #[test]
    fn cells_after_the_baseline_call_only_what_worked_there() {
        let ctx = context();
        let mut args = serde_json::Map::new();
        args.insert("names".into(), serde_json::json!(["mcpvm"]));
        let carried = Carried {
            worked: Some(vec!["read_graph".into()]),
            replay: vec![("open_nodes".into(), args.clone())],
            ..Carried::default()
        };
        let cell = |profile: &str| Cell {
            server: "memory".into(),
            profile: profile.into(),
        };
        let only = |p: &str| ctx.probe_request(&cell(p), &carried).only_tools;
        assert_eq!(only("no-tmp"), Some(vec!["read_graph".to_string()]));
        assert_eq!(only(PROPOSED), Some(vec!["read_graph".to_string()]));
        // The baseline itself, and the attacks, call every tool.
        assert_eq!(only("baseline"), None);
        assert_eq!(only(SECURITY), None);
        // Before any baseline (an audit without one: the corpus's runs
        // deny-net first), every tool, retried as a refusal asks.
        for p in ["no-tmp", "deny-net"] {
            let req = ctx.probe_request(&cell(p), &Carried::default());
            assert_eq!(req.only_tools, None);
            assert!(req.call.is_empty() && !req.no_retries, "{p}");
        }
        // With the baseline's own arguments, each call made once.
        for p in ["no-tmp", PROPOSED] {
            let req = ctx.probe_request(&cell(p), &carried);
            assert_eq!(
                req.call,
                [("open_nodes".into(), ToolArgs::Given(args.clone()))]
            );
            assert!(req.no_retries, "{p}");
        }
        for p in ["baseline", SECURITY] {
            let req = ctx.probe_request(&cell(p), &carried);
            assert!(req.call.is_empty() && !req.no_retries, "{p}");
        }
    }

    #[test]
    fn warm_and_security_cells_get_their_own_probe_arguments() {
        let mut ctx = CellContext {
            pinned: Some(("pins.json".into(), ["memory".to_string()].into())),
            ..context()
        };
        let cell = Cell {
            server: "memory".into(),
            profile: "baseline".into(),
        };
        let req = |ctx: &CellContext| ctx.probe_request(&cell, &Carried::default());
        assert!(!req(&ctx).warm);
        // --pinned: a server the pin file names is held to it; another is not.
        assert_eq!(req(&ctx).pinned, Some("pins.json".into()));
        let other = Cell {
            server: "time".into(),
            profile: "baseline".into(),
        };
        assert!(ctx
            .probe_request(&other, &Carried::default())
            .pinned
            .is_none());
        // --robustness: the hostile input goes to the first profile's
        // cells only.
        assert!(req(&ctx).robustness);
        ctx.robustness = Some("no-rng".into());
        assert!(!req(&ctx).robustness);
        ctx.warm = Some("/cache".into());
        assert!(req(&ctx).warm);
        assert_eq!(req(&ctx).snapshots, Some("/cache".into()));
        // The security column attacks, with the probe's own observe
        // profile, and boots: its canaries are planted before the server.
        let security = Cell {
            server: "memory".into(),
            profile: SECURITY.into(),
        };
        ctx.profiles_file = Some("tb.toml".into());
        let attack = ctx.probe_request(&security, &Carried::default());
        assert!(attack.security);
        assert_eq!(attack.vm.profile.as_deref(), Some("observe"));
        assert_eq!(attack.vm.profiles, Some("tb.toml".into()));
        assert!(!attack.warm && attack.snapshots.is_none());
        // A server's earlier cell showed its lifecycle: the next speaks it
        // at once, with no server/discover first.
        assert_eq!(attack.lifecycle, probes::LifecycleChoice::Auto);
        let carried = Carried {
            lifecycle: Some((probes::LifecycleChoice::Initialize, "baseline".into())),
            ..Carried::default()
        };
        let told = ctx.probe_request(&security, &carried);
        assert_eq!(told.lifecycle, probes::LifecycleChoice::Initialize);
        // The cell's probe is started on its request, written beside its
        // result and read back whole; a cell run again asks anew.
        let t = tempfile::tempdir().unwrap();
        let file = t.path().join("observe.request.json");
        for _ in 0..2 {
            let cmd = ctx.command(&security, &Carried::default(), &file).unwrap();
            let a: Vec<String> = cmd
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            assert_eq!(a, ["--json", "probe", "--request", file.to_str().unwrap()]);
            assert_eq!(ProbeRequest::read(&file).unwrap(), attack);
        }
    }
}
