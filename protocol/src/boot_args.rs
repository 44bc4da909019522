//! What the host tells the agent on the guest kernel's command line: what
//! the agent needs before any channel exists. Everything else comes in
//! the run spec on CONTROL (the command line holds about 2 KiB).
//!
//! - `mcpvm.channel=vsock`: the host drives the run over vsock.
//! - `mcpvm.root=/dev/vdX`: the root filesystem image (EROFS unless
//!   `mcpvm.rootfstype=` says otherwise), with a tmpfs overlay on top
//!   unless `mcpvm.overlay=none`.
//! - `mcpvm.layers=/dev/vdb,…`: read-only images stacked over the root,
//!   top-most first (a server's layer).
//!
//! The kernel does not pass dotted parameters to init: the agent reads
//! them from /proc/cmdline.

const CHANNEL: &str = "mcpvm.channel";
const ROOT: &str = "mcpvm.root";
const ROOTFSTYPE: &str = "mcpvm.rootfstype";
const OVERLAY: &str = "mcpvm.overlay";
const LAYERS: &str = "mcpvm.layers";
const DEFAULT_FSTYPE: &str = "erofs";

/// The agent's part of the kernel command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BootArgs {
    /// The host drives the run over vsock (else the agent runs the
    /// command after `--` and reports on the console).
    pub vsock_channel: bool,
    pub root: Option<RootSpec>,
}

/// The guest's root filesystem when it comes from a disk image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootSpec {
    pub device: String,
    pub fstype: String,
    /// A tmpfs overlay over the read-only image.
    pub overlay: bool,
    /// Read-only layers over the root, top-most first.
    pub layers: Vec<String>,
}

impl RootSpec {
    /// An EROFS image at `device`, with an overlay.
    pub fn erofs(device: &str) -> RootSpec {
        RootSpec {
            device: device.into(),
            fstype: DEFAULT_FSTYPE.into(),
            overlay: true,
            layers: Vec::new(),
        }
    }
}

impl BootArgs {
    /// The parameters, space-separated (empty when there are none).
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        if self.vsock_channel {
            out.push(format!("{CHANNEL}=vsock"));
        }
        if let Some(r) = &self.root {
            out.push(format!("{ROOT}={}", r.device));
            if r.fstype != DEFAULT_FSTYPE {
                out.push(format!("{ROOTFSTYPE}={}", r.fstype));
            }
            if !r.overlay {
                out.push(format!("{OVERLAY}=none"));
            }
            if !r.layers.is_empty() {
                out.push(format!("{LAYERS}={}", r.layers.join(",")));
            }
        }
        out.join(" ")
    }

    /// Reads ours from a whole kernel command line; others are ignored.
    pub fn parse(cmdline: &str) -> BootArgs {
        let param = |key: &str| {
            cmdline
                .split_whitespace()
                .find_map(|p| p.strip_prefix(key)?.strip_prefix('='))
        };
        BootArgs {
            vsock_channel: param(CHANNEL) == Some("vsock"),
            root: param(ROOT).map(|device| RootSpec {
                device: device.to_string(),
                fstype: param(ROOTFSTYPE).unwrap_or(DEFAULT_FSTYPE).to_string(),
                overlay: param(OVERLAY) != Some("none"),
                layers: param(LAYERS)
                    .map(|l| {
                        l.split(',')
                            .filter(|d| !d.is_empty())
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_spec_from_the_command_line() {
        let plain = BootArgs::parse("quiet mcpvm.channel=vsock");
        assert!(plain.vsock_channel);
        assert_eq!(plain.root, None);
        assert_eq!(
            BootArgs::parse("quiet mcpvm.root=/dev/vda").root,
            Some(RootSpec::erofs("/dev/vda"))
        );
        let s = BootArgs::parse("mcpvm.root=/dev/vdb mcpvm.rootfstype=ext4 mcpvm.overlay=none")
            .root
            .unwrap();
        assert_eq!(
            (s.device.as_str(), s.fstype.as_str(), s.overlay),
            ("/dev/vdb", "ext4", false)
        );
        let s = BootArgs::parse("mcpvm.root=/dev/vda mcpvm.layers=/dev/vdc,/dev/vdb")
            .root
            .unwrap();
        assert_eq!(s.layers, ["/dev/vdc", "/dev/vdb"]);
        // A longer key with the same prefix is not ours.
        assert_eq!(BootArgs::parse("mcpvm.rootx=/dev/vda").root, None);
        assert!(!BootArgs::parse("mcpvm.channel=serial").vsock_channel);
    }

    #[test]
    fn what_the_host_renders_the_agent_parses() {
        let cases = [
            BootArgs::default(),
            BootArgs {
                vsock_channel: true,
                root: None,
            },
            BootArgs {
                vsock_channel: true,
                root: Some(RootSpec {
                    overlay: false,
                    layers: vec!["/dev/vdb".into(), "/dev/vdc".into()],
                    ..RootSpec::erofs("/dev/vda")
                }),
            },
            BootArgs {
                vsock_channel: false,
                root: Some(RootSpec {
                    fstype: "ext4".into(),
                    ..RootSpec::erofs("/dev/vdb")
                }),
            },
        ];
        for args in cases {
            let line = format!("quiet {} panic=-1", args.render());
            assert_eq!(BootArgs::parse(&line), args, "{line}");
        }
        // The line the host has always sent for a catalogued server.
        let server = BootArgs {
            vsock_channel: true,
            root: Some(RootSpec {
                layers: vec!["/dev/vdb".into()],
                ..RootSpec::erofs("/dev/vda")
            }),
        };
        assert_eq!(
            server.render(),
            "mcpvm.channel=vsock mcpvm.root=/dev/vda mcpvm.layers=/dev/vdb"
        );
    }
}
