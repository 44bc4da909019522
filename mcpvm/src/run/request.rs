//! What a caller asks of `mcpvm run`, as one typed value: the command
//! line parses onto it ([`RunArgs`](super::options::RunArgs)), and a
//! process that starts `mcpvm run` (the probe, the warm cache's snapshot
//! taker) hands it over as a file, `mcpvm run --request FILE`, instead of
//! writing it out as arguments to be parsed back. Environment values
//! never go in it: a request names the variables, and their values reach
//! the child by its environment, where `ps` and a left file do not show
//! them.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::run::disk_arg::DiskArg;
use crate::server::{CatalogueArg, ServerPlan};
use crate::withholding::profile::Profile;
use crate::withholding::Profiles;
use crate::workspace::WorkspaceArg;

/// How the microVM is set up and what runs in it: `run`'s VM options
/// as checked and planned (the fields are `VmOptions`' flags, the
/// `--env-file`s folded into `env`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VmRequest {
    pub kernel: Option<PathBuf>,
    pub initrd: Option<PathBuf>,
    pub mem: Option<u64>,
    pub vcpus: Option<u8>,
    pub cwd: Option<String>,
    /// The server's variables in order (a later one wins): a value, or
    /// None to take mcpvm's own. Written as names alone (see the module).
    #[serde(with = "names_only")]
    pub env: Vec<(String, Option<String>)>,
    pub secrets: Vec<String>,
    pub console: Option<PathBuf>,
    pub timeout: Option<u64>,
    pub allow_pvm: bool,
    pub disks: Vec<DiskArg>,
    pub image: Option<PathBuf>,
    pub layers: Vec<PathBuf>,
    pub read_only_root: bool,
    pub server: Option<String>,
    pub package: Option<String>,
    pub as_released: bool,
    pub catalogue: CatalogueArg,
    pub images: Option<PathBuf>,
    pub workspace: Option<WorkspaceArg>,
    pub profile: Option<String>,
    pub profiles: Option<PathBuf>,
    pub no_rng: bool,
    pub seccomp: vmm::SeccompMode,
    pub jail: vmm::jail::JailMode,
    pub workspace_limit: u64,
    pub allow_net: Vec<withholding::network::Rule>,
    pub listen: Option<std::net::SocketAddr>,
    pub listen_non_loopback: bool,
    pub listen_fd: Option<i32>,
    pub guest_port: Option<u16>,
}

pub const DEFAULT_WORKSPACE_LIMIT_MIB: u64 = 1024;

/// What `mcpvm run` is given when no option is set.
impl Default for VmRequest {
    fn default() -> Self {
        VmRequest {
            kernel: None,
            initrd: None,
            mem: None,
            vcpus: None,
            cwd: None,
            env: Vec::new(),
            secrets: Vec::new(),
            console: None,
            timeout: None,
            allow_pvm: false,
            disks: Vec::new(),
            image: None,
            layers: Vec::new(),
            read_only_root: false,
            server: None,
            package: None,
            as_released: false,
            catalogue: CatalogueArg::default(),
            images: None,
            workspace: None,
            profile: None,
            profiles: None,
            no_rng: false,
            seccomp: vmm::SeccompMode::On,
            jail: vmm::jail::JailMode::Auto,
            workspace_limit: DEFAULT_WORKSPACE_LIMIT_MIB,
            allow_net: Vec::new(),
            listen: None,
            listen_non_loopback: false,
            listen_fd: None,
            guest_port: None,
        }
    }
}

/// A whole run: the VM, what the run writes, and what it starts from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunRequest {
    pub vm: VmRequest,
    /// The run's phase times (ms since start), written here as JSON.
    pub timings: Option<PathBuf>,
    /// The guest agent's events, appended here as JSON lines.
    pub events: Option<PathBuf>,
    /// Pause after the server answered mcpvm's own `initialize` and
    /// write the VM here (docs/snapshots.md).
    pub snapshot_to: Option<PathBuf>,
    /// Start from this snapshot instead of booting.
    pub from_snapshot: Option<PathBuf>,
    /// Start from the warm-start cache.
    pub warm: bool,
    /// The warm-start cache's directory.
    pub snapshots: Option<PathBuf>,
    /// The server command and its arguments, as seen inside the guest.
    pub command: Vec<String>,
}

/// The largest request file read: a request is a few KiB; a file far
/// past that is not one an mcpvm process wrote.
pub const MAX_REQUEST_BYTES: u64 = 1 << 20;

/// A `--request` file that cannot be used, said as one error.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("Cannot read the request {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("The request {path} is over {max} bytes: it is not one mcpvm wrote", max = MAX_REQUEST_BYTES)]
    TooLarge { path: PathBuf },
    #[error("The request {path} is not one: {why}")]
    Format { path: PathBuf, why: String },
    #[error("--request takes no other option: the request file holds the whole {0}")]
    Alone(&'static str),
}

/// Reads a request another mcpvm process wrote: bounded, every field
/// known, each option checked as its flag would be.
pub fn read<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, RequestError> {
    use std::io::Read;
    let read = |source| RequestError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut text = String::new();
    std::fs::File::open(path)
        .map_err(read)?
        .take(MAX_REQUEST_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(read)?;
    if text.len() as u64 > MAX_REQUEST_BYTES {
        return Err(RequestError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    serde_json::from_str(&text).map_err(|e| RequestError::Format {
        path: path.to_path_buf(),
        why: e.to_string(),
    })
}

/// Writes a request for a child process as `path`, a new file in a
/// directory of the caller's, readable by its owner only.
pub fn write<T: Serialize>(request: &T, path: &Path) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let text = serde_json::to_vec(request).map_err(std::io::Error::other)?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(&text))
}

impl RunRequest {
    /// Reads a run request (see [`read`]).
    pub fn read(path: &Path) -> Result<RunRequest, RequestError> {
        read(path)
    }

    /// Writes the request for a child `mcpvm run` into `dir` (a run
    /// directory of the caller's) and gives the file's path.
    pub fn write_in(&self, dir: &Path) -> std::io::Result<PathBuf> {
        let path = dir.join("run-request.json");
        write(self, &path)?;
        Ok(path)
    }
}

/// A variable's name: letters, digits and `_`, not starting with a digit.
pub fn parse_env_key(k: &str) -> Result<String, String> {
    let ok = !k.is_empty()
        && !k.starts_with(|c: char| c.is_ascii_digit())
        && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    match ok {
        true => Ok(k.to_string()),
        false => Err(format!(
            "'{k}' is not an environment variable name (letters, digits, _): give KEY or KEY=VALUE"
        )),
    }
}

/// `env` as it is written: the names, each once, in order; read back as
/// names whose values come from the environment.
mod names_only {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        env: &[(String, Option<String>)],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut names: Vec<&str> = Vec::new();
        for (k, _) in env {
            if !names.contains(&k.as_str()) {
                names.push(k);
            }
        }
        s.collect_seq(names)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<(String, Option<String>)>, D::Error> {
        let names = Vec::<String>::deserialize(d)?;
        names
            .into_iter()
            .map(|k| {
                crate::run::request::parse_env_key(&k)
                    .map(|k| (k, None))
                    .map_err(serde::de::Error::custom)
            })
            .collect()
    }
}

/// Who the guest may reach: the server's rules and the user's, as the
/// profile leaves them; None when neither gave any (no network device,
/// no proxy). A profile that takes every rule away leaves the network
/// on, denying and logging each attempt: that is what an audit shows.
fn network(
    server: Option<&ServerPlan>,
    allow_net: &[withholding::network::Rule],
    profile: Option<&Profile>,
) -> Result<Option<withholding::network::NetworkPolicy>, String> {
    use withholding::network::{NetworkPolicy, Rule};
    // Parsed once each (the user's as they were read, the catalogue's
    // here), then narrowed and passed on as rules.
    let mut rules: Vec<Rule> = server
        .iter()
        .flat_map(|s| s.network.iter())
        .map(|r| Rule::parse(r))
        .collect::<Result<_, _>>()?;
    rules.extend(allow_net.iter().cloned());
    if rules.is_empty() {
        return Ok(None);
    }
    if let Some(p) = profile {
        rules = p.network.narrow(rules);
    }
    Ok(Some(NetworkPolicy::of(rules)))
}

/// What [`VmRequest::check`] resolved.
pub struct Checked {
    pub profile: Option<Profile>,
    pub server: Option<ServerPlan>,
    pub root_image: Option<PathBuf>,
    /// Who the guest may reach: the server's rules and --allow-net, as
    /// the profile narrows them. None: no network at all (no rules were
    /// given); a policy the profile emptied still logs every attempt.
    pub network: Option<withholding::network::NetworkPolicy>,
    /// The guest port --listen forwards to.
    pub inbound: Option<u16>,
    /// The user's environment for the server: --env-file's, then
    /// --env's (values from mcpvm's environment where only a name was
    /// given), then --secret's not given by either.
    pub env: Vec<(String, String)>,
    /// Values never to print, record or report, by name: the server's
    /// catalogued credentials and --secret's.
    pub secrets: Vec<(String, String)>,
}

/// Options that cannot make a VM, said before anything is created.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    #[error(transparent)]
    Profile(#[from] withholding::profile::ProfileError),
    #[error(transparent)]
    Server(#[from] crate::server::ServerError),
    #[error(transparent)]
    Package(#[from] crate::server::package::PackageError),
    #[error("--read-only-root needs --image or --server")]
    ReadOnlyRoot,
    #[error(transparent)]
    Image(#[from] crate::server::image::ImageError),
    #[error(transparent)]
    Workspace(#[from] crate::workspace::WorkspaceError),
    #[error("{0} is not set in mcpvm's environment: give --env {0}=VALUE, --env-file FILE, or export {0}")]
    Unset(String),
    #[error("{0}")]
    Network(String),
    #[error("--listen {0} is not a loopback address: any host that reaches it could drive the server with its credentials; listen on 127.0.0.1, or give --listen-non-loopback to mean it")]
    NotLoopback(std::net::SocketAddr),
    #[error("--listen {0} needs a server that speaks HTTP: a catalogued one with transport = \"http\", or --guest-port PORT for a command")]
    NotHttp(std::net::SocketAddr),
}

impl VmRequest {
    /// Resolves and checks the profile, server, images and workspace
    /// before anything is created, so that bad input is one clear error
    /// that leaves nothing behind (`run`, and `probe` before it spawns
    /// `mcpvm run`). `has_command`: a guest command was given too.
    pub fn check(&self, has_command: bool) -> Result<Checked, OptionsError> {
        let profile = match &self.profile {
            Some(spec) => Some(Profiles::from_option(self.profiles.as_deref())?.resolve(spec)?),
            None => None,
        };
        let server = match &self.server {
            Some(name) if !has_command => {
                Some(crate::server::plan(name, &self.catalogue, &self.images)?)
            }
            Some(_) => return Err(crate::server::ServerError::Both.into()),
            None => match &self.package {
                Some(spec) => Some(crate::server::package::plan(
                    spec,
                    self.as_released,
                    &self.images,
                )?),
                None => None,
            },
        };
        let root_image = server
            .as_ref()
            .map(|s| s.runtime.clone())
            .or(self.image.clone());
        if self.read_only_root && root_image.is_none() {
            return Err(OptionsError::ReadOnlyRoot);
        }
        if let Some(img) = &root_image {
            crate::server::image::check_root_image(img)?;
        }
        if let Some(s) = &server {
            crate::server::image::check_root_image(&s.layer)?;
        }
        for layer in &self.layers {
            crate::server::image::check_root_image(layer)?;
        }
        if let Some(ws) = &self.workspace {
            crate::workspace::check(ws)?;
        }
        let env = self.environment()?;
        let mut secrets = server
            .as_ref()
            .map(|s| s.secrets.clone())
            .unwrap_or_default();
        secrets.extend(
            env.iter()
                .filter(|(k, _)| self.secrets.contains(k))
                .cloned(),
        );
        let network = network(server.as_ref(), &self.allow_net, profile.as_ref())
            .map_err(OptionsError::Network)?;
        if let Some(addr) = self.listen {
            if !addr.ip().is_loopback() && !self.listen_non_loopback {
                return Err(OptionsError::NotLoopback(addr));
            }
        }
        let http_port = server.as_ref().and_then(|s| s.http_port);
        let inbound = match (self.listen, self.guest_port.or(http_port)) {
            (None, _) => None,
            (Some(_), Some(port)) => Some(port),
            (Some(addr), None) => return Err(OptionsError::NotHttp(addr)),
        };
        Ok(Checked {
            profile,
            server,
            root_image,
            network,
            inbound,
            env,
            secrets,
        })
    }

    /// The user's environment for the server ([`Checked::env`]); Err
    /// names a variable given by name only that mcpvm's environment
    /// does not hold.
    pub fn environment(&self) -> Result<Vec<(String, String)>, OptionsError> {
        let own = |k: &str| std::env::var(k).map_err(|_| OptionsError::Unset(k.to_string()));
        let mut env: Vec<(String, String)> = Vec::new();
        let set = |env: &mut Vec<(String, String)>, k: &str, v: String| {
            env.retain(|(have, _)| have != k);
            env.push((k.to_string(), v));
        };
        for (k, v) in &self.env {
            let v = match v {
                Some(v) => v.clone(),
                None => own(k)?,
            };
            set(&mut env, k, v);
        }
        for k in &self.secrets {
            if !env.iter().any(|(have, _)| have == k) {
                let v = own(k)?;
                set(&mut env, k, v);
            }
        }
        Ok(env)
    }

    /// The catalogued server asked for, if any.
    pub fn server(&self) -> Option<&str> {
        self.server.as_deref()
    }

    /// A server from the catalogue or a package: it runs in a microVM
    /// on its images.
    pub fn names_a_server(&self) -> bool {
        self.server.is_some() || self.package.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn the_network_is_the_servers_and_the_users_rules_as_the_profile_leaves_them() {
        let server = ServerPlan {
            network: vec!["api.github.com:443".into()],
            ..ServerPlan::default()
        };
        let user = [withholding::network::Rule::parse("198.51.100.7:8080").unwrap()];
        let rules = |p: &Option<withholding::network::NetworkPolicy>| -> Vec<String> {
            p.as_ref()
                .unwrap()
                .rules
                .iter()
                .map(|r| r.to_string())
                .collect()
        };
        let all = network(Some(&server), &user, None).unwrap();
        assert_eq!(rules(&all), ["api.github.com:443", "198.51.100.7:8080"]);
        assert_eq!(network(None, &[], None).unwrap(), None, "none by default");
        let profiles = Profiles::parse(
            "[profile.github-only]\nallow_net = [\"api.github.com:443\"]\n",
            "test",
        )
        .unwrap();
        let narrow = profiles.resolve("github-only").unwrap();
        assert_eq!(
            rules(&network(Some(&server), &user, Some(&narrow)).unwrap()),
            ["api.github.com:443"]
        );
        let deny = Profiles::built_in().resolve("observe+deny-net").unwrap();
        let denied = network(Some(&server), &user, Some(&deny)).unwrap();
        assert!(
            denied.unwrap().is_empty(),
            "on, every attempt denied and logged"
        );
        let bad = ServerPlan {
            network: vec!["no such:rule".into()],
            ..server
        };
        assert!(network(Some(&bad), &[], None)
            .unwrap_err()
            .contains("HOST[:PORT]"));
        // --allow-net is checked as it is read.
        let e =
            crate::run::options::tests::Cli::try_parse_from(["mcpvm", "--allow-net", "10.0.0.1:0"])
                .err()
                .unwrap();
        assert!(e.to_string().contains("port"), "{e}");
    }

    #[test]
    fn a_request_goes_whole_through_its_file_with_names_for_values() {
        let t = tempfile::tempdir().unwrap();
        let req = RunRequest {
            vm: VmRequest {
                mem: Some(512),
                env: vec![
                    ("TOKEN".into(), Some("s3cret".into())),
                    ("PATH".into(), None),
                    ("TOKEN".into(), Some("later".into())),
                ],
                secrets: vec!["TOKEN".into()],
                disks: vec![crate::run::disk_arg::parse_disk("d.img,rw,id=data").unwrap()],
                server: Some("memory".into()),
                catalogue: CatalogueArg {
                    path: Some("cat.toml".into()),
                    only: true,
                },
                workspace: Some(crate::workspace::parse_workspace("ws,rw").unwrap()),
                seccomp: vmm::SeccompMode::Log,
                jail: vmm::jail::JailMode::Off,
                allow_net: vec![withholding::network::Rule::parse("api.github.com:443").unwrap()],
                listen: Some("127.0.0.1:8931".parse().unwrap()),
                listen_fd: Some(3),
                ..VmRequest::default()
            },
            timings: Some("t.json".into()),
            events: Some("e.jsonl".into()),
            warm: true,
            command: vec!["--flag".into(), "a b".into()],
            ..RunRequest::default()
        };
        let path = req.write_in(t.path()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains("s3cret") && !text.contains("later"),
            "{text}"
        );
        let back = RunRequest::read(&path).unwrap();
        // The same run, the values left to the environment.
        let by_name = RunRequest {
            vm: VmRequest {
                env: vec![("TOKEN".into(), None), ("PATH".into(), None)],
                ..req.vm.clone()
            },
            ..req.clone()
        };
        assert_eq!(back, by_name);
        assert!(req.write_in(t.path()).is_err(), "never over another's file");
    }

    #[test]
    fn a_request_file_that_is_not_one_is_one_clear_error() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("r.json");
        let said = |text: &str| -> String {
            std::fs::write(&f, text).unwrap();
            RunRequest::read(&f).unwrap_err().to_string()
        };
        assert!(said("{\"vm\": {\"mem\": 1, \"shell\": \"x\"}}").contains("unknown field `shell`"));
        assert!(said("{\"vm\": {\"env\": [\"A=B\"]}}").contains("not an environment variable name"));
        assert!(said("{\"vm\": {\"disks\": [\"d.img,cache=odd\"]}}").contains("cache"));
        assert!(said("{\"vm\": {\"seccomp\": \"maybe\"}}").contains("unknown variant"));
        assert!(said(&" ".repeat(MAX_REQUEST_BYTES as usize + 1)).contains("over"));
        let gone = RunRequest::read(&t.path().join("none")).unwrap_err();
        assert!(gone.to_string().contains("Cannot read the request"));
        // An empty object is the run with nothing set.
        std::fs::write(&f, "{}").unwrap();
        assert_eq!(RunRequest::read(&f).unwrap(), RunRequest::default());
    }
}
