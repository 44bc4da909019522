//! Early system setup for PID 1: the pseudo filesystems every program
//! expects, and facts about the VM for the boot report.

use std::ffi::CString;
use std::fs;
use std::io;

struct Mount {
    source: &'static str,
    target: &'static str,
    fstype: &'static str,
    flags: libc::c_ulong,
    data: &'static str,
}

const MOUNTS: &[Mount] = &[
    Mount {
        source: "devtmpfs",
        target: "/dev",
        fstype: "devtmpfs",
        flags: libc::MS_NOSUID,
        data: "mode=0755",
    },
    // POSIX shared memory (shm_open), as on any Linux machine: Chromium
    // makes its shared regions here, and Debian's launcher checks its size.
    Mount {
        source: "tmpfs",
        target: "/dev/shm",
        fstype: "tmpfs",
        flags: libc::MS_NOSUID | libc::MS_NODEV,
        data: "mode=1777",
    },
    Mount {
        source: "proc",
        target: "/proc",
        fstype: "proc",
        flags: libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        data: "",
    },
    Mount {
        source: "sysfs",
        target: "/sys",
        fstype: "sysfs",
        flags: libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        data: "",
    },
    Mount {
        source: "tmpfs",
        target: "/tmp",
        fstype: "tmpfs",
        flags: libc::MS_NOSUID | libc::MS_NODEV,
        data: "mode=1777",
    },
    Mount {
        source: "tmpfs",
        target: "/run",
        fstype: "tmpfs",
        flags: libc::MS_NOSUID | libc::MS_NODEV,
        data: "mode=0755",
    },
];

fn mount(m: &Mount) -> io::Result<()> {
    fs::create_dir_all(m.target)?;
    match mount_fs(m.source, m.target, m.fstype, m.flags, m.data) {
        // devtmpfs may already be mounted by the kernel (DEVTMPFS_MOUNT).
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Ok(()),
        r => r,
    }
}

/// mount(2); the error names what failed.
pub fn mount_fs(
    source: &str,
    target: &str,
    fstype: &str,
    flags: libc::c_ulong,
    data: &str,
) -> io::Result<()> {
    let c = |s: &str| CString::new(s).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput));
    let (csource, ctarget, cfstype, cdata) = (c(source)?, c(target)?, c(fstype)?, c(data)?);
    // SAFETY: all pointers are valid NUL-terminated strings for the call.
    let rc = unsafe {
        libc::mount(
            csource.as_ptr(),
            ctarget.as_ptr(),
            cfstype.as_ptr(),
            flags,
            cdata.as_ptr().cast(),
        )
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("mount {fstype} {source} on {target}: {e}"),
        ));
    }
    Ok(())
}

/// Mounts /dev, /proc, /sys, /tmp and /run.
pub fn mount_pseudo_filesystems() -> io::Result<()> {
    MOUNTS.iter().try_for_each(mount)
}

/// Number of CPUs online, from the kernel's "0-3"-style list.
pub fn cpus_online() -> Option<usize> {
    let list = fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
    parse_cpu_list(list.trim())
}

pub fn parse_cpu_list(list: &str) -> Option<usize> {
    list.split(',').try_fold(0, |n, part| {
        let count = match part.split_once('-') {
            Some((a, b)) => {
                b.parse::<usize>()
                    .ok()?
                    .checked_sub(a.parse::<usize>().ok()?)?
                    + 1
            }
            None => {
                part.parse::<usize>().ok()?;
                1
            }
        };
        Some(n + count)
    })
}

/// Total memory in MiB, from /proc/meminfo.
pub fn memory_mib() -> Option<u64> {
    let info = fs::read_to_string("/proc/meminfo").ok()?;
    let kb = info.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    Some(
        kb.trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<u64>()
            .ok()?
            / 1024,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0"), Some(1));
        assert_eq!(parse_cpu_list("0-3"), Some(4));
        assert_eq!(parse_cpu_list("0-1,4,6-7"), Some(5));
        assert_eq!(parse_cpu_list("x"), None);
        assert_eq!(parse_cpu_list("3-1"), None);
    }
}

/// RNDADDENTROPY and RNDRESEEDCRNG (linux/random.h): _IOW('R', 0x03,
/// int[2]) and _IO('R', 0x07).
const RNDADDENTROPY: libc::c_ulong = 0x4008_5203;
const RNDRESEEDCRNG: libc::c_ulong = 0x5207;

/// What a VM restored from a snapshot must not share with the snapshot
/// or its siblings: the wall clock is set to the host's (it stood still
/// while the snapshot waited), the host's entropy is added to the pool
/// and credited, then the kernel's CRNG reseeds at once (every restored
/// copy starts with the same pool, so without this they would draw the
/// same random numbers), and the hostname becomes the host's pick.
/// Each step that fails is said on the console; none stops the run.
pub fn resume(unix_ns: u64, entropy_hex: &str, hostname: &str) {
    let ts = libc::timespec {
        tv_sec: (unix_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (unix_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: clock_settime reads the struct we pass.
    if unsafe { libc::clock_settime(libc::CLOCK_REALTIME, &ts) } != 0 {
        eprintln!(
            "mcpvm-agent: cannot set the clock: {}",
            io::Error::last_os_error()
        );
    }
    if let Err(e) = add_entropy(entropy_hex) {
        eprintln!("mcpvm-agent: cannot reseed the random pool: {e}");
    }
    // SAFETY: sethostname reads len bytes of the slice.
    if unsafe { libc::sethostname(hostname.as_ptr().cast(), hostname.len()) } != 0 {
        eprintln!(
            "mcpvm-agent: cannot set the hostname: {}",
            io::Error::last_os_error()
        );
    }
}

fn add_entropy(hex: &str) -> io::Result<()> {
    let bytes: Vec<u8> = (0..hex.len() / 2)
        .filter_map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
        .collect();
    if bytes.len() < 32 || bytes.len() * 2 != hex.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the host's entropy is not at least 32 bytes of hex",
        ));
    }
    // struct rand_pool_info { int entropy_count; int buf_size; __u32 buf[]; }
    let mut info = Vec::with_capacity(8 + bytes.len());
    info.extend_from_slice(&((bytes.len() * 8) as i32).to_ne_bytes());
    info.extend_from_slice(&(bytes.len() as i32).to_ne_bytes());
    info.extend_from_slice(&bytes);
    let random = fs::OpenOptions::new().write(true).open("/dev/urandom")?;
    use std::os::fd::AsRawFd;
    // SAFETY: both ioctls read only the buffer we pass, which holds the
    // header and buf_size bytes.
    unsafe {
        if libc::ioctl(random.as_raw_fd(), RNDADDENTROPY, info.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::ioctl(random.as_raw_fd(), RNDRESEEDCRNG) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
