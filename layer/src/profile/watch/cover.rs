//! Exact host-write coverage (issue 54): which bytes of an *exact* slot the host's stores wrote
//! in the current window.
//!
//! One bit per byte of the slot's range `[start, end)`, in a bitmap of atomics allocated by
//! `arm` (normal code) and never freed while the process runs (a slot that needs a larger one
//! gets a new one; the old one is leaked, so a handler still holding it never reads freed
//! memory). The handler sets bits with `fetch_or` (async-signal-safe: no allocation, no lock);
//! `arm` clears them at each window boundary while the slot is BUSY.
//!
//! A slot whose window cannot be exact (an instruction echo does not decode, no other view to
//! carry a store through, another platform, a fault it cannot finish) records why in its
//! `cov_any` field ([`Why`]); its writes in that window are then "any part" again, as without
//! this file.

use std::sync::atomic::{AtomicU64, Ordering};

/// A coverage bitmap: bit `i` is byte `start + i` of its slot.
pub(super) struct Cover {
    pub(super) words: Box<[AtomicU64]>,
}

impl Cover {
    /// A bitmap for `bytes` bytes, all clear (normal code: allocates).
    pub(super) fn new(bytes: usize) -> Cover {
        let n = bytes.div_ceil(64);
        Cover {
            words: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Bytes it can hold.
    pub(super) fn bytes(&self) -> usize {
        self.words.len() * 64
    }

    /// Clear every bit (normal code, the slot BUSY).
    pub(super) fn clear(&self) {
        for w in self.words.iter() {
            w.store(0, Ordering::Relaxed);
        }
    }
}

/// Why a window of an exact slot fell back to "any part" (`Slot::cov_any`; 0: still exact).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Why {
    Exact = 0,
    /// A store echo does not decode or cannot carry through the other view (a
    /// read-modify-write, an access crossing a page, a locked or masked form, ...).
    Decode = 1,
    /// The range has no other view (no double mapping): a store cannot be done by the handler.
    NoShadow = 2,
    /// Not x86_64 Linux: stores are not emulated on this platform.
    Platform = 3,
    /// A fault echo could not explain or finish opened the range.
    Lost = 4,
    /// The bitmap could not be prepared, or an emulation of the last window was still running.
    Busy = 5,
    /// The run's exact stores went past [`MAX_STORES`]: exact writes cost one fault per store,
    /// so they stop there (a bounded cost).
    Budget = 6,
}

/// Stores exact host writes may record in one run, over every buffer, before every exact
/// window falls back to "any part" ([`Why::Budget`]) and no buffer is made exact again; 0: no
/// limit. Set by normal code from `VK_ECHO_EXACT_WRITES_MAX_STORES` (the recorder); read by the
/// handler. Each store is a fault, so this bounds what exact writes add to a profiled run.
pub static MAX_STORES: AtomicU64 = AtomicU64::new(DEFAULT_MAX_STORES);

/// 2,097,152 stores: at the 2–4 µs a fault costs on this machine, at most about 4–8 s added to
/// a profiled run (8 MiB written 4 bytes at a time, 32 MiB 16 at a time).
pub const DEFAULT_MAX_STORES: u64 = 1 << 21;

/// Exact stores recorded so far in this process (the handler adds one per store).
pub static SPENT: AtomicU64 = AtomicU64::new(0);

/// Is the budget spent?
pub fn spent() -> bool {
    let max = MAX_STORES.load(Ordering::Relaxed);
    max != 0 && SPENT.load(Ordering::Relaxed) >= max
}

/// [`MAX_STORES`] now.
pub fn max_stores() -> u64 {
    MAX_STORES.load(Ordering::Relaxed)
}

/// One window of one buffer may cost at most this share of the run's budget: 1/8 (262,144
/// stores by default, about a second).
pub const WINDOW_SHARE: u64 = 8;

/// Stores after which a window's rate is judged ([`too_dear`]), and again at every doubling.
pub const PROBE_STORES: u64 = 64;

/// After `n` exact stores covering `bytes` bytes (overlaps counted again) of a `len`-byte
/// range in one window, with a run budget of `max` stores (0: none): would rewriting the whole
/// range at this rate take more than [`WINDOW_SHARE`] of the budget? Judged at
/// [`PROBE_STORES`] stores and every doubling after it, so it costs nothing per store: a
/// `rep movsb` upload (a page a store) stays exact at any size, a loop of 16-byte stores
/// over 32 MiB (2,097,152 stores) gives up after 64 (async-signal-safe: arithmetic only).
pub fn too_dear(n: u64, bytes: u64, len: u64, max: u64) -> bool {
    if max == 0 || n < PROBE_STORES || !n.is_power_of_two() || bytes == 0 {
        return false;
    }
    let cap = (max / WINDOW_SHARE).max(1);
    // Projected stores for the whole range, n × len / bytes, against the cap.
    u128::from(n) * u128::from(len) > u128::from(cap) * u128::from(bytes)
}

impl Why {
    pub fn from_u8(v: u8) -> Why {
        match v {
            0 => Why::Exact,
            1 => Why::Decode,
            2 => Why::NoShadow,
            3 => Why::Platform,
            4 => Why::Lost,
            6 => Why::Budget,
            _ => Why::Busy,
        }
    }

    /// For the trace.
    pub fn text(self) -> &'static str {
        match self {
            Why::Exact => "exact",
            Why::Decode => "a store echo does not emulate (not a plain move, a read-modify-write, a locked or masked form, or one crossing a page) wrote the buffer; its range was opened for the rest of the window",
            Why::NoShadow => "the buffer's memory has no second mapping to carry stores through",
            Why::Platform => "exact host writes are recorded on x86_64 Linux only (no store emulation on this platform)",
            Why::Lost => "a fault echo could not explain or finish opened the buffer's memory",
            Why::Busy => "the coverage map could not be prepared for the window",
            Why::Budget => "exact host writes would take more stores than their budget (VK_ECHO_EXACT_WRITES_MAX_STORES, docs/settings.md): the buffer was opened for the rest of the window",
        }
    }
}

/// The words and masks that bits `[lo, hi)` occupy, in order (async-signal-safe: no
/// allocation).
fn masks(lo: usize, hi: usize) -> impl Iterator<Item = (usize, u64)> {
    let mut i = lo;
    std::iter::from_fn(move || {
        if i >= hi {
            return None;
        }
        let b0 = i % 64;
        let n = (hi - i).min(64 - b0);
        let m = if n == 64 {
            u64::MAX
        } else {
            ((1u64 << n) - 1) << b0
        };
        let w = i / 64;
        i += n;
        Some((w, m))
    })
}

/// Set bits `[lo, hi)` of `words` (async-signal-safe). Bits past the bitmap are ignored (the
/// caller then under-claims: never more than was written).
pub(super) fn mark(words: &[AtomicU64], lo: usize, hi: usize) {
    for (w, m) in masks(lo, hi) {
        let Some(word) = words.get(w) else { return };
        if word.load(Ordering::Relaxed) & m != m {
            word.fetch_or(m, Ordering::Relaxed);
        }
    }
}

/// Are bits `[lo, hi)` of `words` all set? (async-signal-safe; false past the bitmap.)
pub(super) fn all_set(words: &[AtomicU64], lo: usize, hi: usize) -> bool {
    masks(lo, hi).all(|(w, m)| {
        words
            .get(w)
            .is_some_and(|x| x.load(Ordering::Relaxed) & m == m)
    })
}

/// The runs of set bits among the first `n` of `words`, as `[from, to)` (normal code).
pub(super) fn runs(words: &[AtomicU64], n: usize) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    let mut open: Option<usize> = None;
    for (wi, w) in words.iter().enumerate() {
        let base = wi * 64;
        if base >= n {
            break;
        }
        let v = w.load(Ordering::Relaxed);
        // Whole words first: the common cases (all set, all clear) without a bit loop.
        if v == u64::MAX && base + 64 <= n {
            open.get_or_insert(base);
            continue;
        }
        if v == 0 {
            if let Some(s) = open.take() {
                out.push((s, base));
            }
            continue;
        }
        for b in 0..64 {
            let i = base + b;
            if i >= n {
                break;
            }
            if v & (1u64 << b) != 0 {
                open.get_or_insert(i);
            } else if let Some(s) = open.take() {
                out.push((s, i));
            }
        }
    }
    if let Some(s) = open {
        out.push((s, n.min(words.len() * 64)));
    }
    out
}
