//! The image file behind a virtio-blk device.

use std::alloc::{self, Layout};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::{CacheMode, ID_BYTES, SECTOR};

/// Largest piece moved between the image and guest memory at once.
pub const CHUNK: usize = 256 << 10;
/// Alignment of `O_DIRECT` buffers (a page covers every logical block size).
const DIRECT_ALIGN: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    #[error("Cannot open disk image {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("The filesystem holding {path} does not support O_DIRECT; use the page cache mode")]
    DirectUnsupported { path: PathBuf },
    #[error("Disk image {path} is smaller than one 512-byte sector")]
    Empty { path: PathBuf },
    #[error("Disk id '{0}' is longer than 20 bytes")]
    Id(String),
}

/// A buffer aligned for `O_DIRECT`.
pub struct Bounce {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: the buffer is plain memory owned by this value alone.
unsafe impl Send for Bounce {}

impl Bounce {
    fn new(len: usize) -> Self {
        let layout = Layout::from_size_align(len, DIRECT_ALIGN).expect("valid layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            alloc::handle_alloc_error(layout);
        }
        Bounce { ptr, layout }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for layout.size() bytes, owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for Bounce {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { alloc::dealloc(self.ptr, self.layout) };
    }
}

pub struct Disk {
    file: File,
    path: PathBuf,
    /// Whole 512-byte sectors; a partial last sector is not exposed.
    sectors: u64,
    read_only: bool,
    id: [u8; ID_BYTES],
    /// The buffer every transfer goes through (aligned for O_DIRECT).
    pub bounce: Bounce,
}

impl Disk {
    pub fn open(
        path: &Path,
        read_only: bool,
        cache: CacheMode,
        id: &str,
    ) -> Result<Self, DiskError> {
        if id.len() > ID_BYTES {
            return Err(DiskError::Id(id.to_string()));
        }
        let mut opts = OpenOptions::new();
        opts.read(true).write(!read_only);
        if cache == CacheMode::Direct {
            opts.custom_flags(libc::O_DIRECT);
        }
        let file = opts.open(path).map_err(|source| {
            if source.raw_os_error() == Some(libc::EINVAL) && cache == CacheMode::Direct {
                DiskError::DirectUnsupported {
                    path: path.to_path_buf(),
                }
            } else {
                DiskError::Open {
                    path: path.to_path_buf(),
                    source,
                }
            }
        })?;
        let len = file
            .metadata()
            .map_err(|source| DiskError::Open {
                path: path.to_path_buf(),
                source,
            })?
            .len();
        let sectors = len / SECTOR;
        if sectors == 0 {
            return Err(DiskError::Empty {
                path: path.to_path_buf(),
            });
        }
        let mut idb = [0u8; ID_BYTES];
        idb[..id.len()].copy_from_slice(id.as_bytes());
        Ok(Disk {
            file,
            path: path.to_path_buf(),
            sectors,
            read_only,
            id: idb,
            bounce: Bounce::new(CHUNK),
        })
    }

    pub fn sectors(&self) -> u64 {
        self.sectors
    }

    pub fn read_only(&self) -> bool {
        self.read_only
    }

    pub fn id(&self) -> &[u8; ID_BYTES] {
        &self.id
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Byte offset of `len` bytes at `sector`, if the range is inside the
    /// disk and whole sectors.
    pub fn range(&self, sector: u64, len: usize) -> Option<u64> {
        let len = len as u64;
        if !len.is_multiple_of(SECTOR) {
            return None;
        }
        let end = sector.checked_add(len / SECTOR)?;
        (end <= self.sectors).then(|| sector * SECTOR)
    }

    /// Reads `len` (≤ CHUNK) bytes at `offset` into the bounce buffer.
    pub fn read_chunk(&mut self, offset: u64, len: usize) -> io::Result<&[u8]> {
        let buf = &mut self.bounce.as_mut_slice()[..len];
        self.file.read_exact_at(buf, offset)?;
        Ok(buf)
    }

    /// Writes the first `len` bytes of the bounce buffer at `offset`.
    pub fn write_chunk(&mut self, offset: u64, len: usize) -> io::Result<()> {
        let buf = &self.bounce.as_mut_slice()[..len];
        self.file.write_all_at(buf, offset)
    }

    pub fn flush(&self) -> io::Result<()> {
        if self.read_only {
            return Ok(());
        }
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_whole_sectors_inside_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.img");
        // 4 sectors and a partial one, which is not exposed.
        std::fs::write(&p, vec![0u8; 4 * 512 + 100]).unwrap();
        let d = Disk::open(&p, true, CacheMode::Page, "x").unwrap();
        assert_eq!(d.sectors(), 4);
        assert_eq!(d.range(0, 2048), Some(0));
        assert_eq!(d.range(3, 512), Some(1536));
        assert_eq!(d.range(3, 1024), None);
        assert_eq!(d.range(4, 0), Some(2048));
        assert_eq!(d.range(0, 100), None);
        assert_eq!(d.range(u64::MAX, 512), None);
        assert_eq!(d.range(u64::MAX / 512, 512), None);
    }

    #[test]
    fn bad_images_and_ids_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small.img");
        std::fs::write(&small, [0u8; 100]).unwrap();
        let e = Disk::open(&small, true, CacheMode::Page, "x")
            .err()
            .unwrap();
        assert!(
            e.to_string().contains("smaller than one 512-byte sector"),
            "{e}"
        );
        let e = Disk::open(&dir.path().join("none"), true, CacheMode::Page, "x")
            .err()
            .unwrap();
        assert!(e.to_string().starts_with("Cannot open disk image"), "{e}");
        let e = Disk::open(&small, true, CacheMode::Page, &"i".repeat(21))
            .err()
            .unwrap();
        assert!(e.to_string().contains("longer than 20 bytes"), "{e}");
    }

    #[test]
    fn direct_mode_reads_and_writes_through_the_aligned_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.img");
        std::fs::write(&p, vec![7u8; 8192]).unwrap();
        let mut d = match Disk::open(&p, false, CacheMode::Direct, "x") {
            Err(DiskError::DirectUnsupported { .. }) => {
                eprintln!(
                    "O_DIRECT unsupported on this temp filesystem: direct mode not exercised"
                );
                return;
            }
            r => r.unwrap(),
        };
        d.bounce.as_mut_slice()[..4096].fill(9);
        d.write_chunk(4096, 4096).unwrap();
        d.flush().unwrap();
        assert_eq!(d.read_chunk(0, 512).unwrap(), &[7u8; 512][..]);
        assert_eq!(d.read_chunk(4096, 512).unwrap(), &[9u8; 512][..]);
        drop(d);
        let back = std::fs::read(&p).unwrap();
        assert!(back[..4096].iter().all(|&b| b == 7) && back[4096..].iter().all(|&b| b == 9));
    }
}
