//! What the agent withholds from the server: the guest half of a
//! withholding profile (the VMM enforces the device and resource half).
//! It travels in the run spec; the agent applies it between fork and exec.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Policy {
    /// The root filesystem is remounted read-only before the server starts.
    #[serde(default)]
    pub read_only_root: bool,
    /// /tmp is an empty, read-only directory.
    #[serde(default)]
    pub no_tmp: bool,
    /// The server gets only the variables it is given: no PATH or HOME.
    #[serde(default)]
    pub bare_env: bool,
    #[serde(default)]
    pub rlimits: Vec<Rlimit>,
    #[serde(default)]
    pub seccomp: Option<Seccomp>,
    /// Plant canary secrets before the server starts (credential files,
    /// a variable, a sibling of the workspace, a link out of it), each
    /// holding a token made for this run: `Event::Canaries` names them.
    #[serde(default)]
    pub canaries: bool,
    /// The server runs as root. By default it runs as the guest's
    /// unprivileged user ([`crate::ports::SERVER_USER`]), as on a
    /// developer's machine.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub root: bool,
}

/// One resource limit, soft and hard.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Rlimit {
    pub resource: Resource,
    pub value: u64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Resource {
    /// Open files (RLIMIT_NOFILE).
    Nofile,
    /// Processes and threads of the user (RLIMIT_NPROC).
    Nproc,
    /// CPU seconds (RLIMIT_CPU).
    Cpu,
    /// Largest file written, bytes (RLIMIT_FSIZE).
    Fsize,
    /// Address space, bytes (RLIMIT_AS).
    As,
}

impl Resource {
    pub const ALL: [Resource; 5] = [
        Resource::Nofile,
        Resource::Nproc,
        Resource::Cpu,
        Resource::Fsize,
        Resource::As,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Resource::Nofile => "nofile",
            Resource::Nproc => "nproc",
            Resource::Cpu => "cpu",
            Resource::Fsize => "fsize",
            Resource::As => "as",
        }
    }
}

/// The server's system call policy. Every rule's hits are counted and
/// reported; with `log`, so is every call the server makes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Seccomp {
    /// Checked in order; the first that matches decides.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// Record every system call (name and count), allowing what no rule
    /// denies.
    #[serde(default)]
    pub log: bool,
    /// An allow-list: calls no rule decides and not named here fail with
    /// this errno (a minimal profile proposed from a logged run).
    #[serde(default)]
    pub allow: Option<Allow>,
    /// Record the security-relevant calls of the server and everything
    /// it spawns, with their arguments (files opened and changed,
    /// programs run, addresses connected to), each attributed to the MCP
    /// request in flight: `Event::Effect`.
    #[serde(default)]
    pub record: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Allow {
    pub syscalls: Vec<String>,
    pub errno: i32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Rule {
    /// An x86_64 system call name (see the `syscall-table` crate).
    pub syscall: String,
    pub action: Action,
    #[serde(default)]
    pub when: When,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// The call fails with this errno; the server goes on.
    Errno(i32),
    /// The whole server process is killed (SIGSYS).
    Kill,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum When {
    /// Every call.
    #[default]
    Always,
    /// Calls whose argument `arg` (0-based) is one of `values` (compared
    /// as 32-bit values: flags, families, fds).
    ArgIn { arg: u8, values: Vec<u32> },
    /// Calls from every process but the first to make this call (the
    /// server's own process): for `execve`, the server may exec its way
    /// into its runtime (a shebang, `env`, `exec` in a shell), but no
    /// process it spawns may run another program.
    InChildren,
}
