//! One virtio-blk request: parse the chain, do it, write the status.

use std::io::{Read, Write};

use virtio_queue::{DescriptorChain, Reader, Writer};

use super::disk::{Disk, CHUNK};
use super::{ID_BYTES, S_IOERR, S_OK, S_UNSUPP, T_FLUSH, T_GET_ID, T_IN, T_OUT};
use crate::GuestMemoryMmap;

/// Header length: le32 type, le32 reserved, le64 sector (section 5.2.6).
pub const HEADER_LEN: usize = 16;

/// Executes the request in `chain`; returns the number of bytes written
/// to the guest (the used length), status byte included. A chain with no
/// writable byte for the status is not executed and uses 0 bytes.
pub fn execute(
    disk: &mut Disk,
    mem: &GuestMemoryMmap,
    chain: DescriptorChain<&GuestMemoryMmap>,
) -> u32 {
    let (Ok(mut reader), Ok(mut writer)) = (chain.clone().reader(mem), chain.writer(mem)) else {
        return 0;
    };
    let room = writer.available_bytes();
    if room == 0 {
        return 0;
    }
    // The status is the last writable byte; everything before is data.
    let Ok(mut status_writer) = writer.split_at(room - 1) else {
        return 0;
    };
    let status = run(disk, &mut reader, &mut writer);
    if status_writer.write_all(&[status]).is_err() {
        return 0;
    }
    (writer.bytes_written() + 1) as u32
}

fn run(disk: &mut Disk, reader: &mut Reader<'_>, data: &mut Writer<'_>) -> u8 {
    let mut hdr = [0u8; HEADER_LEN];
    if reader.read_exact(&mut hdr).is_err() {
        return S_IOERR;
    }
    let kind = u32::from_le_bytes(hdr[0..4].try_into().expect("4 bytes"));
    let sector = u64::from_le_bytes(hdr[8..16].try_into().expect("8 bytes"));
    match kind {
        T_IN => read(disk, sector, data),
        T_OUT => write(disk, sector, reader),
        T_FLUSH => match disk.flush() {
            Ok(()) => S_OK,
            Err(e) => {
                log::warn!("virtio-blk: flush of {} failed: {e}", disk.path().display());
                S_IOERR
            }
        },
        T_GET_ID => {
            let n = data.available_bytes().min(ID_BYTES);
            let id = *disk.id();
            match data.write_all(&id[..n]) {
                Ok(()) => S_OK,
                Err(_) => S_IOERR,
            }
        }
        _ => S_UNSUPP,
    }
}

/// Disk to guest.
fn read(disk: &mut Disk, sector: u64, data: &mut Writer<'_>) -> u8 {
    let len = data.available_bytes();
    let Some(mut offset) = disk.range(sector, len) else {
        return S_IOERR;
    };
    let mut left = len;
    while left > 0 {
        let n = left.min(CHUNK);
        let chunk = match disk.read_chunk(offset, n) {
            Ok(c) => c,
            Err(e) => {
                log::warn!("virtio-blk: read of {} failed: {e}", disk.path().display());
                return S_IOERR;
            }
        };
        if data.write_all(chunk).is_err() {
            return S_IOERR;
        }
        offset += n as u64;
        left -= n;
    }
    S_OK
}

/// Guest to disk.
fn write(disk: &mut Disk, sector: u64, data: &mut Reader<'_>) -> u8 {
    if disk.read_only() {
        return S_IOERR;
    }
    let len = data.available_bytes();
    let Some(mut offset) = disk.range(sector, len) else {
        return S_IOERR;
    };
    let mut left = len;
    while left > 0 {
        let n = left.min(CHUNK);
        if data
            .read_exact(&mut disk.bounce.as_mut_slice()[..n])
            .is_err()
        {
            return S_IOERR;
        }
        if let Err(e) = disk.write_chunk(offset, n) {
            log::warn!("virtio-blk: write of {} failed: {e}", disk.path().display());
            return S_IOERR;
        }
        offset += n as u64;
        left -= n;
    }
    S_OK
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::devices::virtio::block::CacheMode;
    use virtio_queue::desc::{split::Descriptor as SplitDescriptor, RawDescriptor};
    use virtio_queue::mock::MockSplitQueue;
    use virtio_queue::QueueOwnedT;
    use vm_memory::{Bytes, GuestAddress};

    const F_NEXT: u16 = 1;
    const F_WRITE: u16 = 2;
    pub const HDR: u64 = 0x10_0000;
    pub const DATA: u64 = 0x20_0000;
    pub const STATUS: u64 = 0x30_0000;

    pub fn mem() -> GuestMemoryMmap {
        GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0x100_0000)]).unwrap()
    }

    pub fn header(kind: u32, sector: u64) -> [u8; 16] {
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&kind.to_le_bytes());
        h[8..16].copy_from_slice(&sector.to_le_bytes());
        h
    }

    /// Builds one chain from (addr, len, device-writable) and runs it.
    pub fn submit(disk: &mut Disk, mem: &GuestMemoryMmap, descs: &[(u64, u32, bool)]) -> u32 {
        let q = MockSplitQueue::create(mem, GuestAddress(0), 16);
        let raw: Vec<RawDescriptor> = descs
            .iter()
            .enumerate()
            .map(|(i, &(addr, len, w))| {
                let mut flags = if w { F_WRITE } else { 0 };
                if i + 1 < descs.len() {
                    flags |= F_NEXT;
                }
                RawDescriptor::from(SplitDescriptor::new(addr, len, flags, i as u16 + 1))
            })
            .collect();
        q.build_desc_chain(&raw).unwrap();
        let mut queue: virtio_queue::Queue = q.create_queue().unwrap();
        let chain = queue.iter(mem).unwrap().next().unwrap();
        execute(disk, mem, chain)
    }

    pub fn status(mem: &GuestMemoryMmap) -> u8 {
        mem.read_obj::<u8>(GuestAddress(STATUS)).unwrap()
    }

    pub fn disk(bytes: &[u8], read_only: bool) -> (Disk, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.img");
        std::fs::write(&p, bytes).unwrap();
        (
            Disk::open(&p, read_only, CacheMode::Page, "mcpvm-test").unwrap(),
            dir,
        )
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[test]
    fn read_copies_sectors_and_reports_the_length() {
        let img = pattern(16 * 512);
        let (mut d, _t) = disk(&img, true);
        let m = mem();
        m.write_slice(&header(T_IN, 3), GuestAddress(HDR)).unwrap();
        // Data split over two descriptors, then the status.
        let used = submit(
            &mut d,
            &m,
            &[
                (HDR, 16, false),
                (DATA, 1024, true),
                (DATA + 0x1000, 512, true),
                (STATUS, 1, true),
            ],
        );
        assert_eq!(used, 1024 + 512 + 1);
        assert_eq!(status(&m), S_OK);
        let mut got = vec![0u8; 1536];
        m.read_slice(&mut got[..1024], GuestAddress(DATA)).unwrap();
        m.read_slice(&mut got[1024..], GuestAddress(DATA + 0x1000))
            .unwrap();
        assert_eq!(got, img[3 * 512..6 * 512]);
    }

    #[test]
    fn write_lands_in_the_image_and_flush_succeeds() {
        let (mut d, t) = disk(&vec![0u8; 8 * 512], false);
        let m = mem();
        m.write_slice(&header(T_OUT, 2), GuestAddress(HDR)).unwrap();
        let data = pattern(1024);
        m.write_slice(&data, GuestAddress(DATA)).unwrap();
        let used = submit(
            &mut d,
            &m,
            &[(HDR, 16, false), (DATA, 1024, false), (STATUS, 1, true)],
        );
        assert_eq!(used, 1);
        assert_eq!(status(&m), S_OK);
        m.write_slice(&header(T_FLUSH, 0), GuestAddress(HDR))
            .unwrap();
        assert_eq!(
            submit(&mut d, &m, &[(HDR, 16, false), (STATUS, 1, true)]),
            1
        );
        assert_eq!(status(&m), S_OK);
        let img = std::fs::read(t.path().join("d.img")).unwrap();
        assert_eq!(&img[1024..2048], &data[..]);
        assert!(img[..1024].iter().chain(&img[2048..]).all(|&b| b == 0));
    }

    #[test]
    fn a_read_only_disk_refuses_writes_and_stays_unchanged() {
        let img = pattern(4 * 512);
        let (mut d, t) = disk(&img, true);
        let m = mem();
        m.write_slice(&header(T_OUT, 0), GuestAddress(HDR)).unwrap();
        submit(
            &mut d,
            &m,
            &[(HDR, 16, false), (DATA, 512, false), (STATUS, 1, true)],
        );
        assert_eq!(status(&m), S_IOERR);
        assert_eq!(std::fs::read(t.path().join("d.img")).unwrap(), img);
    }

    #[test]
    fn out_of_range_misaligned_and_overflowing_requests_are_io_errors() {
        let (mut d, _t) = disk(&vec![0u8; 8 * 512], false);
        let m = mem();
        let cases: [(u32, u64, u32); 5] = [
            (T_IN, 7, 1024),        // runs past the end
            (T_IN, 8, 512),         // starts at the end
            (T_IN, 0, 100),         // not whole sectors
            (T_OUT, u64::MAX, 512), // sector * 512 overflows
            (T_OUT, u64::MAX / 512, 512),
        ];
        for (kind, sector, len) in cases {
            m.write_obj(0xffu8, GuestAddress(STATUS)).unwrap();
            m.write_slice(&header(kind, sector), GuestAddress(HDR))
                .unwrap();
            submit(
                &mut d,
                &m,
                &[
                    (HDR, 16, false),
                    (DATA, len, kind == T_IN),
                    (STATUS, 1, true),
                ],
            );
            assert_eq!(status(&m), S_IOERR, "type {kind} sector {sector} len {len}");
        }
    }

    #[test]
    fn short_headers_unknown_types_and_no_status_room() {
        let (mut d, _t) = disk(&vec![0u8; 8 * 512], false);
        let m = mem();
        // A header of 8 bytes.
        submit(&mut d, &m, &[(HDR, 8, false), (STATUS, 1, true)]);
        assert_eq!(status(&m), S_IOERR);
        // An unknown type (discard, not offered).
        m.write_slice(&header(11, 0), GuestAddress(HDR)).unwrap();
        submit(&mut d, &m, &[(HDR, 16, false), (STATUS, 1, true)]);
        assert_eq!(status(&m), S_UNSUPP);
        // Nothing writable: nothing done, nothing used.
        m.write_slice(&header(T_IN, 0), GuestAddress(HDR)).unwrap();
        assert_eq!(
            submit(&mut d, &m, &[(HDR, 16, false), (DATA, 512, false)]),
            0
        );
        // A descriptor outside guest memory.
        assert_eq!(
            submit(
                &mut d,
                &m,
                &[
                    (HDR, 16, false),
                    (0xfff_0000_0000, 512, true),
                    (STATUS, 1, true)
                ]
            ),
            0
        );
    }

    #[test]
    fn get_id_answers_the_disk_id() {
        let (mut d, _t) = disk(&vec![0u8; 512], false);
        let m = mem();
        m.write_slice(&header(T_GET_ID, 0), GuestAddress(HDR))
            .unwrap();
        let used = submit(
            &mut d,
            &m,
            &[(HDR, 16, false), (DATA, 20, true), (STATUS, 1, true)],
        );
        assert_eq!(used, 21);
        assert_eq!(status(&m), S_OK);
        let mut id = [0u8; 20];
        m.read_slice(&mut id, GuestAddress(DATA)).unwrap();
        assert_eq!(&id[..10], b"mcpvm-test");
        assert!(id[10..].iter().all(|&b| b == 0));
    }

    #[test]
    fn large_transfers_cross_the_chunk_size() {
        let img = pattern(2 * CHUNK + 4096);
        let (mut d, t) = disk(&img, false);
        let m = mem();
        let len = (CHUNK + 2048) as u32;
        m.write_slice(&header(T_IN, 1), GuestAddress(HDR)).unwrap();
        assert_eq!(
            submit(
                &mut d,
                &m,
                &[(HDR, 16, false), (DATA, len, true), (STATUS, 1, true)]
            ),
            len + 1
        );
        let mut got = vec![0u8; len as usize];
        m.read_slice(&mut got, GuestAddress(DATA)).unwrap();
        assert_eq!(got, img[512..512 + len as usize]);
        // And back, two sectors further on.
        m.write_slice(&header(T_OUT, 3), GuestAddress(HDR)).unwrap();
        submit(
            &mut d,
            &m,
            &[(HDR, 16, false), (DATA, len, false), (STATUS, 1, true)],
        );
        assert_eq!(status(&m), S_OK);
        let after = std::fs::read(t.path().join("d.img")).unwrap();
        assert_eq!(
            &after[1536..1536 + len as usize],
            &img[512..512 + len as usize]
        );
    }
}
