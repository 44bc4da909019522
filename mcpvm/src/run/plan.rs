//! What a run will be, resolved from the options before anything is
//! created: the VM (kernel, initrd, command line, disks, shape, devices)
//! and the run spec the agent gets (command, environment, policy). Pure
//! apart from looking for the default kernel and initrd, so that bad
//! input is one clear error that leaves nothing behind, and so that the
//! warm-start cache can key on exactly what the VM will be.

use std::path::{Path, PathBuf};

use mcpvm_protocol::boot_args::{BootArgs, RootSpec};
use mcpvm_protocol::messages::{RunSpec, Workspace};
use mcpvm_protocol::withholding::Policy;

use super::request::{Checked, VmRequest};
use crate::run::RunError;
use crate::server::ServerPlan;
use withholding::profile::Profile;

/// The guest's memory when neither --mem nor the profile says.
const DEFAULT_MEM_MIB: u64 = 256;
/// Options every guest kernel gets; the agent's own follow.
const KERNEL_OPTIONS: &str = "quiet";

/// A resolved run (of a booting VM; a restored one takes all of this
/// from its snapshot).
#[derive(Debug, Clone, PartialEq)]
pub struct RunPlan {
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    pub cmdline: String,
    pub mem_mib: u64,
    pub vcpus: u8,
    pub rng: bool,
    /// In guest order: /dev/vda, /dev/vdb, …
    pub disks: Vec<vmm::DiskConfig>,
    pub spec: RunSpec,
    /// Who the guest may reach; None: no network (docs/network.md).
    pub network: Option<withholding::network::NetworkPolicy>,
}

impl RunPlan {
    /// Resolves `opts` (checked into `checked`) and the guest `command`
    /// (empty for a catalogued server) into a plan. `snapshot`: the host
    /// may snapshot this run.
    pub fn resolve(
        opts: &VmRequest,
        checked: &Checked,
        command: Vec<String>,
        snapshot: bool,
    ) -> Result<RunPlan, RunError> {
        let kernel = crate::exe::default_artifact("kernel", opts.kernel.clone(), "kernel/vmlinux")?;
        let initrd =
            crate::exe::default_artifact("initrd", opts.initrd.clone(), "initramfs-test.cpio")?;
        Ok(RunPlan::with_artifacts(
            opts, checked, command, snapshot, kernel, initrd,
        ))
    }

    /// [`RunPlan::resolve`] with the kernel and initrd already found.
    pub fn with_artifacts(
        opts: &VmRequest,
        checked: &Checked,
        command: Vec<String>,
        snapshot: bool,
        kernel: PathBuf,
        initrd: PathBuf,
    ) -> RunPlan {
        let Checked {
            profile, server, ..
        } = checked;
        let (argv, env) = command_and_env(opts, checked, command);
        let (disks, root) = disks_and_root(opts, checked);
        let boot = BootArgs {
            vsock_channel: true,
            root,
        };

        RunPlan {
            kernel,
            initrd,
            cmdline: format!("{KERNEL_OPTIONS} {}", boot.render()),
            mem_mib: mem_mib(opts.mem, profile.as_ref(), server.as_ref()),
            vcpus: opts
                .vcpus
                .or(profile.as_ref().map(|p| p.vcpus))
                .unwrap_or(1),
            rng: !opts.no_rng && profile.as_ref().is_none_or(|p| p.rng),
            disks,
            spec: RunSpec {
                argv,
                env,
                cwd: opts.cwd.clone(),
                workspace: opts.workspace.as_ref().map(|w| Workspace {
                    writable: w.writable,
                }),
                setup: server.as_ref().and_then(|s| s.setup.clone()),
                policy: policy(profile.as_ref(), server.as_ref()),
                snapshot,
                network: checked.network.is_some(),
                inbound: checked.inbound,
            },
            network: checked.network.clone(),
        }
    }

    /// Every file the VM is made of (kernel, initrd, disks).
    pub fn files(&self) -> Vec<&Path> {
        let mut files = vec![self.kernel.as_path(), self.initrd.as_path()];
        files.extend(self.disks.iter().map(|d| d.path.as_path()));
        files
    }
}

/// The profile's guest half; root when the profile or the server's
/// catalogue entry asks for it.
fn policy(profile: Option<&Profile>, server: Option<&ServerPlan>) -> Policy {
    let mut policy = profile.map(|p| p.policy.clone()).unwrap_or_default();
    policy.root |= server.is_some_and(|s| s.root);
    policy
}

/// The VM's memory: the user's `--mem`, else a profile's that sets it,
/// else the default or the profile's raised to the server's minimum (a
/// browser's server gets the memory Chromium needs).
fn mem_mib(given: Option<u64>, profile: Option<&Profile>, server: Option<&ServerPlan>) -> u64 {
    let min = server.map_or(0, |s| s.min_mem_mib);
    match (given, profile) {
        (Some(m), _) => m,
        (None, Some(p)) if p.mem_set => p.mem_mib,
        (None, p) => p.map_or(DEFAULT_MEM_MIB, |p| p.mem_mib).max(min),
    }
}

/// The server's command and environment, then the profile's environment
/// (which may clear it), then the user's.
fn command_and_env(
    opts: &VmRequest,
    checked: &Checked,
    command: Vec<String>,
) -> (Vec<String>, Vec<(String, String)>) {
    let (argv, mut env) = match &checked.server {
        // A package's server takes the arguments given after `--`.
        Some(s) if opts.package.is_some() => ([s.argv.clone(), command].concat(), s.env.clone()),
        Some(s) => (s.argv.clone(), s.env.clone()),
        None => (command, Vec::new()),
    };
    if let Some(p) = &checked.profile {
        if p.clear_env {
            // A python layer finds its packages by PYTHONPATH where a venv
            // needs no variable: clearing that would break every python
            // server for how mcpvm installs it, not for what it needs.
            env = checked
                .server
                .as_ref()
                .map(|s| s.install_env.clone())
                .unwrap_or_default();
        }
        env.extend(p.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    env.extend(checked.env.iter().cloned());
    (argv, env)
}

/// The root image is the first disk (/dev/vda), the server's layer the
/// second, then --layer's, then the user's; the agent's root spec says so.
fn disks_and_root(opts: &VmRequest, checked: &Checked) -> (Vec<vmm::DiskConfig>, Option<RootSpec>) {
    let read_only = |path: &Path, id: &str| vmm::DiskConfig {
        path: path.to_path_buf(),
        read_only: true,
        cache: vmm::CacheMode::Page,
        id: id.into(),
    };
    let mut disks = Vec::new();
    let mut root = None;
    if let Some(img) = &checked.root_image {
        disks.push(read_only(img, "mcpvm-root"));
        root = Some(RootSpec {
            overlay: !opts.read_only_root,
            ..RootSpec::erofs("/dev/vda")
        });
    }
    if let (Some(s), Some(root)) = (&checked.server, root.as_mut()) {
        disks.push(read_only(&s.layer, "mcpvm-layer"));
        root.layers.push("/dev/vdb".into());
    }
    if let Some(root) = root.as_mut() {
        for layer in &opts.layers {
            root.layers
                .push(format!("/dev/vd{}", char::from(b'a' + disks.len() as u8)));
            disks.push(read_only(layer, "mcpvm-layer"));
        }
    }
    disks.extend(opts.disks.iter().map(|d| d.config.clone()));
    (disks, root)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::ServerPlan;
    use crate::withholding::Profiles;

    fn plan(opts: &VmRequest, checked: &Checked, command: &[&str]) -> RunPlan {
        RunPlan::with_artifacts(
            opts,
            checked,
            command.iter().map(|s| s.to_string()).collect(),
            false,
            "vmlinux".into(),
            "initrd.cpio".into(),
        )
    }

    fn nothing() -> Checked {
        Checked {
            profile: None,
            server: None,
            root_image: None,
            network: Default::default(),
            inbound: None,
            env: Vec::new(),
            secrets: Vec::new(),
        }
    }

    #[test]
    fn a_bare_command_boots_the_initramfs_with_defaults() {
        let p = plan(&VmRequest::default(), &nothing(), &["/bin/mcp-fixture"]);
        assert_eq!(p.cmdline, "quiet mcpvm.channel=vsock");
        assert_eq!((p.mem_mib, p.vcpus, p.rng), (256, 1, true));
        assert!(p.disks.is_empty());
        assert_eq!(p.spec.argv, ["/bin/mcp-fixture"]);
        assert_eq!(p.files(), [Path::new("vmlinux"), Path::new("initrd.cpio")]);
    }

    /// A browser's server gets the memory Chromium needs over the default
    /// and over a profile that does not set memory; the user's `--mem`
    /// and a profile that withholds memory still decide.
    #[test]
    fn a_servers_minimum_memory_yields_to_the_user_and_to_withholding() {
        let profile = |text: &str, name: &str| {
            withholding::profile::Profiles::parse(text, "t")
                .unwrap()
                .resolve(name)
                .unwrap()
        };
        let server = ServerPlan {
            min_mem_mib: 1024,
            ..ServerPlan::default()
        };
        let quiet = profile("[profile.quiet]\ndescription = \"x\"\n", "quiet");
        let tiny = profile(
            "[profile.tiny]\ndescription = \"x\"\nmem_mib = 128\n",
            "tiny",
        );
        assert_eq!(mem_mib(None, None, Some(&server)), 1024);
        assert_eq!(mem_mib(None, Some(&quiet), Some(&server)), 1024);
        assert_eq!(mem_mib(None, Some(&tiny), Some(&server)), 128);
        assert_eq!(mem_mib(Some(512), None, Some(&server)), 512);
        assert_eq!(mem_mib(None, None, None), DEFAULT_MEM_MIB);
        // The built-in profiles start from 512 MiB in [defaults]: that is
        // not a profile withholding memory; tiny-mem is.
        let built_in = withholding::profile::Profiles::built_in();
        let deny_net = built_in.resolve("deny-net").unwrap();
        assert_eq!(mem_mib(None, Some(&deny_net), Some(&server)), 1024);
        let tiny = built_in.resolve("deny-net+tiny-mem").unwrap();
        assert_eq!(mem_mib(None, Some(&tiny), Some(&server)), 96);
    }

    #[test]
    fn a_server_gets_its_image_and_layer_as_the_first_disks() {
        let checked = Checked {
            profile: None,
            server: Some(ServerPlan {
                runtime: "runtime.erofs".into(),
                layer: "memory.erofs".into(),
                argv: vec!["node".into(), "server.js".into()],
                env: vec![("FROM".into(), "catalogue".into())],
                install_env: Vec::new(),
                secrets: Vec::new(),
                setup: Some("git init".into()),
                root: false,
                network: vec![],
                http_port: None,
                min_mem_mib: 0,
            }),
            root_image: Some("runtime.erofs".into()),
            network: Default::default(),
            inbound: None,
            env: Vec::new(),
            secrets: Vec::new(),
        };
        let opts = VmRequest {
            disks: vec![crate::run::disk_arg::parse_disk("data.img,rw").unwrap()],
            read_only_root: true,
            ..VmRequest::default()
        };
        let p = plan(&opts, &checked, &[]);
        assert_eq!(
            p.cmdline,
            "quiet mcpvm.channel=vsock mcpvm.root=/dev/vda mcpvm.overlay=none mcpvm.layers=/dev/vdb"
        );
        let disks: Vec<_> = p
            .disks
            .iter()
            .map(|d| (d.path.to_str().unwrap(), d.read_only))
            .collect();
        assert_eq!(
            disks,
            [
                ("runtime.erofs", true),
                ("memory.erofs", true),
                ("data.img", false)
            ]
        );
        assert_eq!(p.spec.argv, ["node", "server.js"]);
        assert_eq!(p.spec.setup.as_deref(), Some("git init"));
        // The unprivileged user, unless the entry or a profile asks.
        assert!(!p.spec.policy.root);
        let mut rooted = checked;
        rooted.server.as_mut().unwrap().root = true;
        assert!(plan(&opts, &rooted, &[]).spec.policy.root);
        let built_in = withholding::profile::Profiles::built_in();
        let by_profile = Checked {
            profile: Some(built_in.resolve("root").unwrap()),
            ..nothing()
        };
        assert!(
            plan(&VmRequest::default(), &by_profile, &["/bin/sh"])
                .spec
                .policy
                .root
        );
    }

    #[test]
    fn layers_stack_over_the_image_in_the_order_given() {
        let checked = Checked {
            root_image: Some("runtime.erofs".into()),
            ..nothing()
        };
        let opts = VmRequest {
            layers: vec!["tools.erofs".into(), "more.erofs".into()],
            disks: vec![crate::run::disk_arg::parse_disk("data.img,rw").unwrap()],
            ..VmRequest::default()
        };
        let p = plan(&opts, &checked, &["/bin/sh"]);
        assert!(
            p.cmdline
                .ends_with("mcpvm.root=/dev/vda mcpvm.layers=/dev/vdb,/dev/vdc"),
            "{}",
            p.cmdline
        );
        let disks: Vec<_> = p
            .disks
            .iter()
            .map(|d| (d.path.to_str().unwrap(), d.read_only))
            .collect();
        assert_eq!(
            disks,
            [
                ("runtime.erofs", true),
                ("tools.erofs", true),
                ("more.erofs", true),
                ("data.img", false)
            ]
        );
    }

    #[test]
    fn the_profile_shapes_the_vm_unless_the_options_say_otherwise() {
        let profiles = Profiles::built_in();
        let checked = Checked {
            profile: Some(profiles.resolve("tiny-mem+no-rng+no-env").unwrap()),
            server: None,
            root_image: None,
            network: Default::default(),
            inbound: None,
            env: Vec::new(),
            secrets: Vec::new(),
        };
        let p = plan(&VmRequest::default(), &checked, &["/bin/s"]);
        let profile = checked.profile.as_ref().unwrap();
        assert_eq!(p.mem_mib, profile.mem_mib);
        assert!(!p.rng);
        assert_eq!(p.spec.policy, profile.policy);
        let opts = VmRequest {
            mem: Some(1024),
            ..VmRequest::default()
        };
        let checked = Checked {
            env: vec![("USER_SET".into(), "1".into())],
            ..checked
        };
        let p = plan(&opts, &checked, &["/bin/s"]);
        assert_eq!(p.mem_mib, 1024);
        // The profile clears the environment; the user's still comes.
        assert_eq!(p.spec.env, [("USER_SET".to_string(), "1".to_string())]);
        // What a server's installation needs to run stays: a python
        // layer's PYTHONPATH, not its HOME or its catalogue's variables.
        let install = ("PYTHONPATH".to_string(), "/opt/mcp/git".to_string());
        let checked = Checked {
            server: Some(ServerPlan {
                argv: vec!["/opt/mcp/git/bin/mcp-server-git".into()],
                env: vec![
                    install.clone(),
                    ("HOME".into(), "/tmp".into()),
                    ("GIT_TOKEN".into(), "x".into()),
                ],
                install_env: vec![install.clone()],
                ..ServerPlan::default()
            }),
            ..checked
        };
        let p = plan(&opts, &checked, &[]);
        assert_eq!(
            p.spec.env,
            [install, ("USER_SET".to_string(), "1".to_string())]
        );
    }
}
