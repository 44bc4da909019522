//! The event loop of a device with one request queue (virtio-blk,
//! virtio-rng): wait for the driver's notification or the kill eventfd,
//! run every available chain through the device's handler, put each on
//! the used ring with the length the handler wrote, interrupt once.

use std::os::fd::AsRawFd;
use std::sync::Arc;

use virtio_queue::{DescriptorChain, Queue, QueueT};
use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};
use vmm_sys_util::eventfd::EventFd;

use super::{ActivateError, Activation, Interrupt};
use crate::GuestMemoryMmap;

const TOKEN_QUEUE: u64 = 0;
const TOKEN_KILL: u64 = 1;

/// A chain as the handler sees it.
pub type Chain<'a> = DescriptorChain<&'a GuestMemoryMmap>;

pub struct QueueWorker {
    mem: GuestMemoryMmap,
    queue: Queue,
    evt: EventFd,
    interrupt: Arc<Interrupt>,
    epoll: Epoll,
    _kill: EventFd,
}

impl QueueWorker {
    /// Takes the single queue of `a`; `kill` is the eventfd that ends
    /// [`Self::run`] (the worker keeps a clone).
    pub fn new(a: Activation, kill: &EventFd) -> Result<Self, ActivateError> {
        if a.queues.len() != 1 || a.queue_evts.len() != 1 {
            return Err(ActivateError::QueueCount {
                expected: 1,
                got: a.queues.len(),
            });
        }
        let kill = kill.try_clone().map_err(ActivateError::Worker)?;
        let epoll = Epoll::new().map_err(ActivateError::Worker)?;
        let evt = a.queue_evts.into_iter().next().expect("one queue event");
        for (fd, token) in [
            (evt.as_raw_fd(), TOKEN_QUEUE),
            (kill.as_raw_fd(), TOKEN_KILL),
        ] {
            epoll
                .ctl(
                    ControlOperation::Add,
                    fd,
                    EpollEvent::new(EventSet::IN, token),
                )
                .map_err(ActivateError::Worker)?;
        }
        Ok(QueueWorker {
            mem: a.mem,
            queue: a.queues.into_iter().next().expect("one queue"),
            evt,
            interrupt: a.interrupt,
            epoll,
            _kill: kill,
        })
    }

    /// Serves the queue until the kill eventfd fires. `name` goes in logs.
    /// Between rounds of at most a queue's worth of chains it looks at its
    /// epoll without waiting, so that a guest refilling the queue as fast
    /// as it is emptied cannot keep the kill eventfd from being seen.
    pub fn run(&mut self, name: &str, mut handle: impl FnMut(&GuestMemoryMmap, Chain<'_>) -> u32) {
        let mut events = vec![EpollEvent::default(); 4];
        let mut more = false;
        loop {
            let timeout = if more { 0 } else { -1 };
            let n = match self.epoll.wait(timeout, &mut events) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::error!("{name} worker: epoll failed: {e}");
                    return;
                }
            };
            if events[..n].iter().any(|ev| ev.data() == TOKEN_KILL) {
                return;
            }
            if n > 0 {
                let _ = self.evt.read();
            }
            more = self.process(&mut handle);
        }
    }

    /// Hands at most a queue's worth of available chains to `handle`
    /// (a chain that uses an indirect table, which we never offer, is
    /// returned unused), then interrupts once. True when there may be
    /// more.
    pub fn process(&mut self, mut handle: impl FnMut(&GuestMemoryMmap, Chain<'_>) -> u32) -> bool {
        let mut taken = 0;
        for _ in 0..self.queue.size() {
            let Some(chain) = self.queue.pop_descriptor_chain(&self.mem) else {
                break;
            };
            taken += 1;
            let head = chain.head_index();
            let len = if super::uses_indirect(&self.mem, &self.queue, head) {
                log::debug!("virtio: chain {head} uses an indirect table, never offered; dropped");
                0
            } else {
                handle(&self.mem, chain)
            };
            let _ = self.queue.add_used(&self.mem, head, len);
        }
        if taken > 0 && self.queue.needs_notification(&self.mem).unwrap_or(true) {
            self.interrupt.signal_used_queue();
        }
        taken == self.queue.size()
    }
}
