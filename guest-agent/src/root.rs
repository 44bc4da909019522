//! The guest's root filesystem when it comes from a disk image.
//!
//! `mcpvm.root=/dev/vdX` on the kernel command line
//! (`mcpvm_protocol::boot_args`): the agent (PID 1,
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

use mcpvm_protocol::boot_args::RootSpec;

use crate::system::{mount_fs, mount_pseudo_filesystems};

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
