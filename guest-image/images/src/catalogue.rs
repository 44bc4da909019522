//! The server catalogue (TOML): one `[servers.<name>]` table per MCP
//! server, naming its package at an exact version, its runtime, how to
//! start it and what it needs. docs/catalogue.md describes each field and
//! how to add a server.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The catalogue shipped with mcpvm.
pub const BUILT_IN: &str = include_str!("../../catalogue.toml");

/// What a server runs on: `node` (the runtime image's node, the current
/// LTS), a pinned node of its own (`node20`, `node22`, `node24`,
/// `node26`: guest-image/runtimes/node.lock, carried in the server's
/// layer), `python` (3.11), or `cargo`: a crate's binary, built from
/// crates.io in a microVM (static, so it needs nothing of the image).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    Node,
    Node20,
    Node22,
    Node24,
    Node26,
    Python,
    Cargo,
}

/// Where a layer with a node of its own keeps it, under the server's
/// directory.
pub const OWN_NODE: &str = ".mcpvm-node";

impl Runtime {
    /// A package name by its registry's grammar (`grammar`).
    pub fn is_name(self, name: &str) -> bool {
        match self {
            Runtime::Python => crate::grammar::is_pypi_name(name),
            Runtime::Cargo => crate::grammar::is_crate_name(name),
            _ => crate::grammar::is_npm_name(name),
        }
    }

    /// An exact version by its registry's grammar: one release, never a
    /// tag or a range.
    pub fn is_exact(self, version: &str) -> bool {
        match self {
            Runtime::Python => crate::grammar::is_pep440(version),
            _ => crate::grammar::is_semver(version),
        }
    }

    fn name_grammar(self) -> &'static str {
        match self {
            Runtime::Python => "a PyPI package name (PEP 508)",
            Runtime::Cargo => "a crate name",
            _ => "an npm package name",
        }
    }

    fn version_grammar(self) -> &'static str {
        match self {
            Runtime::Python => "a PEP 440 release such as 2025.4.25 or 1.0rc1",
            _ => "a full semver version such as 1.2.3 or 1.0.0-rc.1",
        }
    }

    pub fn is_node(self) -> bool {
        !matches!(self, Runtime::Python | Runtime::Cargo)
    }

    /// The pinned node major the layer carries; None for the image's.
    pub fn own_node(self) -> Option<&'static str> {
        match self {
            Runtime::Node20 => Some("20"),
            Runtime::Node22 => Some("22"),
            Runtime::Node24 => Some("24"),
            Runtime::Node26 => Some("26"),
            Runtime::Node | Runtime::Python | Runtime::Cargo => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// npm or PyPI package name.
    pub package: String,
    /// Exact version.
    pub version: String,
    /// A local package file installed instead of the registry's: `npm
    /// pack`'s .tgz, or a wheel, of `package` at `version` (a server in
    /// development, or one not published). A relative path is taken from
    /// the catalogue file's directory; its contents are part of the
    /// layer's key.
    #[serde(default)]
    pub source: Option<PathBuf>,
    pub runtime: Runtime,
    /// The package's executable (an npm bin or a Python console script).
    /// Empty (left out): the package's own, chosen by the build as npx
    /// and uvx choose it (its only executable, or the one named like the
    /// package) and kept in the store's index (a generated catalogue's
    /// entries leave it out: docs/registry.md).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment; a value may name a credential as `${KEY}`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// How a client talks to it: "stdio" (default) or "http"
    /// (Streamable HTTP on `port` in the guest, reached from the host
    /// with `mcpvm run --listen`).
    #[serde(default)]
    pub transport: Transport,
    /// The guest port an "http" server listens on.
    #[serde(default)]
    pub port: Option<u16>,
    /// What the server may reach (docs/network.md): `HOST[:PORT]` rules
    /// such as `api.github.com:443`, `*.googleapis.com:443` or `*:443`.
    /// Empty: no network.
    #[serde(default)]
    pub network: Vec<String>,
    /// Environment keys the user must supply (API keys, tokens).
    #[serde(default)]
    pub credentials: Vec<String>,
    /// Credential files the server reads at start (an OAuth client JSON,
    /// a key file), as dummies: guest path → text, written into its
    /// layer. Each text says `mcpvm-dummy`, as the dummy variables do,
    /// so that nobody takes it for a secret.
    #[serde(default)]
    pub dummy_files: BTreeMap<String, String>,
    /// A shell line run in the guest before the server starts.
    #[serde(default)]
    pub setup: Option<String>,
    /// The server runs as root, not as the guest's unprivileged user
    /// (`SERVER_HOME`'s): for a server that only works as root (say why
    /// in a comment beside it).
    #[serde(default)]
    pub root: bool,
    /// Dependencies pinned beside the package, where it leaves them open
    /// and a newer release breaks it: `name==1.2.3` (python) or
    /// `name@1.2.3` (node).
    #[serde(default)]
    pub pins: Vec<String>,
    /// Resolve the dependencies as they were when this version was
    /// published (its date from the registry's metadata, recorded in the
    /// lock): npm's `--before`, uv's `--exclude-newer` for PyPI. For an
    /// old release whose dependencies have moved on (an SDK's 2.x it
    /// never knew); where it replaces hand-written `pins`, drop them.
    #[serde(default)]
    pub as_released: bool,
    /// Environment for the installer only (npm or pip), e.g.
    /// `PUPPETEER_SKIP_DOWNLOAD = "1"` for a dependency whose install
    /// script would download a browser.
    #[serde(default)]
    pub install_env: BTreeMap<String, String>,
    /// Node: install without running any package's install scripts.
    #[serde(default)]
    pub ignore_scripts: bool,
    /// Python: the package's extras (`package[extra,…]`).
    #[serde(default)]
    pub extras: Vec<String>,
    /// Python: dependencies PyPI has only as a source distribution, as
    /// exact pins (`proxy_tools==0.1.0`): each is built into a wheel in
    /// the install microVM (no network, its calls recorded), never on
    /// the host, then installed as the other wheels are.
    #[serde(default)]
    pub sdists: Vec<String>,
    /// Debian 12 packages the server needs beside the runtime's (e.g.
    /// `ripgrep`): fetched with their dependencies and unpacked into the
    /// server's layer (docs/catalogue.md).
    #[serde(default)]
    pub apt: Vec<String>,
    /// Debian 12 packages only a build needs (the headers a native
    /// module compiles against, e.g. `libsecret-1-dev`): unpacked into
    /// the install microVM's tools layer, never into the server's layer
    /// (docs/catalogue.md, "Native modules").
    #[serde(default)]
    pub build_apt: Vec<String>,
    /// What the server expects of the machine, by name (`browser`):
    /// each adds its Debian packages to `apt`, its variables to `env` and
    /// `install_env` where the entry sets none, and its files to the
    /// layer (`crate::needs`).
    #[serde(default)]
    pub needs: Vec<crate::needs::Need>,
    /// The directories (or files) the server is meant to reach: its
    /// boundary, which a security audit judges reaches against
    /// (docs/security-audit.md). Default: the workspace and the server's
    /// own layer.
    #[serde(default)]
    pub roots: Vec<String>,
    /// Tools an audit calls, with their arguments; when given, only these.
    #[serde(default)]
    pub audit_calls: BTreeMap<String, toml::Table>,
    #[serde(default)]
    pub notes: Option<String>,
}

/// How a client talks to a server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    #[default]
    Stdio,
    /// Streamable HTTP.
    Http,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    servers: BTreeMap<String, Entry>,
}

#[derive(Debug, Clone)]
pub struct Catalogue {
    /// Where it came from, for messages.
    pub source: String,
    pub servers: BTreeMap<String, Entry>,
    /// Where each entry is written: the file and the line of its
    /// `[servers.NAME]` table (a finding's location in SARIF).
    pub origins: BTreeMap<String, Origin>,
}

/// A catalogue entry's place in its file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The file as given, or the built-in catalogue's path in the
    /// repository.
    pub file: String,
    /// 1-based.
    pub line: usize,
}

/// The built-in catalogue's path in the repository.
pub const BUILT_IN_PATH: &str = "guest-image/catalogue.toml";

/// The line (1-based) of each `[servers.NAME]` table in `text`.
/// The directory a catalogue's relative `source` files are in, absolute:
/// `cat.toml` given as is has an empty parent, and a file name alone
/// would reach npm and pip as `file://NAME`, which they cannot resolve.
fn base_dir(catalogue: &Path) -> PathBuf {
    std::path::absolute(catalogue)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."))
}

fn origins(text: &str, file: &str) -> BTreeMap<String, Origin> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let name = l.trim().strip_prefix("[servers.")?.strip_suffix(']')?;
            let name = name.trim_matches('"');
            Some((
                name.to_string(),
                Origin {
                    file: file.to_string(),
                    line: i + 1,
                },
            ))
        })
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogueError {
    #[error("Cannot read the catalogue {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("The catalogue {source_name} is not valid TOML of the expected shape: {message}")]
    Parse {
        source_name: String,
        message: String,
    },
    #[error("The catalogue {source_name}: server '{server}': {field}: {why}")]
    Field {
        source_name: String,
        server: String,
        field: &'static str,
        why: String,
    },
    #[error("No server '{name}' in the catalogue {source_name}; it has: {known}")]
    Unknown {
        name: String,
        source_name: String,
        known: String,
    },
}

/// A server's name in a catalogue (and so in an audit, its journal and
/// the files named after it): lowercase letters, digits and '-', at most
/// 64 characters, so never a path.
pub fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn is_env_key(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// `${KEY}` references in a value.
fn placeholders(value: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(i) = rest.find("${") {
        match rest[i + 2..].find('}') {
            Some(j) => {
                out.push(&rest[i + 2..i + 2 + j]);
                rest = &rest[i + 3 + j..];
            }
            None => {
                out.push("");
                break;
            }
        }
    }
    out
}

impl Catalogue {
    pub fn built_in() -> Self {
        let mut c = Self::parse(BUILT_IN, "(built in)").expect("the built-in catalogue is valid");
        c.origins = origins(BUILT_IN, BUILT_IN_PATH);
        c
    }

    /// The catalogue a command uses: the built-in one; with `user`, the
    /// built-in one and the user's entries on top (an entry of the same
    /// name replaces the built-in one), or, with `only`, the user's
    /// alone.
    pub fn choose(user: Option<&Path>, only: bool) -> Result<Self, CatalogueError> {
        let Some(path) = user else {
            return Ok(Self::built_in());
        };
        let theirs = Self::load(path)?;
        if only {
            return Ok(theirs);
        }
        let mut all = Self::built_in();
        all.source = format!("(built in) + {}", theirs.source);
        all.servers.extend(theirs.servers);
        all.origins.extend(theirs.origins);
        Ok(all)
    }

    pub fn load(path: &Path) -> Result<Self, CatalogueError> {
        let text = std::fs::read_to_string(path).map_err(|source| CatalogueError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut cat = Self::parse(&text, &path.display().to_string())?;
        let dir = base_dir(path);
        for e in cat.servers.values_mut() {
            if let Some(src) = e.source.as_mut().filter(|s| s.is_relative()) {
                *src = dir.join(&*src);
            }
        }
        Ok(cat)
    }

    pub fn parse(text: &str, source_name: &str) -> Result<Self, CatalogueError> {
        let mut file: File = toml::from_str(text).map_err(|e| CatalogueError::Parse {
            source_name: source_name.to_string(),
            message: e.to_string().replace('\n', " ").trim().to_string(),
        })?;
        for e in file.servers.values_mut() {
            e.add_needs();
        }
        let cat = Catalogue {
            source: source_name.to_string(),
            servers: file.servers,
            origins: origins(text, source_name),
        };
        cat.validate()?;
        Ok(cat)
    }

    fn validate(&self) -> Result<(), CatalogueError> {
        for (name, e) in &self.servers {
            let checked = match is_name(name) {
                false => Err(("name", "use lowercase letters, digits and '-'".into())),
                true => e
                    .check_package()
                    .and_then(|()| e.check_install())
                    .and_then(|()| e.check_run()),
            };
            checked.map_err(|(field, why)| CatalogueError::Field {
                source_name: self.source.clone(),
                server: name.clone(),
                field,
                why,
            })?;
        }
        Ok(())
    }

    pub fn get(&self, name: &str) -> Result<&Entry, CatalogueError> {
        self.servers
            .get(name)
            .ok_or_else(|| CatalogueError::Unknown {
                name: name.to_string(),
                source_name: self.source.clone(),
                known: self.servers.keys().cloned().collect::<Vec<_>>().join(", "),
            })
    }
}

/// How many dummy credential files an entry may name, and how long each
/// may be: a client JSON or a key is a few hundred bytes.
const MAX_DUMMY_FILES: usize = 8;
const MAX_DUMMY_BYTES: usize = 16 << 10;

/// Guest directories a file in a layer cannot be put in: filesystems
/// mounted over the root at start (it would be hidden), the workspace
/// (the user's), and the layers' own packages.
const NOT_FOR_DUMMIES: &[&str] = &[
    "/workspace",
    "/tmp",
    "/run",
    "/dev",
    "/proc",
    "/sys",
    "/opt/mcp",
];

/// The home of the user servers run as (`mcpvm_protocol::ports::SERVER_USER`;
/// a test in `mcpvm` keeps the two the same).
pub const SERVER_HOME: &str = "/home/mcp";

/// A dummy credential file: an absolute guest path of plain components
/// in the home of the user the server runs as (`home`), outside
/// [`NOT_FOR_DUMMIES`], and a bounded text marked as a dummy.
fn check_dummy_file(path: &str, text: &str, home: &str) -> Result<(), String> {
    let plain = path.starts_with('/')
        && path.len() <= 256
        && path[1..]
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\0'));
    if !plain {
        return Err(format!(
            "'{}' is not an absolute guest path of plain names (no '.', '..' or '//', at most 256 bytes)",
            path.escape_default()
        ));
    }
    if let Some(d) = NOT_FOR_DUMMIES
        .iter()
        .find(|d| path == **d || path.starts_with(&format!("{d}/")))
    {
        return Err(format!(
            "'{path}' is under {d}, which the guest mounts over or keeps for itself: put it under {home}/ and point the server at it"
        ));
    }
    // Only the home is handed to the server's user before it starts: a
    // file elsewhere stays root's, private, and unreadable to the server.
    if !path.starts_with(&format!("{home}/")) {
        return Err(format!(
            "'{path}' is outside {home}, the home of the user the server runs as, who could not read it: put it under {home}/ (or set root = true, whose home is /root)"
        ));
    }
    if text.len() > MAX_DUMMY_BYTES {
        return Err(format!("'{path}': at most {MAX_DUMMY_BYTES} bytes"));
    }
    if !text.contains("mcpvm-dummy") {
        return Err(format!(
            "'{path}' must say mcpvm-dummy in its text (as dummy values do), so that nobody takes it for a secret"
        ));
    }
    Ok(())
}

/// Writes an entry's dummy credential files under `root` (the layer's
/// staging root), owner-readable only as real ones are, never through a
/// link a package left there (`needs::write_in_layer`).
pub fn write_dummy_files(
    files: &BTreeMap<String, String>,
    root: &std::path::Path,
) -> std::io::Result<()> {
    for (path, text) in files {
        crate::needs::write_in_layer(root, path, text, 0o600)?;
    }
    Ok(())
}

/// What is wrong with an entry: the field, and why.
type FieldError = (&'static str, String);

impl Entry {
    /// `needs` spelt out: their packages, variables and (at build) files.
    fn add_needs(&mut self) {
        self.needs.sort();
        self.needs.dedup();
        for need in self.needs.clone() {
            for p in need.apt() {
                if !self.apt.iter().any(|a| a == p) {
                    self.apt.push(p.to_string());
                }
            }
            for (k, v) in need.env() {
                self.env
                    .entry(k.to_string())
                    .or_insert_with(|| v.to_string());
            }
            for (k, v) in need.install_env() {
                self.install_env
                    .entry(k.to_string())
                    .or_insert_with(|| v.to_string());
            }
            if let Some(line) = need.setup() {
                // Parsing a written-out entry again adds nothing twice.
                self.setup = Some(match self.setup.take() {
                    Some(own) if own.starts_with(line) => own,
                    Some(own) => format!("{line}; {own}"),
                    None => line.to_string(),
                });
            }
        }
    }

    /// Whether a program a need of its brings looks hosts up on its own.
    pub fn background_lookups(&self) -> bool {
        self.needs.iter().any(|n| n.background_lookups())
    }

    /// The memory its VM gets at least (its needs'; 0 without any).
    pub fn min_mem_mib(&self) -> u64 {
        self.needs.iter().map(|n| n.mem_mib()).max().unwrap_or(0)
    }

    /// Where the workspace is served as a site for it, if a need serves
    /// one (`crate::needs::SITE`).
    pub fn site(&self) -> Option<&'static str> {
        self.needs.iter().find_map(|n| n.site())
    }

    /// What to install: the package, its exact version, where it comes
    /// from, the command it installs, its pins.
    fn check_package(&self) -> Result<(), FieldError> {
        if !self.runtime.is_name(&self.package) {
            return Err((
                "package",
                format!("'{}' is not {}", self.package, self.runtime.name_grammar()),
            ));
        }
        if !self.runtime.is_exact(&self.version) {
            return Err((
                "version",
                format!(
                    "'{}' is not an exact version ({}; tags such as latest and ranges such as 1 or 1.x are refused)",
                    self.version,
                    self.runtime.version_grammar()
                ),
            ));
        }
        if let Some(src) = &self.source {
            let (ext, kind) = match self.runtime {
                Runtime::Python => (
                    ".whl",
                    "a wheel (.whl): an sdist would run its code on the host",
                ),
                Runtime::Cargo => (".crate", "`cargo package`'s .crate"),
                _ => (".tgz", "`npm pack`'s .tgz"),
            };
            if !src.to_string_lossy().ends_with(ext) {
                return Err(("source", format!("'{}' is not {kind}", src.display())));
            }
        }
        if self.command.contains('/') || self.command.contains(char::is_whitespace) {
            return Err((
                "command",
                format!("'{}' must be the package's executable name", self.command),
            ));
        }
        for pin in &self.pins {
            if self.runtime == Runtime::Cargo {
                return Err((
                    "pins",
                    "a crate's tree is its Cargo.lock; pins apply to npm and PyPI".into(),
                ));
            }
            let (name, version) = match self.runtime {
                Runtime::Python => pin.split_once("==").unwrap_or(("", "")),
                _ => pin.rsplit_once('@').unwrap_or(("", "")),
            };
            if !self.runtime.is_name(name) || !self.runtime.is_exact(version) {
                let form = match self.runtime {
                    Runtime::Python => "name==1.2.3, a PEP 508 name and a PEP 440 release",
                    _ => "name@1.2.3, an npm name and a full semver version",
                };
                return Err(("pins", format!("'{pin}' is not an exact pin ({form})")));
            }
        }
        Ok(())
    }

    /// How it installs: its environment, registry date, scripts, extras
    /// and Debian packages.
    fn check_install(&self) -> Result<(), FieldError> {
        for k in self.install_env.keys() {
            if !is_env_key(k) {
                return Err((
                    "install_env",
                    format!("'{k}' is not an environment key (A-Z, 0-9, _)"),
                ));
            }
        }
        if self.as_released && (self.source.is_some() || self.runtime == Runtime::Cargo) {
            return Err((
                "as_released",
                "applies to npm and PyPI packages from their registry (a local file or a crate has no registry date to resolve by)".into(),
            ));
        }
        if self.ignore_scripts && !self.runtime.is_node() {
            return Err((
                "ignore_scripts",
                "applies to node packages only (pip runs no install scripts of its own)".into(),
            ));
        }
        if !self.extras.is_empty() && self.runtime != Runtime::Python {
            return Err(("extras", "applies to python packages only".into()));
        }
        if !self.sdists.is_empty() && self.as_released {
            return Err((
                "sdists",
                "cannot be built for an as-released resolution yet (uv resolves wheels only): pin the tree with `pins` instead".into(),
            ));
        }
        for pin in &self.sdists {
            if self.runtime != Runtime::Python {
                return Err(("sdists", "applies to python packages only".into()));
            }
            let (name, version) = pin.split_once("==").unwrap_or(("", ""));
            if !self.runtime.is_name(name) || !self.runtime.is_exact(version) {
                return Err((
                    "sdists",
                    format!("'{pin}' is not an exact pin (name==1.2.3, a PEP 508 name and a PEP 440 release)"),
                ));
            }
        }
        for x in &self.extras {
            let ok = !x.is_empty()
                && x.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
            if !ok {
                return Err(("extras", format!("'{x}' is not an extra's name")));
            }
        }
        for (field, list) in [("apt", &self.apt), ("build_apt", &self.build_apt)] {
            for p in list {
                // Debian policy: lowercase letters, digits, + - . ; two or more.
                let ok = p.len() >= 2
                    && p.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && p.bytes().all(|b| {
                        b.is_ascii_lowercase() || b.is_ascii_digit() || b"+-.".contains(&b)
                    });
                if !ok {
                    return Err((field, format!("'{p}' is not a Debian package name")));
                }
            }
        }
        if !self.build_apt.is_empty() && !self.runtime.is_node() {
            return Err((
                "build_apt",
                "applies to node packages (native modules built by node-gyp in the install microVM)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// How it runs: its transport, network rules, roots, credentials and
    /// environment.
    fn check_run(&self) -> Result<(), FieldError> {
        match (self.transport, self.port) {
            (Transport::Http, None) | (Transport::Http, Some(0)) => {
                return Err((
                    "port",
                    "an http server needs the guest port it listens on".into(),
                ))
            }
            (Transport::Stdio, Some(_)) => {
                return Err((
                    "port",
                    "only an http server (transport = \"http\") has a port".into(),
                ))
            }
            _ => {}
        }
        for r in &self.network {
            withholding::network::Rule::parse(r).map_err(|why| ("network", why))?;
        }
        for r in &self.roots {
            if !r.starts_with('/') || r.split('/').any(|c| c == "." || c == "..") {
                return Err((
                    "roots",
                    format!("'{r}' is not an absolute guest path without '.' or '..'"),
                ));
            }
        }
        if self.dummy_files.len() > MAX_DUMMY_FILES {
            return Err(("dummy_files", format!("at most {MAX_DUMMY_FILES} files")));
        }
        for (path, text) in &self.dummy_files {
            let home = if self.root { "/root" } else { SERVER_HOME };
            check_dummy_file(path, text, home).map_err(|why| ("dummy_files", why))?;
        }
        for k in &self.credentials {
            if !is_env_key(k) {
                return Err((
                    "credentials",
                    format!("'{k}' is not an environment key (A-Z, 0-9, _)"),
                ));
            }
        }
        for (k, v) in &self.env {
            if !is_env_key(k) {
                return Err((
                    "env",
                    format!("'{k}' is not an environment key (A-Z, 0-9, _)"),
                ));
            }
            for p in placeholders(v) {
                if !self.credentials.iter().any(|c| c == p) {
                    return Err((
                        "env",
                        format!("{k} uses ${{{p}}}, which is not listed in credentials"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Where the server's layer puts it in the guest.
    pub fn dir(name: &str) -> String {
        format!("/opt/mcp/{name}")
    }

    /// The server's boundary: its declared roots, or `workspace` and its
    /// own layer.
    pub fn roots(&self, name: &str, workspace: &str) -> Vec<String> {
        match self.roots.is_empty() {
            true => vec![workspace.to_string(), Self::dir(name)],
            false => self.roots.clone(),
        }
    }

    /// The guest command line: the executable in its layer and the args.
    /// (The setup line, if any, runs before it: the agent runs it outside
    /// the server's withholding policy.)
    pub fn argv(&self, name: &str) -> Vec<String> {
        self.argv_built(name, None)
    }

    /// [`Entry::argv`], where an entry that names no command runs
    /// `built`: the one its layer's build chose (the store's record).
    pub fn argv_built(&self, name: &str, built: Option<&str>) -> Vec<String> {
        let dir = Self::dir(name);
        let command = match self.command.is_empty() {
            true => built.unwrap_or_default(),
            false => &self.command,
        };
        let exe = match self.runtime {
            Runtime::Python | Runtime::Cargo => format!("{dir}/bin/{command}"),
            _ => format!("{dir}/node_modules/.bin/{command}"),
        };
        let mut argv = vec![exe];
        argv.extend(self.args.iter().cloned());
        argv
    }

    /// What the installation itself needs to run, as a venv or a node
    /// prefix would hold it without a variable: the layer's packages on
    /// PYTHONPATH, its own node first on PATH. Not the environment a user
    /// gives a server: a profile that clears that keeps this.
    pub fn install_environment(&self, name: &str) -> Vec<(String, String)> {
        let mut env = Vec::new();
        if self.runtime == Runtime::Python {
            env.push(("PYTHONPATH".to_string(), Self::dir(name)));
        }
        // Its own node first: `#!/usr/bin/env node` and the server's own
        // `node` children find it, not the image's.
        if self.runtime.own_node().is_some() {
            env.push((
                "PATH".to_string(),
                format!(
                    "{}/{OWN_NODE}/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
                    Self::dir(name)
                ),
            ));
        }
        env
    }

    /// The guest environment, with credentials filled from `lookup`;
    /// Err names the first credential that is missing.
    pub fn environment(
        &self,
        name: &str,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<(String, String)>, String> {
        let mut env = self.install_environment(name);
        env.push(("HOME".to_string(), "/tmp".to_string()));
        for (k, v) in &self.env {
            let mut value = v.clone();
            for p in placeholders(v) {
                let Some(secret) = lookup(p) else {
                    return Err(p.to_string());
                };
                value = value.replace(&format!("${{{p}}}"), &secret);
            }
            env.push((k.clone(), value));
        }
        Ok(env)
    }
}

#[cfg(test)]
mod tests {

    /// A catalogue named by its file name alone (`--catalogue cat.toml`)
    /// still gives its sources an absolute directory.
    #[test]
    fn a_catalogue_given_by_name_alone_has_an_absolute_directory() {
        let here = std::env::current_dir().unwrap();
        let dir = super::base_dir(std::path::Path::new("cat.toml"));
        assert_eq!(dir, here);
        assert_eq!(
            super::base_dir(std::path::Path::new("sub/cat.toml")),
            here.join("sub")
        );
    }

    /// Each entry knows the line of its table, in the built-in catalogue
    /// (by its repository path) and in a user's, which wins on a name
    /// both have.
    #[test]
    fn every_entry_knows_where_it_is_written() {
        let built_in = Catalogue::built_in();
        for name in built_in.servers.keys() {
            let o = &built_in.origins[name];
            assert_eq!(o.file, BUILT_IN_PATH);
            let line = BUILT_IN.lines().nth(o.line - 1).unwrap();
            assert_eq!(line.trim(), format!("[servers.{name}]"));
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mine.toml");
        std::fs::write(
            &path,
            "# mine\n\n[servers.memory]\npackage = \"@modelcontextprotocol/server-memory\"\nversion = \"2026.8.31\"\nruntime = \"node\"\ncommand = \"mcp-server-memory\"\n",
        )
        .unwrap();
        let both = Catalogue::choose(Some(&path), false).unwrap();
        assert_eq!(
            both.origins["memory"],
            Origin {
                file: path.display().to_string(),
                line: 3
            }
        );
        assert_eq!(both.origins["time"].file, BUILT_IN_PATH);
    }

    /// The popular-servers corpus: all 60 rows, exact versions, and no
    /// credential that could be taken for a real one.
    #[test]
    fn the_corpus_catalogue_pins_every_server_and_its_keys_are_dummies() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus/popular.toml");
        let c = Catalogue::load(&path).unwrap();
        assert_eq!(c.servers.len(), 60);
        for (name, e) in &c.servers {
            assert!(
                e.version
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '.'),
                "{name}: {} is not an exact version",
                e.version
            );
            assert!(
                e.credentials.is_empty(),
                "{name}: the corpus runs without the user's keys"
            );
            for (k, v) in &e.env {
                let secret = ["TOKEN", "KEY", "SECRET"].iter().any(|w| k.contains(w));
                assert!(!secret || v.contains("mcpvm-dummy"), "{name}: {k}={v}");
            }
        }
    }

    use super::*;

    const ONE: &str = r#"
[servers.memory]
package = "@modelcontextprotocol/server-memory"
version = "2026.8.31"
runtime = "node"
command = "mcp-server-memory"
env = { MEMORY_FILE_PATH = "/tmp/m.jsonl" }
"#;

    const PY: &str = r#"
[servers.time]
package = "mcp-server-time"
version = "2026.10.19"
runtime = "python"
command = "mcp-server-time"
"#;

    #[test]
    fn the_built_in_catalogue_is_valid_and_honest_about_needs() {
        let c = Catalogue::built_in();
        for name in [
            "filesystem",
            "memory",
            "everything",
            "sequential-thinking",
            "time",
            "git",
            "sqlite",
            "markitdown",
        ] {
            let e = c.get(name).unwrap();
            assert!(
                e.network.is_empty() && e.credentials.is_empty(),
                "{name} must run offline"
            );
        }
        let gh = c.get("github").unwrap();
        assert!(gh.network == ["api.github.com:443"] && gh.credentials == ["GITHUB_TOKEN"]);
    }

    /// `needs = ["browser"]` spelt out: Chromium and fonts in the layer,
    /// the browser's path where each library looks, no browser download
    /// at install; what the entry sets itself wins; a need it does not
    /// know is refused with the field named.
    #[test]
    fn a_need_adds_its_packages_and_variables_and_the_entry_wins() {
        let c = Catalogue::parse(
            r#"
[servers.pptr]
package = "@modelcontextprotocol/server-puppeteer"
version = "2025.5.12"
runtime = "node"
command = "mcp-server-puppeteer"
apt = ["ripgrep", "chromium"]
needs = ["browser", "browser"]
env = { CHROME_PATH = "/opt/other" }
setup = "echo ready >&2"
"#,
            "t",
        )
        .unwrap();
        let e = c.get("pptr").unwrap();
        assert_eq!(e.needs, [crate::needs::Need::Browser]);
        assert_eq!(
            e.apt,
            [
                "ripgrep",
                "chromium",
                "fonts-liberation",
                "fonts-dejavu-core"
            ]
        );
        assert_eq!(e.env["PUPPETEER_EXECUTABLE_PATH"], "/usr/bin/chromium");
        assert_eq!(e.env["CHROME_PATH"], "/opt/other");
        assert_eq!(e.install_env["PUPPETEER_SKIP_DOWNLOAD"], "1");
        // The workspace served as a site, before the entry's own setup.
        assert_eq!(e.site(), Some("http://127.0.0.1:8080"));
        let setup = e.setup.as_deref().unwrap();
        assert!(setup.starts_with("[ -d /workspace ]"), "{setup}");
        assert!(setup.ends_with("; echo ready >&2"), "{setup}");
        let mut again = e.clone();
        again.add_needs();
        assert_eq!(&again, e, "spelt out once");
        // The need's launcher file is part of the layer's key.
        let mut without = e.clone();
        without.needs.clear();
        assert_ne!(
            crate::key::layer_key("pptr", e, "rt"),
            crate::key::layer_key("pptr", &without, "rt")
        );
        let err = Catalogue::parse(
            "[servers.x]\npackage = \"x\"\nversion = \"1.0.0\"\nruntime = \"node\"\ncommand = \"x\"\nneeds = [\"gpu\"]\n",
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("needs") || err.contains("gpu"), "{err}");
    }

    #[test]
    fn dummy_credential_files_go_into_the_layer_marked_and_bounded() {
        let entry = |files: &str| {
            format!(
                "[servers.gmail]\npackage = \"x\"\nversion = \"1.0.0\"\nruntime = \"node\"\ncommand = \"x\"\ndummy_files = {{ {files} }}\n"
            )
        };
        let c = Catalogue::parse(
            &entry(r#""/home/mcp/.gmail-mcp/gcp-oauth.keys.json" = '{"installed": {"client_id": "mcpvm-dummy-client"}}'"#),
            "t",
        )
        .unwrap();
        let e = c.get("gmail").unwrap();
        let dir = tempfile::tempdir().unwrap();
        write_dummy_files(&e.dummy_files, dir.path()).unwrap();
        let p = dir.path().join("home/mcp/.gmail-mcp/gcp-oauth.keys.json");
        assert!(std::fs::read_to_string(&p)
            .unwrap()
            .contains("mcpvm-dummy-client"));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // Part of the layer's key.
        let mut without = e.clone();
        without.dummy_files.clear();
        assert_ne!(
            crate::key::layer_key("gmail", e, "rt"),
            crate::key::layer_key("gmail", &without, "rt")
        );
        for (files, says) in [
            (r#""/home/mcp/key.json" = "real-looking""#, "mcpvm-dummy"),
            (r#""root/key.json" = "mcpvm-dummy""#, "absolute"),
            (
                r#""/home/mcp/../etc/passwd" = "mcpvm-dummy""#,
                "plain names",
            ),
            (r#""/home/mcp//key" = "mcpvm-dummy""#, "plain names"),
            // The server's user could not read them there.
            (
                r#""/etc/app/key.json" = "mcpvm-dummy""#,
                "outside /home/mcp",
            ),
            (r#""/root/key.json" = "mcpvm-dummy""#, "outside /home/mcp"),
            (r#""/tmp/key.json" = "mcpvm-dummy""#, "mounts over"),
            (r#""/opt/mcp/gmail/x" = "mcpvm-dummy""#, "under /opt/mcp"),
        ] {
            let err = Catalogue::parse(&entry(files), "t")
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("dummy_files") && err.contains(says),
                "{files}: {err}"
            );
        }
        let big = format!(
            r#""/home/mcp/k" = "mcpvm-dummy{}""#,
            "x".repeat(MAX_DUMMY_BYTES)
        );
        let err = Catalogue::parse(&entry(&big), "t").unwrap_err().to_string();
        assert!(err.contains("at most"), "{err}");
        // An entry that runs as root has /root for its home.
        let rooted = entry(r#""/root/key.json" = "mcpvm-dummy""#)
            .replace("dummy_files", "root = true\ndummy_files");
        assert!(
            Catalogue::parse(&rooted, "t")
                .unwrap()
                .get("gmail")
                .unwrap()
                .root
        );
    }

    #[test]
    fn argv_and_environment_per_runtime() {
        let c = Catalogue::parse(ONE, "t").unwrap();
        let e = c.get("memory").unwrap();
        assert_eq!(
            e.argv("memory"),
            ["/opt/mcp/memory/node_modules/.bin/mcp-server-memory"]
        );
        let env = e.environment("memory", |_| None).unwrap();
        assert!(env.contains(&("MEMORY_FILE_PATH".into(), "/tmp/m.jsonl".into())));
        let built_in = Catalogue::built_in();
        let git = built_in.get("git").unwrap();
        let argv = git.argv("git");
        assert_eq!(argv[0], "/opt/mcp/git/bin/mcp-server-git");
        assert!(git.setup.as_deref().unwrap().contains("git init"));
        let env = git.environment("git", |_| None).unwrap();
        assert!(env.contains(&("PYTHONPATH".into(), "/opt/mcp/git".into())));
        // No command: the one the build chose, from the store's record;
        // a command given wins over it.
        let own =
            Catalogue::parse(&ONE.replace("command = \"mcp-server-memory\"", ""), "t").unwrap();
        let e = own.get("memory").unwrap();
        assert!(e.command.is_empty());
        assert_eq!(
            e.argv_built("memory", Some("memory-bin")),
            ["/opt/mcp/memory/node_modules/.bin/memory-bin"]
        );
        let given = c.get("memory").unwrap();
        assert_eq!(
            given.argv_built("memory", Some("memory-bin"))[0],
            "/opt/mcp/memory/node_modules/.bin/mcp-server-memory"
        );
    }

    #[test]
    fn a_node_of_its_own_comes_first_on_the_path() {
        let c = Catalogue::parse(
            &ONE.replace("runtime = \"node\"", "runtime = \"node22\""),
            "t",
        )
        .unwrap();
        let e = c.get("memory").unwrap();
        assert_eq!(e.runtime.own_node(), Some("22"));
        assert_eq!(
            e.argv("memory"),
            ["/opt/mcp/memory/node_modules/.bin/mcp-server-memory"]
        );
        let env = e.environment("memory", |_| None).unwrap();
        let path = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str());
        assert!(
            path.is_some_and(|p| p.starts_with("/opt/mcp/memory/.mcpvm-node/bin:")),
            "{env:?}"
        );
        let image = Catalogue::parse(ONE, "t").unwrap();
        let e = image.get("memory").unwrap();
        assert!(e.runtime.own_node().is_none());
        assert!(!e
            .environment("memory", |_| None)
            .unwrap()
            .iter()
            .any(|(k, _)| k == "PATH"));
        assert!(Catalogue::parse(
            &ONE.replace("runtime = \"node\"", "runtime = \"node19\""),
            "t"
        )
        .unwrap_err()
        .to_string()
        .contains("node19"));
    }

    #[test]
    fn a_server_s_boundary_is_declared_or_its_workspace_and_layer() {
        let c = Catalogue::parse(ONE, "t").unwrap();
        assert_eq!(
            c.get("memory").unwrap().roots("memory", "/workspace"),
            ["/workspace", "/opt/mcp/memory"]
        );
        let git = Catalogue::built_in();
        assert_eq!(
            git.get("git").unwrap().roots("git", "/workspace"),
            ["/workspace/repo"]
        );
    }

    #[test]
    fn credentials_fill_placeholders_or_name_what_is_missing() {
        let c = Catalogue::built_in();
        let gh = c.get("github").unwrap();
        assert_eq!(
            gh.environment("github", |_| None).unwrap_err(),
            "GITHUB_TOKEN"
        );
        let env = gh
            .environment("github", |k| {
                (k == "GITHUB_TOKEN").then(|| "t0k".to_string())
            })
            .unwrap();
        assert!(env.contains(&("GITHUB_PERSONAL_ACCESS_TOKEN".into(), "t0k".into())));
    }

    #[test]
    fn every_bad_field_is_named() {
        let cases = [
            (
                ONE.replace("version = \"2026.8.31\"", "version = \"^1.0\""),
                "version",
            ),
            (
                ONE.replace("runtime = \"node\"", "runtime = \"ruby\""),
                "runtime",
            ),
            (ONE.replace("servers.memory", "servers.Memory"), "name"),
            (
                ONE.replace("command = \"mcp-server-memory\"", "command = \"bin/x\""),
                "command",
            ),
            (
                ONE.replace("/tmp/m.jsonl", "${SECRET}"),
                "not listed in credentials",
            ),
            (
                ONE.replace("runtime = \"node\"", "runtime = \"node\"\nflavour = 1"),
                "flavour",
            ),
            (ONE.replace("version = \"2026.8.31\"\n", ""), "version"),
            (
                ONE.replace(
                    "runtime = \"node\"",
                    "runtime = \"node\"\nroots = [\"/w/../etc\"]",
                ),
                "roots: '/w/../etc' is not an absolute guest path",
            ),
            (
                ONE.replace(
                    "runtime = \"node\"",
                    "runtime = \"node\"\nroots = [\"data\"]",
                ),
                "roots: 'data' is not an absolute",
            ),
            (
                ONE.replace(
                    "runtime = \"node\"",
                    "runtime = \"node\"\nextras = [\"cli\"]",
                ),
                "extras: applies to python packages only",
            ),
            (
                ONE.replace(
                    "runtime = \"node\"",
                    "runtime = \"node\"\napt = [\"ripgrep; rm\"]",
                ),
                "apt: 'ripgrep; rm' is not a Debian package name",
            ),
            (
                ONE.replace(
                    "runtime = \"node\"",
                    "runtime = \"node\"\nbuild_apt = [\"--force-all\"]",
                ),
                "build_apt: '--force-all' is not a Debian package name",
            ),
            (
                PY.replace(
                    "runtime = \"python\"",
                    "runtime = \"python\"\nbuild_apt = [\"libsecret-1-dev\"]",
                ),
                "build_apt: applies to node packages",
            ),
            (
                PY.replace(
                    "runtime = \"python\"",
                    "runtime = \"python\"\nsdists = [\"proxy_tools\"]",
                ),
                "sdists: 'proxy_tools' is not an exact pin",
            ),
            (
                ONE.replace(
                    "runtime = \"node\"",
                    "runtime = \"node\"\nsdists = [\"proxy_tools==0.1.0\"]",
                ),
                "sdists: applies to python packages only",
            ),
            (
                PY.replace(
                    "runtime = \"python\"",
                    "runtime = \"python\"\nignore_scripts = true",
                ),
                "ignore_scripts: applies to node packages only",
            ),
            (
                ONE.replace(
                    "runtime = \"node\"",
                    "runtime = \"cargo\"\nas_released = true",
                )
                .replace("@modelcontextprotocol/server-memory", "mcp-server-memory"),
                "as_released: applies to npm and PyPI packages from their registry",
            ),
            (
                ONE.replace(
                    "runtime = \"node\"",
                    "runtime = \"node\"\ninstall_env = { \"a b\" = \"1\" }",
                ),
                "install_env: 'a b' is not an environment key",
            ),
            (
                ONE.replace("runtime = \"node\"", "runtime = \"node\"\npins = [\"zod\"]"),
                "not an exact pin (name@1.2.3",
            ),
            // Round 4: names that pip and npm read as their own options,
            // and versions that are tags or ranges.
            (
                PY.replace(
                    "runtime = \"python\"",
                    "runtime = \"python\"\npins = [\"--log=/some/path==1.0\"]",
                ),
                "pins: '--log=/some/path==1.0' is not an exact pin",
            ),
            (
                PY.replace(
                    "runtime = \"python\"",
                    "runtime = \"python\"\npins = [\"--index-url=http://127.0.0.1:9/simple==1.0\"]",
                ),
                "is not an exact pin",
            ),
            (
                PY.replace(
                    "package = \"mcp-server-time\"",
                    "package = \"--index-url=http://127.0.0.1:9/\"",
                ),
                "package: '--index-url=http://127.0.0.1:9/' is not a PyPI package name",
            ),
            (
                ONE.replace(
                    "package = \"@modelcontextprotocol/server-memory\"",
                    "package = \"--registry=x\"",
                ),
                "is not an npm package name",
            ),
            (
                ONE.replace(
                    "runtime = \"node\"",
                    "runtime = \"node\"\npins = [\"zod@latest\"]",
                ),
                "pins: 'zod@latest' is not an exact pin",
            ),
            (
                ONE.replace(
                    "runtime = \"node\"",
                    "runtime = \"node\"\npins = [\"-x@1.0.0\"]",
                ),
                "pins: '-x@1.0.0' is not an exact pin",
            ),
            (
                PY.replace("version = \"2026.10.19\"", "version = \"1.*\""),
                "version: '1.*' is not an exact version",
            ),
        ];
        for v in ["latest", "next", "1", "1.x", "1.2", "^1.0.0"] {
            let text = ONE.replace("version = \"2026.8.31\"", &format!("version = \"{v}\""));
            let e = Catalogue::parse(&text, "cat.toml").unwrap_err().to_string();
            assert!(
                e.contains(&format!("version: '{v}' is not an exact version")),
                "{v}: {e}"
            );
        }
        for (text, needle) in cases {
            let e = Catalogue::parse(&text, "cat.toml").unwrap_err().to_string();
            assert!(
                e.contains(needle) && e.contains("cat.toml"),
                "{needle}: {e}"
            );
            assert!(!e.contains('\n'), "one line: {e}");
        }
        let e = Catalogue::parse(ONE, "t")
            .unwrap()
            .get("nope")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("No server 'nope'") && e.contains("memory"),
            "{e}"
        );
    }

    #[test]
    fn a_users_catalogue_adds_to_the_built_in_one_unless_it_is_the_only_one() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user.toml");
        std::fs::write(
            &user,
            "[servers.fetch]\npackage = \"mcp-server-fetch\"\nversion = \"1.0.0\"\nruntime = \"python\"\ncommand = \"mcp-server-fetch\"\n\n[servers.mine]\npackage = \"my-server\"\nversion = \"0.1.0\"\nruntime = \"node\"\ncommand = \"my-server\"\n",
        )
        .unwrap();
        let added = Catalogue::choose(Some(&user), false).unwrap();
        assert!(
            added.servers.contains_key("memory"),
            "the built-in entries stay"
        );
        assert_eq!(
            added.servers["fetch"].version, "1.0.0",
            "the user's entry replaces the built-in one"
        );
        assert!(added.servers.contains_key("mine"));
        assert!(
            added.source.starts_with("(built in) + "),
            "{}",
            added.source
        );
        let only = Catalogue::choose(Some(&user), true).unwrap();
        assert_eq!(only.servers.keys().collect::<Vec<_>>(), ["fetch", "mine"]);
        assert_eq!(Catalogue::choose(None, false).unwrap().source, "(built in)");
    }

    #[test]
    fn an_http_server_names_its_port_and_only_it_does() {
        let entry = |extra: &str| {
            format!("[servers.s]\npackage = \"p\"\nversion = \"1.0.0\"\nruntime = \"node\"\ncommand = \"s\"\n{extra}")
        };
        let ok = Catalogue::parse(&entry("transport = \"http\"\nport = 3001\n"), "t").unwrap();
        assert_eq!(
            (ok.servers["s"].transport, ok.servers["s"].port),
            (Transport::Http, Some(3001))
        );
        let e = Catalogue::parse(&entry("transport = \"http\"\n"), "t").unwrap_err();
        assert!(e.to_string().contains("needs the guest port"), "{e}");
        let e = Catalogue::parse(&entry("port = 3001\n"), "t").unwrap_err();
        assert!(e.to_string().contains("only an http server"), "{e}");
        assert!(Catalogue::parse(&entry("transport = \"sse\"\n"), "t").is_err());
    }

    #[test]
    fn a_local_source_is_a_package_file_found_beside_the_catalogue() {
        let entry = |runtime: &str, source: &str| {
            format!("[servers.s]\npackage = \"p\"\nversion = \"1.0.0\"\nruntime = \"{runtime}\"\ncommand = \"s\"\nsource = \"{source}\"\n")
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, entry("node", "pkgs/p-1.0.0.tgz")).unwrap();
        let c = Catalogue::load(&path).unwrap();
        assert_eq!(
            c.servers["s"].source.as_deref(),
            Some(dir.path().join("pkgs/p-1.0.0.tgz").as_path())
        );
        std::fs::write(&path, entry("node", "/abs/p.tgz")).unwrap();
        let c = Catalogue::load(&path).unwrap();
        assert_eq!(
            c.servers["s"].source.as_deref(),
            Some(Path::new("/abs/p.tgz"))
        );
        // A python source must be a wheel: building an sdist runs its code.
        let e = Catalogue::parse(&entry("python", "p-1.0.0.tar.gz"), "t").unwrap_err();
        assert!(
            e.to_string().contains("source") && e.to_string().contains("sdist"),
            "{e}"
        );
        let e = Catalogue::parse(&entry("node22", "p.zip"), "t").unwrap_err();
        assert!(e.to_string().contains("npm pack"), "{e}");
        Catalogue::parse(&entry("python", "p-1.0.0-py3-none-any.whl"), "t").unwrap();
    }
}
