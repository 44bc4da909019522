//! `mcpvm image build`: the runtime image and a layer per catalogued
//! server, into the image store (content-addressed, cached).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use mcpvm_images::build::build;
use mcpvm_images::catalogue::Catalogue;
use mcpvm_images::store;

use mcpvm::logger::{printable, printable_lines};

/// Why an image command did nothing, or not all it was asked.
#[derive(Debug, thiserror::Error)]
pub enum ImageCmdError {
    #[error(transparent)]
    Catalogue(#[from] mcpvm_images::catalogue::CatalogueError),
    #[error(transparent)]
    Store(#[from] mcpvm_images::store::StoreError),
    #[error(transparent)]
    Build(#[from] mcpvm_images::build::BuildError),
    #[error("{0}")]
    Package(String),
    #[error("Cannot read the registry file {path}")]
    ReadRegistry {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("The registry file {0} is not UTF-8: give JSON lines")]
    NotUtf8(PathBuf),
    #[error("{path}: {why}")]
    Registry { path: PathBuf, why: String },
    #[error("Cannot use {path}")]
    Out {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} exists: a generated catalogue may have been reviewed; remove it or choose another --out")]
    Exists(PathBuf),
    #[error("Cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("Cannot prune the warm-start cache {path}")]
    Snapshots {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

#[derive(Subcommand)]
pub enum ImageCommand {
    /// Build (or find cached) the runtime image and server layers.
    Build(BuildArgs),
    /// The catalogue's servers and what of them is built in the store.
    List(ListArgs),
    /// Remove from the store what the catalogue no longer builds: layers
    /// of other versions or of servers it does not name, old runtime
    /// images, dead builds' leftovers (layers built with `--package` and
    /// every lock stay); and the warm snapshots no run can find again.
    Prune(PruneArgs),
    /// Make a catalogue from a registry's listings (JSON lines: registry,
    /// package, version, command, args, required_env), without a person:
    /// every listing, or a seeded draw stratified by registry
    /// (docs/registry.md). Writes OUT/catalogue.toml and OUT/sample.json.
    FromRegistry(FromRegistryArgs),
}

#[derive(Args)]
pub struct FromRegistryArgs {
    /// The registry's listings, one JSON object a line.
    registry: PathBuf,
    /// The directory for catalogue.toml and sample.json (made if
    /// missing; refused if it holds either already).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Draw this many listings, each registry by its share of the list;
    /// default: every listing.
    #[arg(long, value_name = "N")]
    sample: Option<usize>,
    /// The draw's seed, recorded in sample.json.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// The largest listing file read: the 2026-12 registry file is 0.3 MB.
const MAX_REGISTRY_BYTES: u64 = 64 << 20;

fn from_registry(a: FromRegistryArgs, json: bool) -> Result<u8, ImageCmdError> {
    use mcpvm_images::registry;
    let path = || a.registry.clone();
    let bytes =
        mcpvm::host::files::read_regular(&a.registry, MAX_REGISTRY_BYTES).map_err(|source| {
            ImageCmdError::ReadRegistry {
                path: path(),
                source,
            }
        })?;
    let text = String::from_utf8(bytes).map_err(|_| ImageCmdError::NotUtf8(path()))?;
    let listings =
        registry::parse(&text).map_err(|why| ImageCmdError::Registry { path: path(), why })?;
    let n = a.sample.unwrap_or(listings.len());
    let draw = registry::draw(&listings, n, a.seed);
    let (catalogue, rows) = registry::catalogue(&listings, &draw.chosen);
    mcpvm::host::files::own_dir(&a.out).map_err(|source| ImageCmdError::Out {
        path: a.out.clone(),
        source,
    })?;
    let (toml_path, json_path) = (a.out.join("catalogue.toml"), a.out.join("sample.json"));
    for p in [&toml_path, &json_path] {
        if p.exists() {
            return Err(ImageCmdError::Exists(p.clone()));
        }
    }
    let made = rows.iter().filter(|r| r.name.is_some()).count();
    let sha: String = {
        use sha2::Digest;
        sha2::Sha256::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let sample = serde_json::json!({
        "registry": a.registry,
        "registry_sha256": sha,
        "listings": listings.len(),
        "seed": draw.seed,
        "size": draw.size,
        "strata": draw.strata.iter().map(|(r, (all, drawn))| (r.clone(), serde_json::json!({"listings": all, "drawn": drawn}))).collect::<serde_json::Map<_, _>>(),
        "entries": made,
        "refused": rows.len() - made,
        "rows": rows,
    });
    let write = |p: &std::path::Path, bytes: &[u8]| {
        mcpvm::host::files::write_whole(p, bytes).map_err(|source| ImageCmdError::Write {
            path: p.to_path_buf(),
            source,
        })
    };
    write(&toml_path, catalogue.as_bytes())?;
    write(
        &json_path,
        serde_json::to_string_pretty(&sample)?.as_bytes(),
    )?;
    if json {
        let mut summary = sample;
        summary.as_object_mut().map(|o| o.remove("rows"));
        println!("{summary}");
        return Ok(0);
    }
    let strata: Vec<String> = draw
        .strata
        .iter()
        .map(|(r, (all, drawn))| format!("{} {drawn} of {all}", printable(r)))
        .collect();
    println!(
        "{} of {} listings (seed {}; {}): {made} entries in {}, {} refused with why in {}",
        draw.size,
        listings.len(),
        draw.seed,
        strata.join(", "),
        toml_path.display(),
        rows.len() - made,
        json_path.display()
    );
    Ok(0)
}

#[derive(Args)]
pub struct PruneArgs {
    #[command(flatten)]
    catalogue: mcpvm::server::CatalogueArg,
    /// The image store [default: ~/.cache/mcpvm/images].
    #[arg(long)]
    images: Option<PathBuf>,
    /// The warm-start cache, pruned too: snapshots no run can find again
    /// [default: ~/.cache/mcpvm/snapshots].
    #[arg(long, value_name = "DIR")]
    snapshots: Option<PathBuf>,
    /// Say what would be removed; remove nothing.
    #[arg(long)]
    dry_run: bool,
}

fn prune(a: PruneArgs, json: bool) -> Result<u8, ImageCmdError> {
    let catalogue = load_catalogue(&a.catalogue)?;
    let dir = a.images.unwrap_or_else(store::default_dir);
    let mut index = store::Index::load(&dir)?;
    // Current layers of the catalogue's entries, and the layers of
    // servers named by their package (no catalogue holds them).
    let keep: std::collections::BTreeSet<String> = index
        .servers
        .iter()
        .filter(|(name, r)| match catalogue.servers.get(name.as_str()) {
            Some(e) => r.key == index.key_of(name, e),
            None => r.command.is_some(),
        })
        .map(|(name, _)| name.clone())
        .collect();
    let mut removed = index.prune(&dir, |name, _| keep.contains(name), a.dry_run)?;
    // Then the warm snapshots: one of a pruned layer is unreachable too.
    let cache = a.snapshots.unwrap_or_else(mcpvm::run::warm::default_dir);
    let snapshots =
        mcpvm::run::warm::prune(&cache, a.dry_run).map_err(|source| ImageCmdError::Snapshots {
            path: cache.clone(),
            source,
        })?;
    removed.extend(
        snapshots
            .into_iter()
            .map(|(k, b)| (format!("snapshot {k}"), b)),
    );
    let bytes: u64 = removed.iter().map(|(_, b)| b).sum();
    if json {
        let files: Vec<_> = removed
            .iter()
            .map(|(f, b)| serde_json::json!({"file": f, "bytes": b}))
            .collect();
        println!(
            "{}",
            serde_json::json!({"store": dir, "dry_run": a.dry_run, "removed": files, "bytes": bytes})
        );
        return Ok(0);
    }
    let verb = if a.dry_run { "would remove" } else { "removed" };
    for (f, b) in &removed {
        println!("{verb} {f} ({:.1} MB)", *b as f64 / 1e6);
    }
    println!(
        "{verb} {} files, {:.1} MB, from {} and {}",
        removed.len(),
        bytes as f64 / 1e6,
        dir.display(),
        cache.display()
    );
    Ok(0)
}

#[derive(Args)]
pub struct ListArgs {
    #[command(flatten)]
    catalogue: mcpvm::server::CatalogueArg,
    /// The image store [default: ~/.cache/mcpvm/images].
    #[arg(long)]
    images: Option<PathBuf>,
}

/// One catalogue entry as the store has it.
#[derive(serde::Serialize)]
struct Listed {
    name: String,
    package: String,
    version: String,
    runtime: String,
    /// `built` (a layer of the current runtime and these fields), `stale`
    /// (a layer of another version or runtime), `missing`.
    state: &'static str,
    layer: Option<String>,
    bytes: Option<u64>,
    /// The digest of its dependency tree's lock.
    lock: Option<String>,
    /// How it is started in the guest, its needs spelt out: the command
    /// line, its environment (credentials as `${KEY}`, unresolved) and
    /// the setup line run before it (for a bare-process peer in a bench,
    /// benches/lib/bare-server.py).
    argv: Vec<String>,
    env: std::collections::BTreeMap<String, String>,
    setup: Option<String>,
    /// It runs as root, not as the guest's unprivileged user.
    root: bool,
}

fn list(a: ListArgs, json: bool) -> Result<u8, ImageCmdError> {
    let catalogue = load_catalogue(&a.catalogue)?;
    let dir = a.images.unwrap_or_else(store::default_dir);
    let index = store::Index::load_or_new(&dir)?;
    let rt_key = index.runtime_key();
    let rows: Vec<Listed> = catalogue
        .servers
        .iter()
        .map(|(name, e)| {
            let record = index.servers.get(name);
            let current = record.filter(|r| {
                r.key == mcpvm_images::build::layer_key(name, e, &rt_key)
                    && dir.join(&r.layer).is_file()
            });
            Listed {
                name: name.clone(),
                package: e.package.clone(),
                version: e.version.clone(),
                runtime: format!("{:?}", e.runtime).to_lowercase(),
                state: match (current, record) {
                    (Some(_), _) => "built",
                    (None, Some(_)) => "stale",
                    (None, None) => "missing",
                },
                layer: current.map(|r| r.layer.clone()),
                bytes: current.map(|r| r.bytes),
                lock: current.and_then(|r| r.lock.clone()),
                argv: e.argv_built(name, current.and_then(|r| r.command.as_deref())),
                env: e.env.clone(),
                setup: e.setup.clone(),
                root: e.root,
            }
        })
        .collect();
    if json {
        println!(
            "{}",
            serde_json::json!({"store": dir, "runtime": index.runtime, "servers": rows})
        );
        return Ok(0);
    }
    println!(
        "store {} (runtime {})",
        dir.display(),
        index.runtime.as_deref().unwrap_or("not built")
    );
    for r in &rows {
        println!(
            "{:<22} {:<8} {:<8} {:>8}  {:<16}  {}@{}",
            r.name,
            r.runtime,
            r.state,
            r.bytes
                .map(|b| format!("{:.1} MB", b as f64 / 1e6))
                .unwrap_or_default(),
            r.lock.as_deref().unwrap_or("-"),
            printable(&r.package),
            printable(&r.version)
        );
    }
    Ok(0)
}

#[derive(Args)]
pub struct BuildArgs {
    #[command(flatten)]
    catalogue: mcpvm::server::CatalogueArg,
    /// Only these servers (comma-separated); default: every one.
    #[arg(long, value_delimiter = ',')]
    servers: Vec<String>,
    /// Also build the layer of a server named by its package,
    /// npm:NAME@VERSION, pypi:NAME==VERSION or cargo:NAME@VERSION, as `run --package` would
    /// on first use (repeatable). With no --servers, only these.
    #[arg(long, value_name = "SPEC")]
    package: Vec<String>,
    /// With --package: their dependencies as they were when that version
    /// was published (npm --before, uv --exclude-newer, at the
    /// registry's date, recorded in the lock), stored as a layer of its
    /// own beside today's.
    #[arg(long, requires = "package")]
    as_released: bool,
    /// Resolve these servers' dependencies again instead of installing
    /// their locked tree, and rebuild their layers (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "SERVERS")]
    update: Vec<String>,
    /// The image store [default: ~/.cache/mcpvm/images].
    #[arg(long)]
    images: Option<PathBuf>,
    /// Layers built at a time (each its own npm or pip, and its own
    /// install microVM) [default: the machine's cores].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64))]
    jobs: Option<u64>,
    /// Seconds a layer's install scripts or a crate's build may run in
    /// their microVM before the build of that layer fails.
    #[arg(long, value_name = "SECS", default_value_t = crate::install::scripts::DEFAULT_TIMEOUT_S,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    sandbox_timeout: u64,
}

pub fn load_catalogue(c: &mcpvm::server::CatalogueArg) -> Result<Catalogue, ImageCmdError> {
    Ok(Catalogue::choose(c.path.as_deref(), c.only)?)
}

pub fn run(cmd: ImageCommand, json: bool) -> Result<u8, ImageCmdError> {
    match cmd {
        ImageCommand::List(a) => list(a, json),
        ImageCommand::Prune(a) => prune(a, json),
        ImageCommand::FromRegistry(a) => from_registry(a, json),
        ImageCommand::Build(a) => {
            let mut catalogue = load_catalogue(&a.catalogue)?;
            let mut servers = a.servers.clone();
            for spec in &a.package {
                let (name, entry) = match a.as_released {
                    true => mcpvm_images::package::entry_as_released(spec),
                    false => mcpvm_images::package::entry(spec),
                }
                .map_err(ImageCmdError::Package)?;
                catalogue.servers.insert(name.clone(), entry);
                servers.push(name);
            }
            let dir = a.images.unwrap_or_else(store::default_dir);
            let sandbox = crate::install::scripts::MicroVm {
                timeout_s: a.sandbox_timeout,
            };
            let jobs = a
                .jobs
                .map(|j| j as usize)
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let report = build(
                &catalogue,
                &servers,
                &a.update,
                &dir,
                jobs,
                &sandbox,
                &mut |msg| eprintln!("image: {}", printable_lines(msg)),
            )?;
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                let mb = |b: u64| b as f64 / 1e6;
                println!(
                    "runtime  {:>8.1} MB  {}",
                    mb(report.runtime.bytes),
                    if report.runtime.cached {
                        "cached"
                    } else {
                        "built"
                    }
                );
                for s in &report.servers {
                    println!(
                        "{:<20} {:>8.1} MB  {} in {:.1} s",
                        s.name,
                        mb(s.bytes),
                        if s.cached { "cached" } else { "built" },
                        s.seconds
                    );
                }
                for f in &report.failed {
                    println!("{:<20} FAILED   {}", f.name, printable_lines(&f.error));
                }
                println!("store {} ({:.1} s)", report.store.display(), report.seconds);
            }
            if report.failed.is_empty() {
                return Ok(0);
            }
            if json {
                // The report above lists them, each with its error.
                return Ok(3);
            }
            let names: Vec<&str> = report.failed.iter().map(|f| f.name.as_str()).collect();
            eprintln!(
                "image: {} of {} layers failed ({}); the others are built. Fix those entries and run it again: built layers are cached",
                names.len(),
                names.len() + report.servers.len(),
                names.join(", ")
            );
            Ok(3)
        }
    }
}
