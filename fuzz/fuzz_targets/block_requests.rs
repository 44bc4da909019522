//! virtio-blk requests from a hostile queue: chains that loop, point
//! outside memory, claim absurd lengths, carry any header (type, sector
//! past the end), against a small read-write disk.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mcpvm_fuzz::{fill_data, hostile_queue, memory, scratch, Input};
use virtio_queue::QueueT;
use vmm::devices::virtio::block::disk::Disk;
use vmm::devices::virtio::block::request::execute;
use vmm::CacheMode;

/// One 64 KiB disk image for the whole run.
fn image() -> &'static std::path::Path {
    static IMAGE: OnceLock<(tempfile::TempDir, std::path::PathBuf)> = OnceLock::new();
    let (_, path) = IMAGE.get_or_init(|| {
        let d = scratch();
        let p = d.path().join("disk.img");
        std::fs::write(&p, vec![0x5a; 64 * 1024]).expect("disk image");
        (d, p)
    });
    path
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let read_only = input.u8() & 1 == 1;
    let Ok(mut disk) = Disk::open(image(), read_only, CacheMode::Page, "fuzz") else {
        return;
    };
    let mem = memory();
    let q = hostile_queue(&mem, 0, 16, &mut input);
    fill_data(&mem, &mut input);
    let Ok(mut queue) = q.create_queue::<virtio_queue::Queue>() else {
        return;
    };
    // The device's own loop: pop, execute, mark used; it must end.
    for _ in 0..64 {
        let Some(chain) = queue.pop_descriptor_chain(&mem) else {
            break;
        };
        let head = chain.head_index();
        let len = execute(&mut disk, &mem, chain);
        let _ = queue.add_used(&mem, head, len);
    }
});
