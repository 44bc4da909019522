//! Profile files: parsing, checking every field, and composing named
//! profiles into what one run gets.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mcpvm_protocol::withholding::{Action, Allow, Policy, Resource, Rlimit, Rule, Seccomp, When};
use serde::{Deserialize, Serialize};
use syscall_table as syscalls;

pub const BUILT_IN: &str = include_str!("profiles.toml");

/// The fields a profile (or `[defaults]`) may set; unset fields leave the
/// value from the profiles applied before it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Knobs {
    pub description: Option<String>,
    /// Guest memory, MiB.
    pub mem_mib: Option<u64>,
    pub vcpus: Option<u8>,
    /// The virtio-rng device.
    pub rng: Option<bool>,
    pub read_only_root: Option<bool>,
    pub no_tmp: Option<bool>,
    /// The server's environment is only what profiles set in `env`.
    pub clear_env: Option<bool>,
    /// Variables to set (fake credentials, for example).
    pub env: BTreeMap<String, String>,
    /// Resource limits by name: nofile, nproc, cpu (seconds), fsize and
    /// as (bytes).
    pub rlimits: BTreeMap<String, u64>,
    /// System calls to deny, by name or `@group`.
    pub deny: Vec<String>,
    /// The errno this profile's denials return (default EPERM).
    pub errno: Option<String>,
    /// Kill the server (SIGSYS) on this profile's denials instead.
    pub kill: Option<bool>,
    /// Processes the server spawns may not execve (docs/withholding.md).
    pub deny_exec: Option<bool>,
    /// socket() with these families fails: inet, inet6, unix, netlink,
    /// packet, vsock.
    pub deny_socket_families: Vec<String>,
    /// Allow only these system calls (names or `@group`); the rest fail
    /// with this profile's errno. Composed allow-lists intersect.
    pub allow: Option<Vec<String>>,
    /// Record every system call the server makes.
    pub log_syscalls: Option<bool>,
    /// Record what the server does (files, programs, connections), with
    /// arguments, attributed to the MCP request that caused it.
    pub record_effects: Option<bool>,
    /// Plant canary secrets (credential files, a variable, a sibling of
    /// the workspace, a link out of it) before the server starts.
    pub canaries: Option<bool>,
    /// No network, whatever the catalogue and `--allow-net` allow.
    pub deny_net: Option<bool>,
    /// The server runs as root instead of the guest's unprivileged user.
    pub root: Option<bool>,
    /// Only these of the server's network rules (`HOST[:PORT]`, as the
    /// catalogue writes them) stay. Composed lists intersect.
    pub allow_net: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    defaults: Knobs,
    #[serde(default)]
    profile: BTreeMap<String, Knobs>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("Cannot read the profiles file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("The profiles file {source_name} is not valid TOML of the expected shape: {message}")]
    Parse {
        source_name: String,
        message: String,
    },
    #[error("Profile '{profile}': {field}: {why}")]
    Field {
        profile: String,
        field: &'static str,
        why: String,
    },
    #[error(
        "No profile named '{name}'; known: {known} (or deny-<group> for a syscall group: {groups})"
    )]
    Unknown {
        name: String,
        known: String,
        groups: String,
    },
    #[error("An empty profile name in '{0}'; join names with '+', e.g. ro-root+no-tmp")]
    Empty(String),
}

/// Socket families a profile may name.
const FAMILIES: &[(&str, u32)] = &[
    ("unix", libc::AF_UNIX as u32),
    ("inet", libc::AF_INET as u32),
    ("inet6", libc::AF_INET6 as u32),
    ("netlink", libc::AF_NETLINK as u32),
    ("packet", libc::AF_PACKET as u32),
    ("vsock", libc::AF_VSOCK as u32),
];

/// A set of profiles by name, over common defaults.
#[derive(Debug, Clone)]
pub struct Profiles {
    pub source: String,
    pub defaults: Knobs,
    pub profiles: BTreeMap<String, Knobs>,
}

/// What one run gets: a composed profile with every value decided.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Profile {
    pub name: String,
    pub description: String,
    pub mem_mib: u64,
    /// Whether a named profile (not `[defaults]`) set `mem_mib`: a
    /// server's own minimum does not override memory a profile withholds
    /// on purpose.
    pub mem_set: bool,
    pub vcpus: u8,
    pub rng: bool,
    pub clear_env: bool,
    pub env: BTreeMap<String, String>,
    /// The guest agent's half.
    pub policy: Policy,
    /// The definitions it was composed from, for reports and re-runs.
    pub parts: BTreeMap<String, Knobs>,
    /// How it narrows the server's network (docs/network.md).
    pub network: NetworkLimit,
}

/// What a profile leaves of a server's network rules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NetworkLimit {
    /// None of them.
    pub deny: bool,
    /// Only these (None: all), parsed once when the profile is resolved.
    pub only: Option<Vec<crate::network::Rule>>,
}

impl NetworkLimit {
    /// `rules` as this limit leaves them.
    pub fn narrow(&self, rules: Vec<crate::network::Rule>) -> Vec<crate::network::Rule> {
        match (&self.deny, &self.only) {
            (true, _) => Vec::new(),
            (false, Some(only)) => rules.into_iter().filter(|r| only.contains(r)).collect(),
            (false, None) => rules,
        }
    }
}

impl Profiles {
    pub fn built_in() -> Self {
        Self::parse(BUILT_IN, "(built in)").expect("the built-in profiles are valid")
    }

    /// The built-in profiles with `path`'s on top: its `[defaults]` fields
    /// replace the built-in ones, its profiles replace those of the same
    /// name.
    pub fn load(path: &Path) -> Result<Self, ProfileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let user = Self::parse(&text, &path.display().to_string())?;
        let mut all = Self::built_in();
        all.source = user.source;
        all.defaults = apply(all.defaults, &user.defaults);
        all.profiles.extend(user.profiles);
        Ok(all)
    }

    /// From an optional user file.
    pub fn from_option(path: Option<&Path>) -> Result<Self, ProfileError> {
        match path {
            Some(p) => Self::load(p),
            None => Ok(Self::built_in()),
        }
    }

    pub fn parse(text: &str, source_name: &str) -> Result<Self, ProfileError> {
        let file: File = toml::from_str(text).map_err(|e| ProfileError::Parse {
            source_name: source_name.into(),
            message: e.message().to_string(),
        })?;
        check("defaults", &file.defaults)?;
        for (name, k) in &file.profile {
            check_name(name)?;
            check(name, k)?;
        }
        Ok(Profiles {
            source: source_name.into(),
            defaults: file.defaults,
            profiles: file.profile,
        })
    }

    /// Every profile name this set knows (defined ones, then one deny
    /// profile per syscall group not defined).
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.profiles.keys().cloned().collect();
        for (g, _, _) in syscalls::GROUPS {
            let n = format!("deny-{g}");
            if !self.profiles.contains_key(&n) {
                names.push(n);
            }
        }
        names
    }

    fn knobs(&self, name: &str) -> Result<Knobs, ProfileError> {
        if let Some(k) = self.profiles.get(name) {
            return Ok(k.clone());
        }
        if let Some(group) = name.strip_prefix("deny-") {
            if let Some(&(_, what, _)) = syscalls::GROUPS.iter().find(|(g, _, _)| *g == group) {
                return Ok(Knobs {
                    description: Some(format!("System calls for {what} fail with EPERM")),
                    deny: vec![format!("@{group}")],
                    ..Knobs::default()
                });
            }
        }
        Err(ProfileError::Unknown {
            name: name.into(),
            known: self.profiles.keys().cloned().collect::<Vec<_>>().join(", "),
            groups: syscalls::GROUPS
                .iter()
                .map(|(g, _, _)| *g)
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// Composes `spec` ("a" or "a+b+…") over the defaults.
    pub fn resolve(&self, spec: &str) -> Result<Profile, ProfileError> {
        let names: Vec<&str> = spec.split('+').map(str::trim).collect();
        if names.iter().any(|n| n.is_empty()) {
            return Err(ProfileError::Empty(spec.into()));
        }
        let mut merged = self.defaults.clone();
        let mut rules = Vec::new();
        let mut allow: Option<Allow> = None;
        let mut parts = BTreeMap::new();
        let mut descriptions = Vec::new();
        // Whether a named profile, not the defaults, sets the memory.
        let mut mem_set = false;
        for name in &names {
            let k = self.knobs(name)?;
            mem_set |= k.mem_mib.is_some();
            for r in k.allow_net.iter().flatten() {
                crate::network::Rule::parse(r).map_err(|why| ProfileError::Field {
                    profile: name.to_string(),
                    field: "allow_net",
                    why,
                })?;
            }
            rules.extend(rules_of(name, &k)?);
            if let Some(list) = &k.allow {
                let calls = allow_list(name, &k, list)?;
                allow = Some(match allow.take() {
                    Some(a) => Allow {
                        syscalls: a
                            .syscalls
                            .into_iter()
                            .filter(|c| calls.syscalls.contains(c))
                            .collect(),
                        errno: a.errno,
                    },
                    None => calls,
                });
            }
            descriptions.extend(k.description.clone());
            merged = apply(merged, &k);
            parts.insert(name.to_string(), k);
        }
        parts.insert("defaults".into(), self.defaults.clone());
        let rlimits = merged
            .rlimits
            .iter()
            .map(|(r, &value)| Rlimit {
                resource: resource(r).expect("checked"),
                value,
            })
            .collect();
        let log = merged.log_syscalls.unwrap_or(false);
        let record = merged.record_effects.unwrap_or(false);
        // Parsed once here and passed on as rules (the composed list, the
        // defaults' included).
        let allow_net = merged
            .allow_net
            .as_ref()
            .map(|list| {
                list.iter()
                    .map(|r| crate::network::Rule::parse(r))
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()
            .map_err(|why| field_error(spec, "allow_net", why))?;
        Ok(Profile {
            name: names.join("+"),
            description: descriptions.join("; "),
            mem_mib: merged.mem_mib.unwrap_or(256),
            mem_set,
            vcpus: merged.vcpus.unwrap_or(1),
            rng: merged.rng.unwrap_or(true),
            clear_env: merged.clear_env.unwrap_or(false),
            env: merged.env,
            policy: Policy {
                read_only_root: merged.read_only_root.unwrap_or(false),
                no_tmp: merged.no_tmp.unwrap_or(false),
                bare_env: merged.clear_env.unwrap_or(false),
                canaries: merged.canaries.unwrap_or(false),
                root: merged.root.unwrap_or(false),
                rlimits,
                seccomp: (log || record || !rules.is_empty() || allow.is_some()).then_some(
                    Seccomp {
                        rules,
                        log,
                        allow,
                        record,
                    },
                ),
            },
            parts,
            network: NetworkLimit {
                deny: merged.deny_net.unwrap_or(false),
                only: allow_net,
            },
        })
    }
}

/// `over` with every field `k` sets replaced (maps merged, lists joined).
fn apply(mut over: Knobs, k: &Knobs) -> Knobs {
    macro_rules! take {
        ($($f:ident),*) => { $( if k.$f.is_some() { over.$f = k.$f.clone(); } )* };
    }
    take!(
        description,
        mem_mib,
        vcpus,
        rng,
        read_only_root,
        no_tmp,
        clear_env,
        errno,
        kill,
        deny_exec,
        log_syscalls,
        record_effects,
        canaries,
        deny_net,
        root
    );
    over.env.extend(k.env.clone());
    over.rlimits.extend(k.rlimits.clone());
    over.deny.extend(k.deny.iter().cloned());
    over.deny_socket_families
        .extend(k.deny_socket_families.iter().cloned());
    if let Some(only) = &k.allow_net {
        over.allow_net = Some(match over.allow_net.take() {
            Some(before) => before.into_iter().filter(|r| only.contains(r)).collect(),
            None => only.clone(),
        });
    }
    if let Some(allow) = &k.allow {
        over.allow = Some(match over.allow.take() {
            Some(before) => before.into_iter().filter(|c| allow.contains(c)).collect(),
            None => allow.clone(),
        });
    }
    over
}

fn field_error(profile: &str, field: &'static str, why: String) -> ProfileError {
    ProfileError::Field {
        profile: profile.into(),
        field,
        why,
    }
}

/// The errno a profile's denials return: its `errno`, or EPERM.
fn errno_of(name: &str, k: &Knobs) -> Result<i32, ProfileError> {
    match &k.errno {
        Some(e) => syscalls::errno(e).ok_or_else(|| field_error(name, "errno", unknown_errno(e))),
        None => Ok(libc::EPERM),
    }
}

/// The seccomp rules one profile contributes (its errno or kill applies
/// to its own denials only).
fn rules_of(name: &str, k: &Knobs) -> Result<Vec<Rule>, ProfileError> {
    let field = |field, why| field_error(name, field, why);
    let errno = errno_of(name, k)?;
    let action = if k.kill == Some(true) {
        Action::Kill
    } else {
        Action::Errno(errno)
    };
    let mut rules = Vec::new();
    if k.deny_exec == Some(true) {
        for call in ["execve", "execveat"] {
            rules.push(Rule {
                syscall: call.into(),
                action: Action::Errno(libc::EPERM),
                when: When::InChildren,
            });
        }
    }
    if !k.deny_socket_families.is_empty() {
        let values = k
            .deny_socket_families
            .iter()
            .map(|f| family(f).ok_or_else(|| field("deny_socket_families", unknown_family(f))))
            .collect::<Result<Vec<_>, _>>()?;
        rules.push(Rule {
            syscall: "socket".into(),
            action,
            when: When::ArgIn { arg: 0, values },
        });
    }
    for d in &k.deny {
        for call in expand(d).map_err(|why| field("deny", why))? {
            rules.push(Rule {
                syscall: call.to_string(),
                action,
                when: When::Always,
            });
        }
    }
    Ok(rules)
}

/// A profile's allow-list, names and groups expanded.
fn allow_list(name: &str, k: &Knobs, list: &[String]) -> Result<Allow, ProfileError> {
    let field = |field, why| field_error(name, field, why);
    let errno = errno_of(name, k)?;
    let mut syscalls = Vec::new();
    for a in list {
        for call in expand(a).map_err(|why| field("allow", why))? {
            if !syscalls.iter().any(|c: &String| c == call) {
                syscalls.push(call.to_string());
            }
        }
    }
    if !syscalls.iter().any(|c| c == "execve") {
        return Err(field(
            "allow",
            "without execve the server cannot start; add it".into(),
        ));
    }
    Ok(Allow { syscalls, errno })
}

/// A syscall name or `@group` to names.
fn expand(d: &str) -> Result<Vec<&str>, String> {
    if let Some(g) = d.strip_prefix('@') {
        return syscalls::group(g).map(<[&str]>::to_vec).ok_or_else(|| {
            let groups: Vec<&str> = syscalls::GROUPS.iter().map(|(g, _, _)| *g).collect();
            format!("no syscall group '@{g}'; groups: {}", groups.join(", "))
        });
    }
    match syscalls::SYSCALLS.iter().find(|(n, _)| *n == d) {
        Some((n, _)) => Ok(vec![n]),
        None => Err(format!(
            "'{d}' is not an x86_64 system call name (e.g. 'openat', or '@group')"
        )),
    }
}

fn family(f: &str) -> Option<u32> {
    FAMILIES.iter().find(|(n, _)| *n == f).map(|&(_, v)| v)
}

fn resource(r: &str) -> Option<Resource> {
    Resource::ALL.into_iter().find(|x| x.name() == r)
}

fn unknown_errno(e: &str) -> String {
    let names: Vec<&str> = syscalls::ERRNOS.iter().map(|(n, _)| *n).collect();
    format!("unknown errno '{e}'; use one of {}", names.join(", "))
}

fn unknown_family(f: &str) -> String {
    let names: Vec<&str> = FAMILIES.iter().map(|(n, _)| *n).collect();
    format!(
        "unknown socket family '{f}'; use one of {}",
        names.join(", ")
    )
}

/// A profile's own name: lowercase letters, digits, '-' and '_', at most
/// 64 characters.
pub fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// A profile a run names: one name, or names joined by '+'
/// (`ro-root+no-tmp`), at most 16 of them. What another machine's audit
/// says it ran is checked by this before it is trusted.
pub fn is_spec(spec: &str) -> bool {
    let parts: Vec<&str> = spec.split('+').collect();
    parts.len() <= 16 && parts.iter().all(|p| is_name(p))
}

fn check_name(name: &str) -> Result<(), ProfileError> {
    if is_name(name) {
        Ok(())
    } else {
        Err(field_error(
            name,
            "name",
            "use lowercase letters, digits, '-' and '_' ('+' joins profiles in a run)".into(),
        ))
    }
}

/// Every field checked, so a bad value is refused before any VM starts.
fn check(name: &str, k: &Knobs) -> Result<(), ProfileError> {
    let field = |field, why| field_error(name, field, why);
    if let Some(m) = k.mem_mib {
        if !(32..=65536).contains(&m) {
            return Err(field("mem_mib", format!("{m} MiB is outside 32..=65536")));
        }
    }
    if let Some(v) = k.vcpus {
        if !(1..=32).contains(&v) {
            return Err(field("vcpus", format!("{v} is outside 1..=32")));
        }
    }
    for (r, v) in &k.rlimits {
        if resource(r).is_none() {
            let names: Vec<&str> = Resource::ALL.iter().map(|r| r.name()).collect();
            return Err(field(
                "rlimits",
                format!("unknown limit '{r}'; use one of {}", names.join(", ")),
            ));
        }
        if *v == 0 && r != "cpu" {
            return Err(field(
                "rlimits",
                format!("{r} = 0 leaves the server nothing"),
            ));
        }
    }
    for key in k.env.keys() {
        if key.is_empty() || key.contains('=') || key.contains('\0') {
            return Err(field("env", format!("'{key}' is not a variable name")));
        }
    }
    if let Some(list) = &k.allow {
        allow_list(name, k, list)?;
    }
    rules_of(name, k).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    use mcpvm_protocol::errors::chain as error_chain;

    fn profiles(extra: &str) -> Profiles {
        Profiles::parse(&format!("{BUILT_IN}\n{extra}"), "test").unwrap()
    }

    fn error(text: &str) -> String {
        error_chain(&Profiles::parse(text, "t.toml").unwrap_err())
    }

    #[test]
    fn every_built_in_profile_resolves() {
        let p = Profiles::built_in();
        for name in p.names() {
            let r = p.resolve(&name).unwrap();
            assert_eq!(r.name, name);
            assert!(!r.description.is_empty(), "{name}");
        }
    }

    #[test]
    fn baseline_takes_the_defaults_and_logs_every_call() {
        let b = Profiles::built_in().resolve("baseline").unwrap();
        assert_eq!((b.mem_mib, b.vcpus, b.rng), (512, 2, true));
        let s = b.policy.seccomp.unwrap();
        assert!(s.log && s.rules.is_empty());
        assert!(!b.policy.read_only_root);
    }

    #[test]
    fn composition_applies_in_order_and_joins_denials() {
        let p = profiles(
            "[profile.custom]\ndescription = \"x\"\nmem_mib = 128\ndeny = [\"ptrace\", \"@mount\"]\nerrno = \"EACCES\"\n",
        );
        let r = p.resolve("tiny-mem+ro-root+custom+deny-exec").unwrap();
        assert_eq!(r.name, "tiny-mem+ro-root+custom+deny-exec");
        assert_eq!(r.mem_mib, 128, "the later profile wins");
        assert!(r.policy.read_only_root);
        let rules = r.policy.seccomp.unwrap().rules;
        let ptrace = rules.iter().find(|r| r.syscall == "ptrace").unwrap();
        assert_eq!(ptrace.action, Action::Errno(libc::EACCES));
        assert!(rules.iter().any(|r| r.syscall == "pivot_root"));
        let exec = rules.iter().find(|r| r.syscall == "execve").unwrap();
        assert_eq!(exec.when, When::InChildren);
        assert_eq!(exec.action, Action::Errno(libc::EPERM));
    }

    #[test]
    fn deny_profiles_exist_for_every_group() {
        let r = Profiles::built_in().resolve("deny-network").unwrap();
        let rules = r.policy.seccomp.unwrap().rules;
        assert!(rules.iter().any(|r| r.syscall == "connect"));
        assert!(rules.iter().all(|r| r.action == Action::Errno(libc::EPERM)));
    }

    #[test]
    fn net_sockets_are_denied_by_family() {
        let r = Profiles::built_in().resolve("deny-net-sockets").unwrap();
        let rules = r.policy.seccomp.unwrap().rules;
        assert_eq!(
            rules,
            vec![Rule {
                syscall: "socket".into(),
                action: Action::Errno(libc::EACCES),
                when: When::ArgIn {
                    arg: 0,
                    values: vec![2, 10]
                },
            }]
        );
    }

    #[test]
    fn resource_and_environment_knobs_reach_the_policy() {
        let p = Profiles::built_in();
        let r = p.resolve("low-fds+no-env").unwrap();
        assert_eq!(
            r.policy.rlimits,
            vec![Rlimit {
                resource: Resource::Nofile,
                value: 32
            }]
        );
        assert!(r.clear_env && r.policy.bare_env);
        assert!(r.policy.seccomp.is_none(), "no syscall knob, no filter");
        assert!(!p.resolve("no-rng").unwrap().rng);
        assert_eq!(p.resolve("one-cpu").unwrap().vcpus, 1);
        assert!(p.resolve("no-tmp").unwrap().policy.no_tmp);
        // The unprivileged user unless a profile asks for root.
        assert!(!p.resolve("baseline").unwrap().policy.root);
        assert!(p.resolve("deny-net+root").unwrap().policy.root);
    }

    #[test]
    fn allow_lists_intersect_and_must_let_the_server_start() {
        let p = profiles(
            "[profile.a]\nallow = [\"execve\", \"read\", \"write\", \"@exec\"]\nerrno = \"ENOSYS\"\n\
             [profile.b]\nallow = [\"execve\", \"write\", \"openat\"]\n",
        );
        let allow = p
            .resolve("a+b")
            .unwrap()
            .policy
            .seccomp
            .unwrap()
            .allow
            .unwrap();
        assert_eq!(allow.syscalls, vec!["execve".to_string(), "write".into()]);
        assert_eq!(allow.errno, libc::ENOSYS);
        let e = error("[profile.x]\nallow = [\"read\"]\n");
        assert!(e.contains("without execve the server cannot start"), "{e}");
    }

    #[test]
    fn a_user_file_adds_and_replaces_profiles() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(
            &path,
            "[defaults]\nmem_mib = 1024\n[profile.tiny-mem]\nmem_mib = 64\n[profile.mine]\nvcpus = 4\n",
        )
        .unwrap();
        let p = Profiles::load(&path).unwrap();
        assert_eq!(p.resolve("baseline").unwrap().mem_mib, 1024);
        assert_eq!(p.resolve("tiny-mem").unwrap().mem_mib, 64);
        assert_eq!(p.resolve("mine").unwrap().vcpus, 4);
        assert_eq!(
            p.resolve("mine").unwrap().parts["defaults"].mem_mib,
            Some(1024)
        );
    }

    #[test]
    fn bad_profiles_say_which_field_and_what_to_do() {
        for (text, want) in [
            (
                "[profile.x]\nmem_mib = 8\n",
                "Profile 'x': mem_mib: 8 MiB is outside",
            ),
            (
                "[profile.x]\nvcpus = 0\n",
                "Profile 'x': vcpus: 0 is outside",
            ),
            (
                "[profile.x]\ndeny = [\"opne\"]\n",
                "Profile 'x': deny: 'opne' is not an x86_64",
            ),
            (
                "[profile.x]\ndeny = [\"@nope\"]\n",
                "no syscall group '@nope'; groups: network",
            ),
            (
                "[profile.x]\nerrno = \"EWHAT\"\n",
                "Profile 'x': errno: unknown errno 'EWHAT'",
            ),
            (
                "[profile.x]\ndeny_socket_families = [\"ipx\"]\n",
                "unknown socket family 'ipx'",
            ),
            (
                "[profile.x]\nrlimits = { files = 3 }\n",
                "unknown limit 'files'; use one of nofile",
            ),
            (
                "[profile.x]\nrlimits = { nofile = 0 }\n",
                "nofile = 0 leaves the server nothing",
            ),
            ("[profile.x]\nmemory = 3\n", "unknown field `memory`"),
            ("[profile.\"A+B\"]\n", "Profile 'A+B': name: use lowercase"),
            (
                "[profile.x]\nenv = { \"A=B\" = \"c\" }\n",
                "env: 'A=B' is not a variable name",
            ),
            ("profile = 3\n", "not valid TOML of the expected shape"),
        ] {
            let e = error(text);
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let p = Profiles::built_in();
        let e = error_chain(&p.resolve("ro-rot").unwrap_err());
        assert!(
            e.contains("No profile named 'ro-rot'; known: baseline"),
            "{e}"
        );
        let e = error_chain(&p.resolve("ro-root++no-tmp").unwrap_err());
        assert!(e.contains("empty profile name"), "{e}");
    }
}
