//! virtio-blk (virtio 1.2, section 5.2): a disk image file on the host as
//! a block device in the guest.
//!
//! One request queue. A request is a descriptor chain: a 16-byte header
//! (`type`, reserved, `sector`) the device reads, then the data (read by
//! the device for a write, written for a read), then one status byte the
//! device writes (section 5.2.6). [`request`] parses and executes a chain;
//! every guest value is checked before use: the header must be whole, data
//! lengths multiples of 512, the sector range inside the disk (with
//! overflow checks), writes refused on a read-only disk. A bad request
//! gets `IOERR` (or `UNSUPP` for an unknown type) and the device goes on;
//! a chain with no room for the status byte is returned unused.
//!
//! Offered: `VERSION_1`, `FLUSH` (fdatasync of the image), `SEG_MAX`,
//! `BLK_SIZE` (512), and `RO` for a read-only disk; `GET_ID` answers the
//! disk's id. The worker thread owns the image while the device runs and
//! hands it back on reset.
//!
//! Caching ([`CacheMode`]): `Page` goes through the host page cache (fast
//! for read-mostly images shared by many VMs, since every VM reads the
//! same cached pages); `Direct` opens the image with `O_DIRECT` through an
//! aligned bounce buffer, so guest writes do not fill the host's cache.
//! Measured (docs/benchmarks.md, "Disk"): for one VM the two are within
//! noise of each other (page 0.90× direct on cold reads, 1.03× on
//! fsynced writes); `Page` is the default because these disks are mostly
//! read-only images shared by many VMs, which one host cache serves.

pub mod device;
pub mod disk;
pub mod request;

/// Sector size of the virtio-blk protocol, whatever the image.
pub const SECTOR: u64 = 512;
/// One queue of this size.
pub const QUEUE_SIZE: u16 = 256;
pub const QUEUE_SIZES: [u16; 1] = [QUEUE_SIZE];

/// Feature bits (section 5.2.3).
pub const F_SEG_MAX: u64 = 1 << 2;
pub const F_RO: u64 = 1 << 5;
pub const F_BLK_SIZE: u64 = 1 << 6;
pub const F_FLUSH: u64 = 1 << 9;

/// Request types (section 5.2.6).
pub const T_IN: u32 = 0;
pub const T_OUT: u32 = 1;
pub const T_FLUSH: u32 = 4;
pub const T_GET_ID: u32 = 8;

/// Status values.
pub const S_OK: u8 = 0;
pub const S_IOERR: u8 = 1;
pub const S_UNSUPP: u8 = 2;

/// Length of the id GET_ID returns (`VIRTIO_BLK_ID_BYTES`).
pub const ID_BYTES: usize = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheMode {
    /// Through the host page cache.
    #[default]
    Page,
    /// `O_DIRECT`: around the host page cache.
    Direct,
}
