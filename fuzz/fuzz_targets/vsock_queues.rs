//! virtio-vsock from a hostile guest: TX chains carrying any header (bad
//! ops, types, lengths, credits, ports) and payload, RX chains of any
//! shape, processed by the device's worker and muxer against a host
//! socket directory with one listening port.
#![no_main]

use std::os::unix::net::UnixListener;
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use mcpvm_fuzz::{fill_data, hostile_queue, memory, Input};
use vmm::devices::virtio::vsock::connector::Connector;
use vmm::devices::virtio::vsock::event_handler::Worker;
use vmm::devices::virtio::vsock::muxer::Muxer;
use vmm::devices::virtio::{Activation, DeviceThread, Interrupt};
use vmm::host_seccomp::{SeccompMode, ThreadKind};
use vmm_sys_util::eventfd::EventFd;

struct Host {
    _dir: tempfile::TempDir,
    uds: std::path::PathBuf,
    thread: Arc<DeviceThread>,
    /// Guest connects to port 1024 reach this listener.
    _port: UnixListener,
}

fn host() -> &'static Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let uds = dir.path().join("v.sock");
        let port = UnixListener::bind(format!("{}_1024", uds.display())).expect("port listener");
        Host {
            thread: Arc::new(
                DeviceThread::spawn(ThreadKind::Vsock, SeccompMode::Off).expect("thread"),
            ),
            _dir: dir,
            uds,
            _port: port,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let h = host();
    let mut input = Input(data);
    let mem = memory();
    let rx = hostile_queue(&mem, 0, 16, &mut input);
    let tx = hostile_queue(&mem, 0x1_0000, 16, &mut input);
    let ev = hostile_queue(&mem, 0x2_0000, 4, &mut input);
    fill_data(&mem, &mut input);
    let (Ok(rxq), Ok(txq), Ok(evq)) = (rx.create_queue(), tx.create_queue(), ev.create_queue())
    else {
        return;
    };
    let evt = || EventFd::new(libc::EFD_NONBLOCK).expect("eventfd");
    let a = Activation {
        mem: mem.clone(),
        queues: vec![rxq, txq, evq],
        queue_evts: vec![evt(), evt(), evt()],
        interrupt: Arc::new(Interrupt::new(evt())),
        thread: h.thread.clone(),
        restored: false,
    };
    // A fresh listener per run: the host side of the device's own socket.
    let listen_path = h.uds.with_extension(format!("{}", std::process::id()));
    let _ = std::fs::remove_file(&listen_path);
    let Ok(listener) = UnixListener::bind(&listen_path) else {
        return;
    };
    let _ = listener.set_nonblocking(true);
    let direct = std::sync::Arc::new(Connector::Direct(h.uds.clone()));
    let Ok(mut worker) = Worker::new(a, Muxer::new(3, direct), listener, evt()) else {
        return;
    };
    for _ in 0..4 {
        worker.process();
    }
    let _ = std::fs::remove_file(&listen_path);
});
