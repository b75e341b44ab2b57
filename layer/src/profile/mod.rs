//! Profile mode: trace sink, call-site identity, page-protection guard, double mapping.
//!
//! How the pieces fit (DESIGN §4):
//!
//! - **Observe → trace.** Each hook builds an `echo_analyzer::trace::Event` and hands it to the
//!   process's [`sink::Sink`] (`sink::global()`); the sink stamps it with a global sequence number
//!   and the caller's small thread id and a writer thread encodes it as JSON Lines, bounded by
//!   `trace_max_bytes` (a `Truncated` marker ends a cut trace). `vkCreateBuffer` and
//!   `vkAllocateMemory` take their identity from [`crate::callsite::capture`] (module-relative, so equal
//!   across runs) and [`crate::callsite::KeyAllocator`] (ordinal per key).
//! - **Host-access validation.** Host-visible allocations are backed by a
//!   [`crate::hostmem::memfd::DoubleMap`] where `VK_EXT_external_memory_host` exists: view A is imported into the
//!   driver, view B is what `vkMapMemory` returns to the app. Every buffer ≥ `min_bytes` bound into
//!   mapped memory (from its bind or map: `Watched`), and any mapped one copied to/from an
//!   unmapped buffer, has its range in B armed with
//!   [`watch::arm`]; without the extension the driver's own mapping is armed (a real GPU does not
//!   use CPU page tables).
//! - **Windows.** A window starts at every `vkQueueSubmit` and at every host completion
//!   observation (fence wait/status, queue/device wait idle, semaphore wait/value): the hook
//!   first [`watch::drain`]s the accesses of the window that ends (each becomes a `HostAccess`
//!   event at the sequence number taken in the signal handler, so it sorts where it happened),
//!   then re-arms. Per buffer per window there is at most one read record and one write record.
//!   `vkUnmapMemory`/`vkFreeMemory`/`vkDestroyBuffer` [`watch::disarm`] before calling down.
//! - **Time** (issue 47). Every record carries the host's time ([`sink::stamp`]); host waits
//!   also their duration. [`gputime::GpuTimer`] adds GPU timestamps around submissions and
//!   copies in echo's own query pools, read back without stalling, as `GpuTime` records.

#![allow(dead_code)]

pub mod gputime;
mod profile_mode;
pub mod recorder;
pub mod sink;
pub mod watch;

pub use recorder::{start, Profiler};
