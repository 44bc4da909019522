//! `run`'s options as the command line gives them (`probe --vm` and
//! `pin` take the VM's too): parsed onto a [`RunRequest`], which is what
//! is checked, planned and handed between processes. Written back as
//! arguments only for what measures the command line a user types (the
//! benchmarks).

use std::path::PathBuf;

use crate::run::disk_arg::{parse_disk, DiskArg};
use crate::run::request::{
    parse_env_key, RequestError, RunRequest, VmRequest, DEFAULT_WORKSPACE_LIMIT_MIB,
};
use crate::server::CatalogueArg;
use crate::workspace::{parse_workspace, WorkspaceArg};

/// How the microVM is set up: shared by `run` and `probe --vm`.
#[derive(clap::Args, Clone, Debug, PartialEq)]
#[command(group(clap::ArgGroup::new("named_server").args(["server", "package"])))]
#[command(group(clap::ArgGroup::new("a_catalogue").args(["catalogue"]).requires("server")))]
pub struct VmOptions {
    /// Guest kernel (default: the one `scripts/build` made, next to this binary).
    #[arg(long, env = "MCPVM_KERNEL")]
    pub kernel: Option<PathBuf>,
    /// Guest initramfs holding the agent and the server.
    #[arg(long, env = "MCPVM_INITRD")]
    pub initrd: Option<PathBuf>,
    /// Guest memory in MiB [default: 256].
    #[arg(long)]
    pub mem: Option<u64>,
    /// vCPUs [default: 1].
    #[arg(long)]
    pub vcpus: Option<u8>,
    /// Working directory of the server inside the guest.
    #[arg(long)]
    pub cwd: Option<String>,
    /// Environment for the server: KEY=VALUE, or KEY alone to pass
    /// mcpvm's own KEY on (repeatable). Values reach the VM by
    /// environment, never on a command line mcpvm starts.
    #[arg(long = "env", value_name = "KEY[=VALUE]", value_parser = parse_env)]
    pub env: Vec<(String, Option<String>)>,
    /// KEY=VALUE lines (blank lines and `#` comments skipped) for the
    /// server's environment, before --env (repeatable).
    #[arg(long = "env-file", value_name = "FILE", value_parser = parse_env_file)]
    pub env_files: Vec<EnvFile>,
    /// A variable whose value is secret (repeatable): passed to the
    /// server (from --env, --env-file or mcpvm's environment) and
    /// redacted from everything `probe` and `audit` print, record or
    /// report, as the catalogue's credentials are.
    #[arg(long = "secret", value_name = "KEY", value_parser = parse_env_key)]
    pub secrets: Vec<String>,
    /// Write the guest console (kernel and agent messages) to this file.
    #[arg(long)]
    pub console: Option<PathBuf>,
    /// Stop the VM after this many seconds.
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Accept a kvm_pvm-backed /dev/kvm.
    #[arg(long)]
    pub allow_pvm: bool,
    /// A disk image: PATH[,rw][,cache=page|direct][,id=NAME]; read-only
    /// unless rw. Repeatable: /dev/vda, /dev/vdb, … in order.
    #[arg(long = "disk", value_parser = parse_disk)]
    pub disks: Vec<DiskArg>,
    /// Root filesystem image (EROFS, from guest-image/rootfs/build): the
    /// guest runs the server in it, read-only with a tmpfs overlay on top.
    #[arg(long)]
    pub image: Option<PathBuf>,
    /// A read-only EROFS layer over --image: its files over the image's in
    /// the guest's overlay (tools a job needs beside the runtime, such as
    /// the compilers `image build` gives a crate's build). Repeatable; the
    /// first is top-most.
    #[arg(long = "layer", value_name = "FILE", requires = "image")]
    pub layers: Vec<PathBuf>,
    /// No overlay on the root: it stays read-only.
    #[arg(long)]
    pub read_only_root: bool,
    /// Run a catalogued server (its image from `mcpvm image build`)
    /// instead of a command.
    #[arg(long, conflicts_with = "image")]
    pub server: Option<String>,
    /// A server named by its package instead of a catalogue entry:
    /// npm:NAME@VERSION, pypi:NAME==VERSION or cargo:NAME@VERSION (exact). Its layer is built
    /// on first use (install scripts in a microVM) and cached; arguments
    /// after `--` go to the server.
    #[arg(long, value_name = "SPEC", conflicts_with_all = ["image", "server", "catalogue"])]
    pub package: Option<String>,
    /// With --package: its dependencies as they were when that version
    /// was published (npm --before, uv --exclude-newer, at the
    /// registry's date), for an old release whose dependencies moved on.
    #[arg(long, requires = "package")]
    pub as_released: bool,
    /// --catalogue and --catalogue-only, for --server.
    #[command(flatten)]
    pub catalogue: CatalogueArg,
    /// The image store for --server and --package [default:
    /// ~/.cache/mcpvm/images].
    #[arg(long, requires = "named_server")]
    pub images: Option<PathBuf>,
    /// A host directory at /workspace in the guest: DIR (read-only: the
    /// guest's changes are dropped) or DIR,rw (its copy comes back).
    #[arg(long, value_parser = parse_workspace)]
    pub workspace: Option<WorkspaceArg>,
    /// Withholding profile: a name, or several joined by '+'
    /// (docs/withholding.md). --mem and --vcpus, when given, win over it.
    #[arg(long)]
    pub profile: Option<String>,
    /// Profiles file (TOML) adding to the built-in profiles.
    #[arg(long, requires = "profile")]
    pub profiles: Option<PathBuf>,
    /// Withhold the virtio-rng entropy device.
    #[arg(long)]
    pub no_rng: bool,
    /// Host seccomp filters on the VMM's threads (docs/security.md): on
    /// stops the VMM at a call outside a thread's list, log lets it
    /// through and the kernel logs it, off installs none.
    #[arg(long, default_value = "on", value_name = "off|log|on")]
    pub seccomp: vmm::SeccompMode,
    /// Jail the VMM (docs/security.md): its own user, mount and network
    /// namespaces, a root holding only the run's kernel, images and
    /// sockets, no capabilities. auto jails where the host allows
    /// unprivileged user namespaces, on fails where it does not.
    #[arg(long, default_value = "auto", value_name = "auto|on|off")]
    pub jail: vmm::jail::JailMode,
    /// Largest workspace the guest may send back, MiB.
    #[arg(long, default_value_t = DEFAULT_WORKSPACE_LIMIT_MIB)]
    pub workspace_limit: u64,
    /// Let the guest reach HOST[:PORT] (repeatable; docs/network.md):
    /// a name, *.domain, *, an address, or host.mcpvm.internal. Adds to
    /// the catalogue's rules; a profile may narrow them.
    #[arg(long = "allow-net", value_name = "HOST[:PORT]", value_parser = withholding::network::Rule::parse)]
    pub allow_net: Vec<withholding::network::Rule>,
    /// Listen here on the host (e.g. 127.0.0.1:8931) and forward each
    /// connection to a server that speaks Streamable HTTP in the guest:
    /// a catalogued server with `transport = "http"`, or a command's
    /// --guest-port.
    /// Loopback only unless --listen-non-loopback; every connection must
    /// show the run's bearer token (MCPVM_LISTEN_TOKEN, or one made and
    /// said on stderr) and a loopback Host (docs/network.md).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<std::net::SocketAddr>,
    /// Let --listen bind an address other hosts can reach.
    #[arg(long, requires = "listen")]
    pub listen_non_loopback: bool,
    /// --listen's socket, already bound by the caller and passed as this
    /// descriptor (the probe holds its port from choice to use).
    #[arg(long, hide = true, value_name = "FD", requires = "listen")]
    pub listen_fd: Option<i32>,
    /// The guest port the command listens on, for --listen.
    #[arg(long, value_name = "PORT", requires = "listen")]
    pub guest_port: Option<u16>,
}

/// `mcpvm run`'s options: the VM's, and what the run writes and starts
/// from.
#[derive(clap::Args, Clone, Debug, PartialEq)]
pub struct RunArgs {
    #[command(flatten)]
    pub vm: VmOptions,
    /// Write the run's phase times (ms since start) to this JSON file.
    #[arg(long)]
    pub timings: Option<PathBuf>,
    /// Append the guest agent's events (JSON lines, each with `at_ms`):
    /// spawn, first output, OOM, denied and used system calls, exit.
    #[arg(long)]
    pub events: Option<PathBuf>,
    /// Once the server has answered an `initialize` from mcpvm itself,
    /// pause the VM and write it to this snapshot directory
    /// (docs/snapshots.md), then exit 0; `--from-snapshot DIR` starts it.
    #[arg(long, value_name = "DIR", conflicts_with = "workspace")]
    pub snapshot_to: Option<PathBuf>,
    /// Start the server from a snapshot `--snapshot-to` wrote, instead of
    /// booting and starting it: the VM, its devices and the server come
    /// from the snapshot.
    #[arg(long, value_name = "DIR", conflicts_with_all = [
        "command", "snapshot_to", "kernel", "initrd", "mem", "vcpus", "cwd", "env",
        "image", "read_only_root", "server", "package", "workspace", "profile", "no_rng",
    ])]
    pub from_snapshot: Option<PathBuf>,
    /// Start the server from the warm-start cache: restored from a
    /// snapshot of the same VM and server taken after `initialize`, taken
    /// now (one cold start) if there is none yet (docs/snapshots.md).
    #[arg(long, conflicts_with_all = ["snapshot_to", "from_snapshot", "workspace"])]
    pub warm: bool,
    /// The warm-start cache [default: ~/.cache/mcpvm/snapshots].
    #[arg(long, value_name = "DIR", requires = "warm")]
    pub snapshots: Option<PathBuf>,
    /// The whole run as a request file another mcpvm process wrote
    /// (`probe`, the warm cache): no other option goes with it.
    #[arg(long, hide = true, value_name = "FILE")]
    pub request: Option<PathBuf>,
    /// The server command and its arguments, as seen inside the guest.
    #[arg(last = true, required_unless_present_any = ["server", "package", "from_snapshot", "request"])]
    pub command: Vec<String>,
}

impl RunArgs {
    /// The run asked for: `--request`'s file, or these options.
    pub fn into_request(self) -> Result<RunRequest, RequestError> {
        let Some(path) = self.request.clone() else {
            return Ok(self.into());
        };
        match RunRequest::from(self).is_default_but_for_environment() {
            true => RunRequest::read(&path),
            false => Err(RequestError::Alone("run")),
        }
    }
}

impl RunRequest {
    /// Nothing asked beyond the defaults, but for the kernel and
    /// initramfs that MCPVM_KERNEL and MCPVM_INITRD give every parse:
    /// a child started with `--request` inherits them.
    pub fn is_default_but_for_environment(&self) -> bool {
        let mut r = self.clone();
        r.vm.kernel = None;
        r.vm.initrd = None;
        r == RunRequest::default()
    }
}

impl From<RunArgs> for RunRequest {
    fn from(a: RunArgs) -> RunRequest {
        RunRequest {
            vm: a.vm.into(),
            timings: a.timings,
            events: a.events,
            snapshot_to: a.snapshot_to,
            from_snapshot: a.from_snapshot,
            warm: a.warm,
            snapshots: a.snapshots,
            command: a.command,
        }
    }
}

impl From<VmOptions> for VmRequest {
    /// `--env-file`s' variables first, then `--env`'s: a later one wins.
    fn from(o: VmOptions) -> VmRequest {
        let files = o.env_files.into_iter().flat_map(|f| f.vars);
        VmRequest {
            kernel: o.kernel,
            initrd: o.initrd,
            mem: o.mem,
            vcpus: o.vcpus,
            cwd: o.cwd,
            env: files.map(|(k, v)| (k, Some(v))).chain(o.env).collect(),
            secrets: o.secrets,
            console: o.console,
            timeout: o.timeout,
            allow_pvm: o.allow_pvm,
            disks: o.disks,
            image: o.image,
            layers: o.layers,
            read_only_root: o.read_only_root,
            server: o.server,
            package: o.package,
            as_released: o.as_released,
            catalogue: o.catalogue,
            images: o.images,
            workspace: o.workspace,
            profile: o.profile,
            profiles: o.profiles,
            no_rng: o.no_rng,
            seccomp: o.seccomp,
            jail: o.jail,
            workspace_limit: o.workspace_limit,
            allow_net: o.allow_net,
            listen: o.listen,
            listen_non_loopback: o.listen_non_loopback,
            listen_fd: o.listen_fd,
            guest_port: o.guest_port,
        }
    }
}

impl RunRequest {
    /// The `mcpvm run` arguments (after `run`) that ask for this run as
    /// a user types them (the benchmarks measure that command line):
    /// parsing them gives this request back, variables by name.
    pub fn to_args(&self) -> Vec<String> {
        let mut a = Args(self.vm.to_args());
        a.path("timings", &self.timings);
        a.path("events", &self.events);
        a.path("snapshot-to", &self.snapshot_to);
        a.path("from-snapshot", &self.from_snapshot);
        a.flag("warm", self.warm);
        a.path("snapshots", &self.snapshots);
        if !self.command.is_empty() {
            a.push("--".into());
            a.0.extend(self.command.iter().cloned());
        }
        a.0
    }
}

impl VmRequest {
    /// The same options as `mcpvm run` arguments: parsing them gives
    /// these options back (a test holds the two to it).
    pub fn to_args(&self) -> Vec<String> {
        let mut a = Args::default();
        a.path("kernel", &self.kernel);
        a.path("initrd", &self.initrd);
        a.value("mem", &self.mem);
        a.value("vcpus", &self.vcpus);
        a.value("cwd", &self.cwd);
        // Names only: the values go in the child's environment
        // ([`VmRequest::environment`]), where `ps` does not show them.
        let mut names: Vec<&str> = Vec::new();
        for (k, _) in &self.env {
            if !names.contains(&k.as_str()) {
                names.push(k);
            }
        }
        for k in names {
            a.push(format!("--env={k}"));
        }
        for k in &self.secrets {
            a.push(format!("--secret={k}"));
        }
        a.path("console", &self.console);
        a.value("timeout", &self.timeout);
        a.flag("allow-pvm", self.allow_pvm);
        for d in &self.disks {
            a.push(format!("--disk={}", d.text));
        }
        a.path("image", &self.image);
        for l in &self.layers {
            a.push(format!("--layer={}", l.display()));
        }
        a.flag("read-only-root", self.read_only_root);
        a.value("server", &self.server);
        a.value("package", &self.package);
        a.flag("as-released", self.as_released);
        a.path("catalogue", &self.catalogue.path);
        a.flag("catalogue-only", self.catalogue.only);
        a.path("images", &self.images);
        a.value("workspace", &self.workspace.as_ref().map(|w| &w.text));
        a.value("profile", &self.profile);
        a.path("profiles", &self.profiles);
        a.flag("no-rng", self.no_rng);
        a.value("seccomp", &Some(self.seccomp.as_str()));
        a.value("jail", &Some(self.jail.as_str()));
        a.value("workspace-limit", &Some(self.workspace_limit));
        for r in &self.allow_net {
            a.push(format!("--allow-net={r}"));
        }
        a.value("listen", &self.listen);
        a.flag("listen-non-loopback", self.listen_non_loopback);
        a.value("listen-fd", &self.listen_fd);
        a.value("guest-port", &self.guest_port);
        a.0
    }
}

fn parse_env(s: &str) -> Result<(String, Option<String>), String> {
    match s.split_once('=') {
        Some((k, v)) => Ok((parse_env_key(k)?, Some(v.to_string()))),
        None => Ok((parse_env_key(s)?, None)),
    }
}

/// An `--env-file`: its path and the variables it holds, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct EnvFile {
    pub path: PathBuf,
    pub vars: Vec<(String, String)>,
}

/// Reads an `--env-file` when the options are parsed: one clear error
/// names the file and the line.
fn parse_env_file(s: &str) -> Result<EnvFile, String> {
    let path = PathBuf::from(s);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {s}: {e}"))?;
    let mut vars = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((k, v)) = line.split_once('=') else {
            return Err(format!("{s} line {}: not KEY=VALUE", i + 1));
        };
        let k = parse_env_key(k.trim()).map_err(|e| format!("{s} line {}: {e}", i + 1))?;
        vars.push((k, v.to_string()));
    }
    Ok(EnvFile { path, vars })
}

/// Command-line arguments being written, `--name=value` each.
#[derive(Default)]
pub struct Args(pub Vec<String>);

impl Args {
    pub fn push(&mut self, arg: String) {
        self.0.push(arg);
    }

    pub fn flag(&mut self, name: &str, on: bool) {
        if on {
            self.0.push(format!("--{name}"));
        }
    }

    pub fn value(&mut self, name: &str, v: &Option<impl std::fmt::Display>) {
        if let Some(v) = v {
            self.0.push(format!("--{name}={v}"));
        }
    }

    pub fn path(&mut self, name: &str, p: &Option<PathBuf>) {
        self.value(name, &p.as_ref().map(|p| p.display()));
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    pub(crate) struct Cli {
        #[command(flatten)]
        pub(crate) vm: VmOptions,
    }

    fn parsed(args: &[String]) -> VmOptions {
        Cli::try_parse_from(std::iter::once("mcpvm".to_string()).chain(args.iter().cloned()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
            .vm
    }

    /// The request `args` ask for.
    fn requested(args: &[String]) -> VmRequest {
        parsed(args).into()
    }

    #[test]
    fn values_come_from_files_options_and_mcpvms_environment_and_leave_as_names() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("env");
        std::fs::write(&f, "# keys\nA=from-file\n\nexport TOKEN=s3cret=x\n").unwrap();
        let o = parsed(&[
            format!("--env-file={}", f.display()),
            "--env=A=from-option".into(),
            "--env=PATH".into(),
            "--secret=TOKEN".into(),
        ]);
        let req = VmRequest::from(o);
        let env = req.environment().unwrap();
        assert_eq!(
            env,
            [
                ("TOKEN".to_string(), "s3cret=x".to_string()),
                ("A".into(), "from-option".into()),
                ("PATH".into(), std::env::var("PATH").unwrap()),
            ]
        );
        // No value on the command line a child is given.
        let args = req.to_args();
        assert!(
            args.iter()
                .all(|a| !a.contains("s3cret") && !a.contains("from-")),
            "{args:?}"
        );
        assert!(
            args.contains(&"--env=TOKEN".to_string())
                && args.contains(&"--secret=TOKEN".to_string())
        );
        // A name mcpvm's environment lacks is one clear error.
        let missing = parsed(&["--env=MCPVM_TEST_SURELY_UNSET_VARIABLE".into()]);
        let e = VmRequest::from(missing)
            .environment()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("MCPVM_TEST_SURELY_UNSET_VARIABLE is not set") && e.contains("--env-file"),
            "{e}"
        );
        // Bad files and names are refused as they are read.
        std::fs::write(&f, "A=1\nno equals sign\n").unwrap();
        let e = Cli::try_parse_from(["mcpvm".to_string(), format!("--env-file={}", f.display())])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("line 2: not KEY=VALUE"), "{e}");
        let e = Cli::try_parse_from(["mcpvm", "--env", "A B=1"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("not an environment variable name"), "{e}");
    }

    #[test]
    fn a_request_file_comes_alone() {
        #[derive(Parser)]
        struct RunCli {
            #[command(flatten)]
            run: RunArgs,
        }
        let t = tempfile::tempdir().unwrap();
        let req = RunRequest {
            vm: VmRequest {
                mem: Some(300),
                ..VmRequest::default()
            },
            command: vec!["/bin/server".into()],
            ..RunRequest::default()
        };
        let path = req.write_in(t.path()).unwrap();
        let parse = |extra: &[&str]| {
            let argv = ["mcpvm", "--request", path.to_str().unwrap()];
            RunCli::try_parse_from(argv.iter().chain(extra))
                .unwrap()
                .run
                .into_request()
        };
        assert_eq!(parse(&[]).unwrap(), req);
        let e = parse(&["--mem", "5"]).unwrap_err().to_string();
        assert!(e.contains("no other option"), "{e}");
        // The options alone are the same request.
        let given = RunCli::try_parse_from(["mcpvm", "--mem", "300", "--", "/bin/server"])
            .unwrap()
            .run;
        assert_eq!(given.into_request().unwrap(), req);
    }

    #[test]
    fn a_request_survives_the_trip_through_arguments() {
        let all = VmRequest {
            kernel: Some("/k/vmlinux".into()),
            initrd: Some("/k/initrd.cpio".into()),
            mem: Some(512),
            vcpus: Some(2),
            cwd: Some("/srv dir".into()),
            // Names only: the values travel by environment (below).
            env: vec![("A".into(), None), ("B".into(), None)],
            secrets: vec!["B".into()],
            console: Some("console.log".into()),
            timeout: Some(30),
            allow_pvm: true,
            disks: vec![crate::run::disk_arg::parse_disk("d.img,rw,id=data").unwrap()],
            image: None,
            layers: Vec::new(),
            read_only_root: true,
            server: Some("memory".into()),
            package: None,
            as_released: false,
            catalogue: CatalogueArg {
                path: Some("cat.toml".into()),
                only: true,
            },
            images: Some("/images".into()),
            workspace: Some(parse_workspace("ws,rw").unwrap()),
            profile: Some("no-tmp+deny-exec".into()),
            profiles: Some("p.toml".into()),
            no_rng: true,
            seccomp: vmm::SeccompMode::Log,
            jail: vmm::jail::JailMode::Off,
            workspace_limit: 7,
            allow_net: ["api.github.com:443", "[2001:db8::1]"]
                .map(|r| withholding::network::Rule::parse(r).unwrap())
                .to_vec(),
            listen: Some("127.0.0.1:8931".parse().unwrap()),
            listen_non_loopback: true,
            listen_fd: Some(3),
            guest_port: Some(3001),
        };
        assert_eq!(requested(&all.to_args()), all);
        let image = VmRequest {
            image: Some("root.erofs".into()),
            layers: vec!["tools.erofs".into(), "b.erofs".into()],
            ..VmRequest::default()
        };
        // The default request is what clap gives for no options.
        assert_eq!(requested(&[]), VmRequest::default());
        assert_eq!(
            requested(&VmRequest::default().to_args()),
            VmRequest::default()
        );
        assert_eq!(requested(&image.to_args()), image);
        let package = VmRequest {
            package: Some("npm:@modelcontextprotocol/server-memory@2026.8.31".into()),
            images: Some("/store".into()),
            ..VmRequest::default()
        };
        assert_eq!(requested(&package.to_args()), package);
        let released = VmRequest {
            package: Some("pypi:mcp-server-fetch==2025.4.7".into()),
            as_released: true,
            ..VmRequest::default()
        };
        assert_eq!(requested(&released.to_args()), released);
    }
}
