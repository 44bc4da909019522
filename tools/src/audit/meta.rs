//! `audit.json`: what an audit ran on (mcpvm, kernel, runtime image,
//! catalogue, servers, profiles), so that it can be repeated, resumed, and
//! its shards merged only with shards of the same inputs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::matrix::Shard;

/// How [`Meta::same_inputs`] names a change in the servers' entries.
pub const SERVERS_CHANGED: &str = "servers (packages, versions or layers)";

/// `audit.json`: what the audit ran on, so it can be repeated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub schema: u32,
    pub mcpvm_version: String,
    /// The guest kernel: path and the first 16 hex digits of its SHA-256.
    pub kernel: String,
    pub kernel_sha256: String,
    /// The runtime image file (its name carries its content key).
    pub runtime_image: String,
    pub catalogue: String,
    pub servers: BTreeMap<String, ServerMeta>,
    /// In the order of the matrix columns.
    pub profiles: Vec<String>,
    /// Each profile as resolved: every value, and the definitions it was
    /// composed from.
    pub profile_definitions: BTreeMap<String, serde_json::Value>,
    pub shard: Shard,
    pub started_at: u64,
    /// Cells started from the warm-start cache: their timings are of
    /// restores, not boots.
    #[serde(default)]
    pub warm: bool,
    /// The order cells ran in (`matrix::ORDER`); older audits ran
    /// server-major, each server's profiles in the same order.
    #[serde(default = "old_order")]
    pub order: String,
    /// Runs per cell (`--repeat`), in a row; older audits ran one.
    #[serde(default = "one_run")]
    pub repeat: usize,
    /// Where each server's catalogue entry is written (findings are
    /// located there in SARIF). Not an input: a catalogue edited around
    /// an entry is the same audit.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub origins: BTreeMap<String, mcpvm_images::catalogue::Origin>,
    /// What a merge found missing: shards not given, or given with cells
    /// not run (the reports say so first). Empty for a whole audit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gaps: Vec<String>,
}

fn one_run() -> usize {
    1
}

fn old_order() -> String {
    "server-major, profiles in the same order for every server".into()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerMeta {
    pub package: String,
    pub version: String,
    pub runtime: String,
    /// The server layer's content key.
    pub layer: String,
    /// The digest of its dependency tree's lock (docs/catalogue.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<String>,
    /// Its boundary, in an audit with `--security`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roots: Vec<String>,
    /// Why its layer could not be built: its cells are not run, and its
    /// compatibility verdict says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_error: Option<String>,
    /// What its install scripts did in their microVM, as the store
    /// recorded it when the layer was built (`backdoor` findings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<mcpvm_images::build::InstallRecord>,
    /// The network rules its catalogue entry gives (`host:port`), which
    /// the audit checks against what its tools tried (`allow.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<String>,
}

impl ServerMeta {
    /// What the catalogue entry says of a server; the store and the run
    /// add the rest.
    pub fn of(entry: &mcpvm_images::catalogue::Entry) -> Self {
        ServerMeta {
            package: entry.package.clone(),
            version: entry.version.clone(),
            runtime: format!("{:?}", entry.runtime).to_lowercase(),
            network: entry.network.clone(),
            ..ServerMeta::default()
        }
    }
}

/// Most servers an audit holds: ten times the official registry's
/// 32,800. A merge reads `audit.json` from other machines: these bound
/// what it may make it allocate, before anything is sized by it.
pub const MAX_SERVERS: usize = 400_000;
/// Most profile columns.
pub const MAX_PROFILES: usize = 64;
/// Most network rules one server's entry gives.
pub const MAX_RULES: usize = 64;
/// Most cells (servers × profiles) of one audit.
pub const MAX_CELLS: usize = 2_000_000;
/// Most runs of one cell (`--repeat`).
pub const MAX_REPEAT: usize = 1_000;

impl Meta {
    /// What an `audit.json` from another machine must hold before a merge
    /// trusts it: server and profile names by the rules the catalogue
    /// and the profiles file check their own by (so a name is never a
    /// path, nor a line of a generated file), and counts a merge can
    /// hold. The first problem, in words.
    pub fn check(&self) -> Result<(), String> {
        let shown = |s: &str| {
            mcpvm::logger::printable(&s.chars().take(80).collect::<String>()).into_owned()
        };
        if self.servers.len() > MAX_SERVERS {
            return Err(format!(
                "it names {} servers, more than an audit holds ({MAX_SERVERS})",
                self.servers.len()
            ));
        }
        if self.profiles.len() > MAX_PROFILES {
            return Err(format!(
                "it names {} profiles, more than an audit holds ({MAX_PROFILES})",
                self.profiles.len()
            ));
        }
        let cells = self.servers.len() * self.profiles.len();
        if cells > MAX_CELLS {
            return Err(format!(
                "its matrix has {cells} cells, more than an audit holds ({MAX_CELLS})"
            ));
        }
        if self.repeat == 0 || self.repeat > MAX_REPEAT {
            return Err(format!(
                "it says each cell ran {} times (1 to {MAX_REPEAT})",
                self.repeat
            ));
        }
        if self.shard.count == 0
            || self.shard.index >= self.shard.count
            || self.shard.count > cells.max(1024)
        {
            return Err(format!(
                "shard {}/{} is no split of its {cells} cells",
                self.shard.index, self.shard.count
            ));
        }
        if let Some(s) = self
            .servers
            .keys()
            .find(|s| !mcpvm_images::catalogue::is_name(s))
        {
            return Err(format!(
                "'{}' is not a server name (lowercase letters, digits and '-', at most 64)",
                shown(s)
            ));
        }
        if let Some((s, _)) = self
            .servers
            .iter()
            .find(|(_, m)| m.network.len() > MAX_RULES || m.network.iter().any(|r| r.len() > 300))
        {
            return Err(format!(
                "server '{}' has more than {MAX_RULES} network rules, or one longer than 300 characters",
                shown(s)
            ));
        }
        let profile_ok = |p: &str| withholding::profile::is_spec(p);
        if let Some(p) = self.profiles.iter().find(|p| !profile_ok(p)) {
            return Err(format!("'{}' is not a profile name (lowercase letters, digits, '-' and '_', joined by '+')", shown(p)));
        }
        if let Some(p) = self
            .profile_definitions
            .keys()
            .find(|p| !self.profiles.contains(p))
        {
            return Err(format!(
                "it defines profile '{}', which is not one of its columns",
                shown(p)
            ));
        }
        if let Some(s) = self.origins.keys().find(|s| !self.servers.contains_key(*s)) {
            return Err(format!(
                "it locates server '{}', which it does not audit",
                shown(s)
            ));
        }
        Ok(())
    }

    /// A copy without its servers and their origins: the frame of a
    /// subset of them (a report page), without copying every server.
    pub fn clone_without_servers(&self) -> Meta {
        Meta {
            schema: self.schema,
            mcpvm_version: self.mcpvm_version.clone(),
            kernel: self.kernel.clone(),
            kernel_sha256: self.kernel_sha256.clone(),
            runtime_image: self.runtime_image.clone(),
            catalogue: self.catalogue.clone(),
            servers: BTreeMap::new(),
            profiles: self.profiles.clone(),
            profile_definitions: self.profile_definitions.clone(),
            shard: self.shard,
            started_at: self.started_at,
            warm: self.warm,
            order: self.order.clone(),
            repeat: self.repeat,
            origins: BTreeMap::new(),
            gaps: self.gaps.clone(),
        }
    }

    /// The servers whose layer built, in order: those with cells.
    pub fn installed(&self) -> Vec<String> {
        self.servers
            .iter()
            .filter(|(_, m)| m.install_error.is_none())
            .map(|(s, _)| s.clone())
            .collect()
    }

    /// What must match for two audits (or shards) to be one: everything
    /// but when it started and which shard ran.
    pub fn same_inputs(&self, other: &Meta) -> Vec<&'static str> {
        let mut diff = Vec::new();
        if self.kernel_sha256 != other.kernel_sha256 {
            diff.push("kernel");
        }
        if self.runtime_image != other.runtime_image {
            diff.push("runtime image");
        }
        if self.servers != other.servers {
            diff.push(SERVERS_CHANGED);
        }
        if self.profiles != other.profiles || self.profile_definitions != other.profile_definitions
        {
            diff.push("profiles");
        }
        if self.warm != other.warm {
            diff.push("warm starts");
        }
        if self.repeat != other.repeat {
            diff.push("runs per cell (--repeat)");
        }
        diff
    }
}
