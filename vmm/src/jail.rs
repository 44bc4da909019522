//! A jail for the VMM process, in Firecracker's jailer pattern but without
//! root: new user, mount, network, IPC and UTS namespaces, the process
//! pivoted into a root that holds only the paths it was given (each at its
//! own absolute path, so nothing that names a path changes), and no
//! capabilities left.
//!
//! Why: one memory bug in a thread that may open or connect to paths owns
//! the host user. In the jail there is no `$HOME`, no session bus, no
//! `docker.sock`, no `$SSH_AUTH_SOCK` to name; abstract Unix sockets and
//! TCP belong to an empty network namespace.
//!
//! How: the new root is a tmpfs mounted on an empty directory the caller
//! names (so it hides nothing the binds need); the binds are made into it,
//! it is made read-only and pivoted into, and the host's tree is detached.
//! Where the host's root is the initramfs (rootfs cannot be pivoted away
//! from, as in our testbed), the new root is moved over `/` and chrooted
//! into instead: the host's tree stays mounted beneath but cannot be
//! named, and with no capabilities left no chroot can be undone.
//!
//! [`Jail::enter`] must run while the process has one thread: the kernel
//! refuses a new user namespace to a multi-threaded process.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Whether a run is jailed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JailMode {
    /// Jailed where the host allows unprivileged user namespaces; where it
    /// does not, the run goes on unjailed and `--verbose` says why.
    #[default]
    Auto,
    /// Jailed, or the run fails.
    On,
    Off,
}

impl JailMode {
    pub fn as_str(self) -> &'static str {
        match self {
            JailMode::Auto => "auto",
            JailMode::On => "on",
            JailMode::Off => "off",
        }
    }
}

impl FromStr for JailMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(JailMode::Auto),
            "on" => Ok(JailMode::On),
            "off" => Ok(JailMode::Off),
            _ => Err(format!("'{s}' is not a jail mode; use auto, on or off")),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum JailError {
    #[error("The host refuses a jail here ({0})")]
    Unavailable(#[source] io::Error),
    #[error("Cannot jail {path}: it does not exist")]
    Missing {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("Cannot set up the jail: {step}")]
    Setup {
        step: String,
        #[source]
        source: io::Error,
    },
}

/// What the jailed process may reach.
#[derive(Debug)]
pub struct Jail {
    /// An empty directory the new root is mounted on while it is built.
    build_at: PathBuf,
    binds: Vec<(PathBuf, bool)>,
    scratch: Vec<PathBuf>,
}

/// The source name of our tmpfs mounts (what /proc/mounts shows).
const TMPFS: &str = "tmpfs";
/// The most a scratch directory holds: sockets take no space; this bounds
/// what a compromised VMM can put there.
const SCRATCH_OPTIONS: &str = "mode=0700,size=1m,nr_inodes=256";

impl Jail {
    /// A jail built on `build_at`, an empty directory of ours that no
    /// bound path lies beneath.
    pub fn new(build_at: &Path) -> Self {
        Self {
            build_at: build_at.to_path_buf(),
            binds: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// A jail holding what every VM needs from the host: `/dev/kvm`, and
    /// the marker of what backs it, where they exist.
    pub fn for_vmm(build_at: &Path) -> Self {
        let mut jail = Self::new(build_at);
        for path in crate::kvm::host_paths().into_iter().filter(|p| p.exists()) {
            jail.bind(path, true);
        }
        jail
    }

    /// `path` (a file or directory, which must exist) appears in the jail
    /// at its canonical path, read-only unless `writable`.
    pub fn bind(&mut self, path: &Path, writable: bool) -> &mut Self {
        self.binds.push((path.to_path_buf(), writable));
        self
    }

    /// An empty private directory at `path`, gone with the jail.
    pub fn scratch(&mut self, path: &Path) -> &mut Self {
        self.scratch.push(path.to_path_buf());
        self
    }

    /// Jails the calling process, for good. `Unavailable` means nothing
    /// the process sees changed (the caller may go on unjailed, in
    /// namespaces of its own that change nothing it needs); any other
    /// error leaves the process half-jailed, and it must end.
    pub fn enter(&self) -> Result<(), JailError> {
        let mut binds = Vec::new();
        for (path, writable) in &self.binds {
            let real = std::fs::canonicalize(path).map_err(|source| JailError::Missing {
                path: path.clone(),
                source,
            })?;
            binds.push((real, *writable));
        }
        // Parents first, so a bind inside a bound directory lands on top.
        binds.sort_by_key(|(p, _)| p.components().count());
        let cwd = std::env::current_dir().ok();
        // SAFETY: getuid and getgid have no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };

        let namespaces = libc::CLONE_NEWUSER
            | libc::CLONE_NEWNS
            | libc::CLONE_NEWNET
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUTS;
        // SAFETY: unshare takes flags only.
        if unsafe { libc::unshare(namespaces) } != 0 {
            return Err(JailError::Unavailable(io::Error::last_os_error()));
        }
        let step = |step: &str| {
            let step = step.to_string();
            move |source| JailError::Setup { step, source }
        };
        // Until the new root is built nothing the process sees has changed
        // (its own namespaces, empty or copies): a host that refuses these
        // steps (AppArmor's restricted user namespaces let the unshare
        // through and refuse what follows) leaves it able to go on unjailed.
        let early = |what: &'static str| {
            move |e: io::Error| {
                JailError::Unavailable(io::Error::new(e.kind(), format!("{what}: {e}")))
            }
        };
        // The same ids inside: files keep their owners, and nobody is root.
        std::fs::write("/proc/self/setgroups", "deny").map_err(early("deny setgroups"))?;
        std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))
            .map_err(early("map the user id"))?;
        std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))
            .map_err(early("map the group id"))?;

        // Nothing done here may reach the host's mounts.
        mount(None, "/", None, libc::MS_REC | libc::MS_PRIVATE, None)
            .map_err(early("make the mounts private"))?;
        let root =
            std::fs::canonicalize(&self.build_at).map_err(step("find the build directory"))?;
        let inside = |path: &Path| root.join(path.strip_prefix("/").unwrap_or(path));
        if let Some((hidden, _)) = binds.iter().find(|(p, _)| p.starts_with(&root)) {
            return Err(step(&format!("bind {}", hidden.display()))(io::Error::new(
                io::ErrorKind::InvalidInput,
                "it lies in the directory the jail is built on",
            )));
        }
        let flags = libc::MS_NOSUID | libc::MS_NODEV;
        mount(
            Some(Path::new(TMPFS)),
            &root,
            Some("tmpfs"),
            flags,
            Some("mode=0755"),
        )
        .map_err(step("mount the new root"))?;
        for (path, writable) in &binds {
            bind(path, &inside(path), *writable)
                .map_err(step(&format!("bind {}", path.display())))?;
        }
        for path in &self.scratch {
            let to = inside(path);
            std::fs::create_dir_all(&to).map_err(step("make a scratch directory"))?;
            mount(
                Some(Path::new(TMPFS)),
                &to,
                Some("tmpfs"),
                flags | libc::MS_NOEXEC,
                Some(SCRATCH_OPTIONS),
            )
            .map_err(step(&format!("mount scratch {}", path.display())))?;
        }
        mount(
            None,
            &root,
            None,
            libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | flags,
            None,
        )
        .map_err(step("make the new root read-only"))?;

        std::env::set_current_dir(&root).map_err(step("enter the new root"))?;
        match pivot_root(".", ".") {
            // The old root lies on top of the new one now: detached with
            // everything under it, the host's tree is unreachable.
            Ok(()) => umount_detach(".").map_err(step("detach the host's tree"))?,
            // The host's root is rootfs, which cannot be pivoted away from.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                mount(Some(Path::new(".")), "/", None, libc::MS_MOVE, None)
                    .map_err(step("move the new root over /"))?;
                chroot(".").map_err(step("enter the new root"))?;
            }
            Err(e) => return Err(step("pivot into the new root")(e)),
        }
        std::env::set_current_dir("/").map_err(step("enter the jail"))?;
        if let Some(cwd) = cwd.filter(|d| d.is_dir()) {
            let _ = std::env::set_current_dir(cwd);
        }
        drop_capabilities().map_err(step("drop capabilities"))
    }
}

fn cstr(p: impl AsRef<Path>) -> io::Result<CString> {
    CString::new(p.as_ref().as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
}

fn mount(
    source: Option<&Path>,
    target: impl AsRef<Path>,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let source = source.map(cstr).transpose()?;
    let target = cstr(target)?;
    let fstype = fstype.map(Path::new).map(cstr).transpose()?;
    let data = data.map(Path::new).map(cstr).transpose()?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is null or a NUL-terminated string that
    // outlives the call.
    let rc = unsafe {
        libc::mount(
            ptr(&source),
            target.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data).cast(),
        )
    };
    match rc {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Binds `from` at `to` (made as an empty file or directory), read-only
/// unless `writable`. A read-only remount must keep the flags the host
/// mount is locked with (nosuid, nodev, noexec, atime), or it is refused.
fn bind(from: &Path, to: &Path, writable: bool) -> io::Result<()> {
    let is_dir = from.is_dir();
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match is_dir {
        true => std::fs::create_dir_all(to)?,
        false if !to.exists() => drop(std::fs::File::create(to)?),
        false => {}
    }
    mount(Some(from), to, None, libc::MS_BIND | libc::MS_REC, None)?;
    if writable {
        return Ok(());
    }
    let locked = host_flags(to)?;
    mount(
        None,
        to,
        None,
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | locked,
        None,
    )
}

/// The mount flags of the mount holding `path`, as `mount(2)` takes them.
fn host_flags(path: &Path) -> io::Result<libc::c_ulong> {
    let c = cstr(path)?;
    // SAFETY: statvfs fills the zeroed struct we pass.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let map = [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ];
    Ok(map
        .iter()
        .filter(|(st_flag, _)| st.f_flag & st_flag != 0)
        .fold(0, |acc, (_, ms)| acc | ms))
}

fn pivot_root(new_root: &str, put_old: &str) -> io::Result<()> {
    let (new_root, put_old) = (cstr(new_root)?, cstr(put_old)?);
    // SAFETY: two NUL-terminated paths.
    match unsafe { libc::syscall(libc::SYS_pivot_root, new_root.as_ptr(), put_old.as_ptr()) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

fn chroot(path: &str) -> io::Result<()> {
    let path = cstr(path)?;
    // SAFETY: a NUL-terminated path.
    match unsafe { libc::chroot(path.as_ptr()) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

fn umount_detach(target: &str) -> io::Result<()> {
    let target = cstr(target)?;
    // SAFETY: a NUL-terminated path.
    match unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// No capabilities now or after any exec: the bounding set emptied, then
/// the effective, permitted and inheritable sets; no new privileges.
fn drop_capabilities() -> io::Result<()> {
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments. Capabilities the kernel
        // does not know fail with EINVAL, which ends the loop.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            break;
        }
    }
    // SAFETY: prctl with integer arguments; fails only where ambient
    // capabilities do not exist, and then there are none to clear.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads a version-3 header and two data structs.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
