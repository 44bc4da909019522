//! The guest's network device: a TUN interface the agent holds, with the
//! guest's address, a default route through it, and `lo` up. Set with
//! the classic interface ioctls: the guest has no `ip` tool.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The interface's name.
pub const NAME: &str = "tun0";
/// Large packets, few of them: every packet passes through the agent.
pub const MTU: i32 = 65000;
/// Packets the kernel queues for the agent to read.
const TX_QUEUE: i32 = 4096;
const SIOCSIFTXQLEN: libc::Ioctl = 0x8943;

/// Opens `/dev/net/tun` as [`NAME`] (IP packets, no header), addresses
/// it, brings it and `lo` up, and routes everything not local through
/// it. The returned file reads and writes one packet per call.
pub fn open(addr: Ipv4Addr, prefix: u8) -> io::Result<File> {
    let dev = open_device()?;
    let mut req = ifreq(NAME);
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads an ifreq we own.
    check(unsafe { libc::ioctl(dev.as_raw_fd(), libc::TUNSETIFF, &mut req) })?;
    // SAFETY: a plain socket for the interface ioctls.
    let ctl = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    check(ctl)?;
    // SAFETY: ctl is a fresh fd we own.
    let ctl = unsafe { OwnedFd::from_raw_fd(ctl) };
    let fd = ctl.as_raw_fd();
    let mask = Ipv4Addr::from(u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0));
    set_addr(fd, NAME, libc::SIOCSIFADDR, addr)?;
    set_addr(fd, NAME, libc::SIOCSIFNETMASK, mask)?;
    let mut req = ifreq(NAME);
    req.ifr_ifru.ifru_mtu = MTU;
    // SAFETY: SIOCSIFMTU reads an ifreq we own.
    check(unsafe { libc::ioctl(fd, libc::SIOCSIFMTU, &mut req) })?;
    // A burst of connections outruns one reader: queue, don't drop.
    let mut req = ifreq(NAME);
    req.ifr_ifru.ifru_metric = TX_QUEUE;
    // SAFETY: SIOCSIFTXQLEN reads an ifreq we own (ifr_qlen shares the
    // int member of the union).
    check(unsafe { libc::ioctl(fd, SIOCSIFTXQLEN, &mut req) })?;
    up(fd, NAME)?;
    up(fd, "lo")?;
    default_route(fd, NAME)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot route through {NAME}: {e}")))?;
    Ok(dev)
}

/// Brings `lo` up (on its own, for a guest without a network).
pub fn loopback_up() -> io::Result<()> {
    // SAFETY: a plain socket for the interface ioctls.
    let ctl = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    check(ctl)?;
    // SAFETY: ctl is a fresh fd we own.
    let ctl = unsafe { OwnedFd::from_raw_fd(ctl) };
    up(ctl.as_raw_fd(), "lo")
}

fn open_device() -> io::Result<File> {
    let path = "/dev/net/tun";
    if !std::path::Path::new(path).exists() {
        // No devtmpfs node: make it (misc 10, 200).
        std::fs::create_dir_all("/dev/net")?;
        let c = CString::new(path).expect("no NUL");
        // SAFETY: mknod with a path we own.
        check(unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(10, 200)) })?;
    }
    OpenOptions::new().read(true).write(true).open(path)
}

fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain data; zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    req
}

fn sockaddr(addr: Ipv4Addr) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(addr).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr have the same size.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

fn set_addr(fd: i32, name: &str, op: libc::Ioctl, addr: Ipv4Addr) -> io::Result<()> {
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_addr = sockaddr(addr);
    // SAFETY: the ioctl reads an ifreq we own.
    check(unsafe { libc::ioctl(fd, op, &mut req) })
}

fn up(fd: i32, name: &str) -> io::Result<()> {
    let mut req = ifreq(name);
    // SAFETY: SIOCGIFFLAGS fills the ifreq we own.
    check(unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) })?;
    // SAFETY: the union's flags member is what SIOCGIFFLAGS wrote.
    unsafe { req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short };
    // SAFETY: SIOCSIFFLAGS reads the ifreq we own.
    check(unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS, &mut req) })
}

/// The kernel's `struct rtentry` (glibc's libc crate does not carry it).
#[repr(C)]
struct RtEntry {
    pad1: libc::c_ulong,
    dst: libc::sockaddr,
    gateway: libc::sockaddr,
    genmask: libc::sockaddr,
    flags: libc::c_ushort,
    pad2: libc::c_short,
    pad3: libc::c_ulong,
    pad4: *mut libc::c_void,
    metric: libc::c_short,
    dev: *mut libc::c_char,
    mtu: libc::c_ulong,
    window: libc::c_ulong,
    irtt: libc::c_ushort,
}

fn default_route(fd: i32, dev: &str) -> io::Result<()> {
    let dev = CString::new(dev).expect("no NUL");
    let mut rt = RtEntry {
        pad1: 0,
        dst: sockaddr(Ipv4Addr::UNSPECIFIED),
        gateway: sockaddr(Ipv4Addr::UNSPECIFIED),
        genmask: sockaddr(Ipv4Addr::UNSPECIFIED),
        flags: libc::RTF_UP,
        pad2: 0,
        pad3: 0,
        pad4: std::ptr::null_mut(),
        metric: 0,
        dev: dev.as_ptr().cast_mut(),
        mtu: 0,
        window: 0,
        irtt: 0,
    };
    // SAFETY: SIOCADDRT reads the rtentry and the name it points to, both
    // alive for the call.
    check(unsafe { libc::ioctl(fd, libc::SIOCADDRT, &mut rt) })
}

fn check(rc: libc::c_int) -> io::Result<()> {
    match rc < 0 {
        true => Err(io::Error::last_os_error()),
        false => Ok(()),
    }
}
