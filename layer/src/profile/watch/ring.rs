//! The access ring: what the SIGSEGV handler records, for normal code to take at the next window
//! boundary. A bounded multi-producer multi-consumer queue (Vyukov's) of preallocated cells:
//! pushing is a few atomics, async-signal-safe, and never blocks; a full ring drops the record
//! and counts it ([`DROPPED`]).

use crate::profile::sink::{stamp, thread_id_in_handler, Stamp};
use echo_analyzer::trace::Access;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// Accesses the ring holds between two drains (more are counted as dropped).
pub const RING: usize = 4096;

/// Ring cell of position `pos`.
fn cell(pos: usize) -> &'static Cell {
    // `pos % RING` is always an index of the ring.
    CELLS.get(pos % RING).unwrap_or(&CELLS_FALLBACK)
}
// Vyukov bounded MPMC queue; producers are signal handlers.
struct Cell {
    seq: AtomicUsize,
    id: AtomicU64,
    access: AtomicU8,
    at: AtomicU64,
    /// Host time of the fault (the trace's clock) and the faulting thread's small id.
    t: AtomicU64,
    thread: AtomicU32,
}
#[allow(clippy::declare_interior_mutable_const)]
const CELL_INIT: Cell = Cell {
    seq: AtomicUsize::new(0),
    id: AtomicU64::new(0),
    access: AtomicU8::new(0),
    at: AtomicU64::new(0),
    t: AtomicU64::new(0),
    thread: AtomicU32::new(0),
};
static CELLS: [Cell; RING] = [CELL_INIT; RING];
/// Never used: what [`cell`] would give for an index it cannot have.
static CELLS_FALLBACK: Cell = CELL_INIT;
static RING_INIT: AtomicBool = AtomicBool::new(false);
static ENQ: AtomicUsize = AtomicUsize::new(0);
static DEQ: AtomicUsize = AtomicUsize::new(0);

/// Numbers the cells (once, before the handler is installed).
pub(super) fn ring_init() {
    if !RING_INIT.load(Ordering::Acquire) {
        for (i, c) in CELLS.iter().enumerate() {
            c.seq.store(i, Ordering::Relaxed);
        }
        RING_INIT.store(true, Ordering::Release);
    }
}

/// Async-signal-safe push. Returns false when full.
fn push(id: u64, access: u8, at: Stamp, thread: u32) -> bool {
    let mut pos = ENQ.load(Ordering::Relaxed);
    loop {
        let c = cell(pos);
        let s = c.seq.load(Ordering::Acquire);
        let diff = s as isize - pos as isize;
        if diff == 0 {
            match ENQ.compare_exchange_weak(pos, pos + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    c.id.store(id, Ordering::Relaxed);
                    c.access.store(access, Ordering::Relaxed);
                    c.at.store(at.seq, Ordering::Relaxed);
                    c.t.store(at.t, Ordering::Relaxed);
                    c.thread.store(thread, Ordering::Relaxed);
                    c.seq.store(pos + 1, Ordering::Release);
                    return true;
                }
                Err(p) => pos = p,
            }
        } else if diff < 0 {
            return false;
        } else {
            pos = ENQ.load(Ordering::Relaxed);
        }
    }
}

fn pop() -> Option<(u64, u8, Stamp, u32)> {
    let mut pos = DEQ.load(Ordering::Relaxed);
    loop {
        let c = cell(pos);
        let s = c.seq.load(Ordering::Acquire);
        let diff = s as isize - (pos + 1) as isize;
        if diff == 0 {
            match DEQ.compare_exchange_weak(pos, pos + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    let v = (
                        c.id.load(Ordering::Relaxed),
                        c.access.load(Ordering::Relaxed),
                        Stamp {
                            seq: c.at.load(Ordering::Relaxed),
                            t: c.t.load(Ordering::Relaxed),
                        },
                        c.thread.load(Ordering::Relaxed),
                    );
                    c.seq.store(pos + RING, Ordering::Release);
                    return Some(v);
                }
                Err(p) => pos = p,
            }
        } else if diff < 0 {
            return None;
        } else {
            pos = DEQ.load(Ordering::Relaxed);
        }
    }
}

/// What a fault recorded of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// The program's host access. `ReadWrite`: a fault opened a page that also holds bytes of
    /// this (other) armed buffer, so its accesses to that page are no longer seen in this window
    /// and it counts as read and written (fail closed).
    Access(Access),
    /// A fault echo could not explain (code that is not the program's, `code.rs`) or finish
    /// opened the buffer's range for good: its host accesses are not seen from here on (the
    /// recorder stops watching it and the analyzer refuses its pairs: missing evidence).
    Lost,
}

const ACC_READ: u8 = 1;
const ACC_WRITE: u8 = 2;
const ACC_SHARED: u8 = 3;
const ACC_LOST: u8 = 4;

/// Accesses lost because the ring was full.
pub(super) static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Async-signal-safe: records `seen` of buffer `id` stamped now, in the handler (the trace's next
/// sequence number and host time) with the faulting thread's small id, or counts it dropped when
/// the ring is full.
/// Returns the record's sequence number (0: dropped).
pub(super) fn record(id: u64, seen: Seen) -> u64 {
    let acc = match seen {
        Seen::Access(Access::Read) => ACC_READ,
        Seen::Access(Access::Write) => ACC_WRITE,
        Seen::Access(Access::ReadWrite) => ACC_SHARED,
        Seen::Lost => ACC_LOST,
    };
    let at = stamp();
    if !push(id, acc, at, thread_id_in_handler()) {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return 0;
    }
    at.seq
}

/// The oldest record not taken yet: `(id, seen, stamp, thread)`.
pub(super) fn take() -> Option<(u64, Seen, Stamp, u32)> {
    let (id, acc, at, thread) = pop()?;
    let seen = match acc {
        ACC_WRITE => Seen::Access(Access::Write),
        ACC_SHARED => Seen::Access(Access::ReadWrite),
        ACC_LOST => Seen::Lost,
        _ => Seen::Access(Access::Read),
    };
    Some((id, seen, at, thread))
}
