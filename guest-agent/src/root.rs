//! The guest's root filesystem when it comes from a disk image.
//!
//! `mcpvm.root=/dev/vdX` on the kernel command line: the agent (PID 1,
//! still in the initramfs) mounts that read-only image (EROFS unless
//! `mcpvm.rootfstype=` says otherwise), puts a tmpfs overlay on top so that
//! servers which write still run (`mcpvm.overlay=none` leaves the root
//! read-only), moves into it with chroot and mounts the pseudo filesystems
//! there. `mcpvm.layers=/dev/vdb,…` stacks more read-only images (a
//! server's layer) over the root, top-most first. Writes land in guest
//! memory only; the images on the host are never written (the disks are
//! read-only to the VMM as well).

use std::fs;
use std::io;

use crate::system::{mount_fs, mount_pseudo_filesystems};

#[derive(Debug, PartialEq)]
pub struct RootSpec {
    pub device: String,
    pub fstype: String,
    pub overlay: bool,
    /// Read-only layers over the root, top-most first.
    pub layers: Vec<String>,
}

/// The root spec on the kernel command line, if any.
pub fn from_cmdline(cmdline: &str) -> Option<RootSpec> {
    let param = |key: &str| {
        cmdline
            .split_whitespace()
            .find_map(|p| p.strip_prefix(key)?.strip_prefix('='))
    };
    Some(RootSpec {
        device: param("mcpvm.root")?.to_string(),
        fstype: param("mcpvm.rootfstype").unwrap_or("erofs").to_string(),
        overlay: param("mcpvm.overlay") != Some("none"),
        layers: param("mcpvm.layers")
            .map(|l| {
                l.split(',')
                    .filter(|d| !d.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
    })
}

const LOWER: &str = "/layers/root";
const RW: &str = "/layers/rw";
const NEW_ROOT: &str = "/newroot";

/// Mounts the image (and overlay) at /newroot and makes it the root.
pub fn enter(spec: &RootSpec) -> io::Result<()> {
    for d in [LOWER, RW, NEW_ROOT] {
        fs::create_dir_all(d)?;
    }
    mount_fs(&spec.device, LOWER, &spec.fstype, libc::MS_RDONLY, "")?;
    let mut lower = Vec::new();
    for (i, dev) in spec.layers.iter().enumerate() {
        let dir = format!("/layers/{i}");
        fs::create_dir_all(&dir)?;
        mount_fs(dev, &dir, "erofs", libc::MS_RDONLY, "")?;
        lower.push(dir);
    }
    lower.push(LOWER.to_string());
    let lowerdir = lower.join(":");
    if spec.overlay {
        mount_fs(
            "tmpfs",
            RW,
            "tmpfs",
            libc::MS_NOSUID | libc::MS_NODEV,
            "mode=0755",
        )?;
        fs::create_dir_all(format!("{RW}/upper"))?;
        fs::create_dir_all(format!("{RW}/work"))?;
        let data = format!("lowerdir={lowerdir},upperdir={RW}/upper,workdir={RW}/work");
        mount_fs("overlay", NEW_ROOT, "overlay", 0, &data)?;
    } else if !spec.layers.is_empty() {
        // Lower layers only: overlayfs mounts them read-only.
        let data = format!("lowerdir={lowerdir}");
        mount_fs("overlay", NEW_ROOT, "overlay", libc::MS_RDONLY, &data)?;
    } else {
        mount_fs(LOWER, NEW_ROOT, "", libc::MS_BIND, "")?;
        // A bind mount takes the read-only flag only on remount.
        mount_fs(
            "",
            NEW_ROOT,
            "",
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
            "",
        )?;
    }
    std::env::set_current_dir(NEW_ROOT)?;
    let dot = std::ffi::CString::new(".").expect("no NUL");
    // SAFETY: chroot to the current directory, a valid path.
    if unsafe { libc::chroot(dot.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    std::env::set_current_dir("/")?;
    mount_pseudo_filesystems()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_spec_from_the_command_line() {
        assert_eq!(from_cmdline("quiet mcpvm.channel=vsock"), None);
        assert_eq!(
            from_cmdline("quiet mcpvm.root=/dev/vda"),
            Some(RootSpec {
                device: "/dev/vda".into(),
                fstype: "erofs".into(),
                overlay: true,
                layers: vec![],
            })
        );
        let s =
            from_cmdline("mcpvm.root=/dev/vdb mcpvm.rootfstype=ext4 mcpvm.overlay=none").unwrap();
        assert_eq!(
            (s.device.as_str(), s.fstype.as_str(), s.overlay),
            ("/dev/vdb", "ext4", false)
        );
        let s = from_cmdline("mcpvm.root=/dev/vda mcpvm.layers=/dev/vdc,/dev/vdb").unwrap();
        assert_eq!(s.layers, ["/dev/vdc", "/dev/vdb"]);
        // A longer key with the same prefix is not ours.
        assert_eq!(from_cmdline("mcpvm.rootx=/dev/vda"), None);
    }
}
