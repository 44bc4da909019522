//! `--server NAME`: a catalogued server resolved to what a VM needs: the
//! runtime image, the server's layer, its guest command and environment.

pub mod image;
pub mod package;

use std::path::{Path, PathBuf};

use mcpvm_images::catalogue::{Catalogue, CatalogueError, Entry};
use mcpvm_images::store::{self, Index, StoreError};

#[derive(Default)]
pub struct ServerPlan {
    pub runtime: PathBuf,
    pub layer: PathBuf,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    /// The part of `env` its installation needs to run at all
    /// (`Entry::install_environment`): kept by a profile that clears the
    /// environment, which withholds what a user gives, not the install.
    pub install_env: Vec<(String, String)>,
    /// Its catalogued credentials with their values (from mcpvm's
    /// environment): never printed, recorded or reported.
    pub secrets: Vec<(String, String)>,
    /// A shell line the agent runs before the server, outside its policy.
    pub setup: Option<String>,
    /// It runs as root (its catalogue entry says so).
    pub root: bool,
    /// What it may reach: the catalogue's `HOST[:PORT]` rules.
    pub network: Vec<String>,
    /// It speaks Streamable HTTP on this guest port (`transport = "http"`).
    pub http_port: Option<u16>,
    /// The memory its VM gets at least, from its needs (a browser).
    pub min_mem_mib: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Catalogue(#[from] CatalogueError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("Server '{server}' needs the credential {key}: set it in the environment")]
    Credential { server: String, key: String },
    #[error("Give either --server or a command, not both")]
    Both,
}

fn load(catalogue: &CatalogueArg) -> Result<Catalogue, CatalogueError> {
    Catalogue::choose(catalogue.path.as_deref(), catalogue.only)
}

/// `--catalogue FILE` (added to the built-in catalogue) and
/// `--catalogue-only` (FILE alone): declared once, flattened into every
/// command that takes them (`run`/`probe`, `image build|list`, `audit`).
#[derive(clap::Args, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CatalogueArg {
    /// Server catalogue (TOML), added to the built-in one (its entries
    /// replace built-in ones of the same name).
    #[arg(id = "catalogue", long = "catalogue", value_name = "CATALOGUE")]
    pub path: Option<PathBuf>,
    /// Use --catalogue's servers alone, without the built-in ones.
    #[arg(id = "catalogue_only", long = "catalogue-only", requires = "catalogue")]
    pub only: bool,
}

/// A server named by `--server` or `--package`, as the store has it.
pub struct Stored {
    /// What it is known by: the catalogue name, or the package spec.
    pub key: String,
    pub entry: Entry,
    /// Its layer's record in the store, once built.
    pub record: Option<mcpvm_images::store::LayerRecord>,
}

/// The server `server` (a catalogue name) or `package` (a spec) names,
/// with its store record from `images` (the default store when None);
/// None for a bare command or a name nothing knows.
pub fn stored(
    server: Option<&str>,
    package: Option<&str>,
    catalogue: &CatalogueArg,
    images: &Option<PathBuf>,
) -> Option<Stored> {
    let (key, name, entry) = match (server, package) {
        (Some(name), _) => {
            let e = load(catalogue).ok()?.get(name).ok()?.clone();
            (name.to_string(), name.to_string(), e)
        }
        (None, Some(spec)) => {
            let (name, e) = mcpvm_images::package::entry(spec).ok()?;
            (spec.to_string(), name, e)
        }
        (None, None) => return None,
    };
    let dir = images.clone().unwrap_or_else(store::default_dir);
    let record = Index::load(&dir)
        .ok()
        .and_then(|mut i| i.servers.remove(&name));
    Some(Stored { key, entry, record })
}

/// What the server is meant to reach (guest paths): its catalogue
/// entry's `roots`, or the workspace and its own layer.
pub fn roots(name: &str, catalogue: &CatalogueArg) -> Result<Vec<String>, ServerError> {
    let catalogue = load(catalogue)?;
    Ok(catalogue
        .get(name)?
        .roots(name, mcpvm_protocol::ports::WORKSPACE_DIR))
}

/// Where the guest serves the workspace over HTTP for this server, if a
/// need of its serves it (`needs = ["browser"]`), and whether a program
/// a need brings looks hosts up on its own.
pub fn site_and_background(
    name: &str,
    catalogue: &CatalogueArg,
) -> Result<(Option<String>, bool), ServerError> {
    let catalogue = load(catalogue)?;
    let entry = catalogue.get(name)?;
    Ok((entry.site().map(str::to_string), entry.background_lookups()))
}

/// Where the server's catalogue entry is written, and the catalogue's
/// name for when it is not known.
pub fn origin(
    name: &str,
    catalogue: &CatalogueArg,
) -> Result<(Option<mcpvm_images::catalogue::Origin>, String), ServerError> {
    let catalogue = load(catalogue)?;
    Ok((catalogue.origins.get(name).cloned(), catalogue.source))
}

pub fn plan(
    name: &str,
    catalogue: &CatalogueArg,
    images: &Option<PathBuf>,
) -> Result<ServerPlan, ServerError> {
    let catalogue = load(catalogue)?;
    let entry = catalogue.get(name)?;
    let dir = images.clone().unwrap_or_else(store::default_dir);
    plan_entry(name, entry, &dir)
}

/// [`plan`] for an entry in hand: its built layer in the store `dir`.
pub fn plan_entry(name: &str, entry: &Entry, dir: &Path) -> Result<ServerPlan, ServerError> {
    let index = Index::load(dir)?;
    let key = index.key_of(name, entry);
    let (runtime, layer) = index.resolve(dir, name, &key)?;
    // An entry without a command runs the one its build chose.
    let built = index.servers.get(name).and_then(|r| r.command.as_deref());
    let env = entry
        .environment(name, |k| std::env::var(k).ok())
        .map_err(|key| ServerError::Credential {
            server: name.to_string(),
            key,
        })?;
    let secrets = entry
        .credentials
        .iter()
        .filter_map(|k| Some((k.clone(), std::env::var(k).ok()?)))
        .collect();
    Ok(ServerPlan {
        runtime,
        layer,
        argv: entry.argv_built(name, built),
        env,
        install_env: entry.install_environment(name),
        secrets,
        setup: entry.setup.clone(),
        root: entry.root,
        network: entry.network.clone(),
        http_port: match entry.transport {
            mcpvm_images::catalogue::Transport::Http => entry.port,
            mcpvm_images::catalogue::Transport::Stdio => None,
        },
        min_mem_mib: entry.min_mem_mib(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dummy files are checked against the home the guest gives the
    /// server's user.
    #[test]
    fn the_catalogue_knows_the_guest_users_home() {
        assert_eq!(
            mcpvm_images::catalogue::SERVER_HOME,
            mcpvm_protocol::ports::SERVER_USER.home
        );
    }

    /// A catalogued server's store record comes back with what its
    /// install scripts did; a name the catalogue lacks, or a bare
    /// command, has none.
    #[test]
    fn a_stored_server_brings_its_install_record() {
        let dir = tempfile::tempdir().unwrap();
        let catalogue = dir.path().join("c.toml");
        std::fs::write(
            &catalogue,
            "[servers.s]\npackage = \"p\"\nversion = \"1.0.0\"\nruntime = \"node\"\ncommand = \"p\"\n",
        )
        .unwrap();
        let record = mcpvm_images::build::InstallRecord {
            calls: 7,
            ..Default::default()
        };
        let layer = store::LayerRecord {
            layer: "layer-s-k.erofs".into(),
            key: "k".into(),
            package: "p".into(),
            version: "1.0.0".into(),
            bytes: 1,
            lock: None,
            released_on: None,
            command: None,
            toolchain: None,
            install: Some(record.clone()),
        };
        Index {
            schema: 1,
            runtime: None,
            servers: [("s".to_string(), layer)].into(),
            failed: Default::default(),
        }
        .save(dir.path())
        .unwrap();
        let arg = CatalogueArg {
            path: Some(catalogue),
            only: true,
        };
        let images = Some(dir.path().to_path_buf());
        let s = stored(Some("s"), None, &arg, &images).unwrap();
        assert_eq!((s.key.as_str(), s.entry.package.as_str()), ("s", "p"));
        assert_eq!(s.record.and_then(|r| r.install), Some(record));
        assert!(stored(Some("nope"), None, &arg, &images).is_none());
        assert!(stored(None, None, &arg, &images).is_none());
    }
}
