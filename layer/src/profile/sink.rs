//! The trace sink: hooks hand it [`Event`]s, a writer thread encodes them as JSON Lines.
//!
//! Hot path ([`Sink::record`]): take a sequence number from the global counter, look up the
//! calling thread's small id, push the record onto a channel. No JSON on the calling thread, no
//! lock, no I/O. The writer thread encodes each record with [`record_line`] into a `BufWriter`.
//!
//! Size bound: when the next line (plus room for the marker) would take the file past
//! `max_bytes`, the writer writes one [`Event::Truncated`] record (`dropped_after_bytes` = bytes
//! in the file before the marker, its `seq` = the seq of the first dropped record) and drops
//! everything after it; callers see [`Sink::is_active`] turn false. The file never exceeds
//! `max_bytes` unless the header alone does.
//!
//! Failure: an unwritable path gives a warning string and a disabled sink (records dropped);
//! a write error later (disk full) disables the sink with one warning on stderr. Never a panic.
//!
//! Sequence numbers come from one process-wide counter ([`next_seq`]), shared with the
//! page-protection guard's signal handler, so host accesses sort correctly among API events.
//!
//! Host time (issue 47): every record carries `t`, nanoseconds of `CLOCK_MONOTONIC` since the
//! trace began ([`start_clock`]), read once per record right after its sequence number is taken
//! ([`stamp`]), so that one thread's records in `seq` order have non-decreasing times. A record
//! whose number was taken earlier (a submission, a fault in the signal handler) carries the time
//! taken with that number ([`Sink::record_at`] takes a [`Stamp`]).

use echo_analyzer::trace::{header_line, record_line, Event, Header, Record};
use std::cell::Cell;
use std::fs::OpenOptions;
use std::io::{BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Process-wide sequence counter. Starts at 1 (0 means "none" in the guard).
static SEQ: AtomicU64 = AtomicU64::new(1);

/// The next sequence number to be taken (nothing is taken): how far the process got.
#[inline]
pub fn current_seq() -> u64 {
    SEQ.load(Ordering::Relaxed)
}

/// Take the next global sequence number. Async-signal-safe (one atomic add).
#[inline]
pub fn next_seq() -> u64 {
    SEQ.fetch_add(1, Ordering::Relaxed)
}

/// `CLOCK_MONOTONIC` (ns) at which record times are 0; 0 until a trace starts.
static ORIGIN: AtomicU64 = AtomicU64::new(0);

/// `CLOCK_MONOTONIC` in nanoseconds. Async-signal-safe (`clock_gettime` is, the vDSO reads no
/// lock).
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The trace's clock starts (once per process; later calls return the same origin): the
/// `CLOCK_MONOTONIC` reading record times count from, for the header's `clock_origin_ns`.
pub fn start_clock() -> u64 {
    let now = monotonic_ns().max(1);
    match ORIGIN.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => now,
        Err(o) => o,
    }
}

/// Host time now on the trace's clock: nanoseconds since [`start_clock`]. Async-signal-safe.
/// Not inlined, so that its cost can be counted on its own (tests/tests/costs.rs).
#[inline(never)]
pub fn host_time_ns() -> u64 {
    monotonic_ns().saturating_sub(ORIGIN.load(Ordering::Relaxed))
}

/// A sequence number and the host time read with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub seq: u64,
    pub t: u64,
}

/// Take the next sequence number and read the host time (in that order). Async-signal-safe.
#[inline]
pub fn stamp() -> Stamp {
    let seq = next_seq();
    Stamp {
        seq,
        t: host_time_ns(),
    }
}

static NEXT_THREAD: AtomicU32 = AtomicU32::new(1);

thread_local! {
    // `const` init and a `Copy` type: no destructor is registered for this thread-local.
    static THREAD_ID: Cell<u32> = const { Cell::new(0) };
}

/// A small per-thread id (1, 2, 3 … in order of each thread's first record). Not for signal
/// handlers (TLS in a dlopen'd library may allocate on first touch): they use
/// [`thread_id_in_handler`], which finds the same id by the kernel's thread id.
#[inline]
pub fn thread_id() -> u32 {
    THREAD_ID.with(|t| {
        let v = t.get();
        if v != 0 {
            return v;
        }
        let v = small_id_of(gettid());
        t.set(v);
        v
    })
}

/// Kernel thread id → small id, for the signal handler (which must not touch TLS): open
/// addressing over fixed arrays, atomics only. A full table gives new threads ids without an
/// entry (the handler then says 0, "unknown").
const TIDS: usize = 1024;
#[allow(clippy::declare_interior_mutable_const)]
const TID_INIT: AtomicU32 = AtomicU32::new(0);
static TID_KEYS: [AtomicU32; TIDS] = [TID_INIT; TIDS];
static TID_VALS: [AtomicU32; TIDS] = [TID_INIT; TIDS];

fn gettid() -> u32 {
    // SAFETY: a plain system call; async-signal-safe.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// The small id of kernel thread `tid`, made (and entered in the table) when it has none.
/// Async-signal-safe.
fn small_id_of(tid: u32) -> u32 {
    let tid = tid.max(1);
    let start = (tid as usize).wrapping_mul(0x9e37_79b9) % TIDS;
    for i in 0..TIDS {
        let k = &TID_KEYS[(start + i) % TIDS];
        let v = &TID_VALS[(start + i) % TIDS];
        match k.compare_exchange(0, tid, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                let id = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
                v.store(id, Ordering::Release);
                return id;
            }
            Err(cur) if cur == tid => {
                // Entered, its value not yet written: only this very thread can be writing it
                // (tids are unique), interrupted by the signal handler now asking. That
                // handler cannot wait for it: the id is unknown (0) this once.
                return v.load(Ordering::Acquire);
            }
            Err(_) => {}
        }
    }
    NEXT_THREAD.fetch_add(1, Ordering::Relaxed)
}

/// [`thread_id`] for a signal handler: the calling thread's small id, found (or made) by its
/// kernel thread id without touching TLS. Async-signal-safe.
pub fn thread_id_in_handler() -> u32 {
    small_id_of(gettid())
}

enum Msg {
    Rec(Record),
    /// Write out everything queued so far, fsync, then answer.
    Flush(SyncSender<()>),
    /// Like `Flush`, then stop the writer thread.
    Finish(SyncSender<()>),
}

struct Shared {
    /// False once disabled (unwritable, write error, truncated or finished).
    active: AtomicBool,
}

/// Bumped in the child of every `fork()`: the writer thread does not exist there, so a sink
/// opened before the fork drops everything in the child (and `finish` at the child's exit
/// returns at once instead of waiting for a writer that will never answer).
static FORK_GEN: AtomicU64 = AtomicU64::new(0);

fn watch_forks() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        extern "C" fn child() {
            FORK_GEN.fetch_add(1, Ordering::Relaxed);
        }
        unsafe {
            libc::pthread_atfork(None, None, Some(child));
        }
    });
}

/// A trace file being written. `Sync`: share it by reference among threads.
pub struct Sink {
    tx: Mutex<Option<Sender<Msg>>>,
    // A clone per call would need the mutex; `Sender` is `Sync`, so keep one outside it too.
    fast_tx: Option<Sender<Msg>>,
    shared: std::sync::Arc<Shared>,
    path: Option<PathBuf>,
    /// `FORK_GEN` when opened.
    fork_gen: u64,
}

/// How long `flush`/`finish` wait for the writer (a wedged disk must not hang the app forever).
const FLUSH_TIMEOUT: Duration = Duration::from_secs(10);

/// Room kept for the truncation marker line.
const MARKER_RESERVE: u64 = 128;

impl Sink {
    /// A sink that drops everything.
    pub fn disabled() -> Sink {
        Sink {
            tx: Mutex::new(None),
            fast_tx: None,
            shared: std::sync::Arc::new(Shared {
                active: AtomicBool::new(false),
            }),
            path: None,
            fork_gen: 0,
        }
    }

    /// Create (or truncate) `path` with mode 0600, creating its parent directories, write the
    /// header line and start the writer thread. An error is a warning for the log; the caller
    /// then uses [`Sink::disabled`] (or call [`Sink::open_or_disabled`]).
    pub fn open(path: &Path, header: &Header, max_bytes: u64) -> Result<Sink, String> {
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir).map_err(|e| {
                    format!(
                        "cannot create trace directory {}: {e}; profiling continues without a trace",
                        dir.display()
                    )
                })?;
            }
        }
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| {
                format!(
                    "cannot open trace file {}: {e}; profiling continues without a trace",
                    path.display()
                )
            })?;
        let mut out = BufWriter::with_capacity(1 << 16, file);
        let head = header_line(header);
        out.write_all(head.as_bytes())
            .and_then(|_| out.write_all(b"\n"))
            .and_then(|_| out.flush())
            .map_err(|e| format!("cannot write trace file {}: {e}", path.display()))?;
        let written = head.len() as u64 + 1;

        watch_forks();
        let shared = std::sync::Arc::new(Shared {
            active: AtomicBool::new(true),
        });
        let (tx, rx) = mpsc::channel::<Msg>();
        let w_shared = shared.clone();
        let w_path = path.to_path_buf();
        std::thread::Builder::new()
            .name("echo-trace".into())
            .spawn(move || writer(rx, out, written, max_bytes, w_shared, w_path))
            .map_err(|e| format!("cannot start the trace writer thread: {e}"))?;
        Ok(Sink {
            tx: Mutex::new(Some(tx.clone())),
            fast_tx: Some(tx),
            shared,
            path: Some(path.to_path_buf()),
            fork_gen: FORK_GEN.load(Ordering::Relaxed),
        })
    }

    /// [`Sink::open`], falling back to a disabled sink; the warning, if any, is returned.
    pub fn open_or_disabled(
        path: &Path,
        header: &Header,
        max_bytes: u64,
    ) -> (Sink, Option<String>) {
        match Sink::open(path, header, max_bytes) {
            Ok(s) => (s, None),
            Err(w) => (Sink::disabled(), Some(w)),
        }
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// True while records are being kept (not disabled, truncated or finished). Hooks may
    /// skip building events when false.
    #[inline]
    pub fn is_active(&self) -> bool {
        self.shared.active.load(Ordering::Relaxed)
            && FORK_GEN.load(Ordering::Relaxed) == self.fork_gen
    }

    /// Record `event` of device `dev` (its creation index) with a fresh sequence number and
    /// the host time; returns that number (0 when dropped).
    #[inline]
    pub fn record(&self, dev: u32, event: Event) -> u64 {
        if !self.is_active() {
            return 0;
        }
        let s = stamp();
        self.record_full(s, None, dev, event);
        s.seq
    }

    /// Record `event` with a stamp taken earlier (e.g. before calling down, so the event sorts
    /// where the call began), or taken in a signal handler.
    #[inline]
    pub fn record_at(&self, stamp: Stamp, dev: u32, event: Event) {
        self.record_full(stamp, None, dev, event);
    }

    /// Record `event` of a call that took `dur` nanoseconds and returned just now (a host wait):
    /// stamped now, its `dur` says when it began. Returns the sequence number (0 when dropped).
    #[inline]
    pub fn record_timed(&self, dev: u32, event: Event, dur: u64) -> u64 {
        if !self.is_active() {
            return 0;
        }
        let s = stamp();
        self.record_full(s, Some(dur), dev, event);
        s.seq
    }

    /// Record `event` stamped earlier on another thread's behalf (a host access, stamped in the
    /// signal handler of thread `thread`; 0: unknown, then the calling thread's id).
    #[inline]
    pub fn record_for(&self, stamp: Stamp, thread: u32, dev: u32, event: Event) {
        self.record_with(stamp, None, thread, dev, event);
    }

    #[inline]
    fn record_full(&self, stamp: Stamp, dur: Option<u64>, dev: u32, event: Event) {
        self.record_with(stamp, dur, 0, dev, event);
    }

    #[inline]
    fn record_with(&self, stamp: Stamp, dur: Option<u64>, thread: u32, dev: u32, event: Event) {
        if !self.is_active() {
            return;
        }
        if let Some(tx) = &self.fast_tx {
            let _ = tx.send(Msg::Rec(Record {
                seq: stamp.seq,
                thread: if thread != 0 { thread } else { thread_id() },
                dev,
                t: Some(stamp.t),
                dur,
                event,
            }));
        }
    }

    fn request(&self, finish: bool) {
        if FORK_GEN.load(Ordering::Relaxed) != self.fork_gen {
            return; // a forked child: no writer here, and the file belongs to the parent
        }
        let tx = {
            let mut g = match self.tx.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            if finish {
                g.take()
            } else {
                g.clone()
            }
        };
        let Some(tx) = tx else { return };
        let (ack_tx, ack_rx) = mpsc::sync_channel(1);
        let msg = if finish {
            Msg::Finish(ack_tx)
        } else {
            Msg::Flush(ack_tx)
        };
        if tx.send(msg).is_ok() {
            let _ = ack_rx.recv_timeout(FLUSH_TIMEOUT);
        }
    }

    /// Write out everything recorded before this call and fsync. Blocks (bounded).
    pub fn flush(&self) {
        self.request(false);
    }

    /// Flush, fsync and stop the writer; later records are dropped. Idempotent. The writer
    /// thread is not joined (so this is safe from an `atexit` handler or a library destructor
    /// that runs under the dynamic loader's lock): it acknowledges, then returns on its own.
    pub fn finish(&self) {
        self.shared.active.store(false, Ordering::Relaxed);
        self.request(true);
    }
}

fn writer(
    rx: Receiver<Msg>,
    mut out: BufWriter<std::fs::File>,
    mut written: u64,
    max_bytes: u64,
    shared: std::sync::Arc<Shared>,
    path: PathBuf,
) {
    let mut failed = false;
    let mut truncated = false;
    let fail = |e: std::io::Error, failed: &mut bool| {
        if !*failed {
            *failed = true;
            shared.active.store(false, Ordering::Relaxed);
            eprintln!(
                "[VK_LAYER_echo] warning: writing trace {} failed: {e}; the rest of the trace is dropped",
                path.display()
            );
        }
    };
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Rec(rec) => {
                if failed || truncated {
                    continue;
                }
                let mut line = record_line(&rec);
                line.push('\n');
                if written + line.len() as u64 + MARKER_RESERVE > max_bytes {
                    truncated = true;
                    shared.active.store(false, Ordering::Relaxed);
                    let mut marker = record_line(&Record {
                        seq: rec.seq,
                        thread: 0,
                        dev: 0,
                        t: rec.t,
                        dur: None,
                        event: Event::Truncated {
                            dropped_after_bytes: written,
                        },
                    });
                    marker.push('\n');
                    match out.write_all(marker.as_bytes()) {
                        Ok(()) => written += marker.len() as u64,
                        Err(e) => fail(e, &mut failed),
                    }
                    continue;
                }
                match out.write_all(line.as_bytes()) {
                    Ok(()) => written += line.len() as u64,
                    Err(e) => fail(e, &mut failed),
                }
            }
            Msg::Flush(ack) => {
                if !failed {
                    if let Err(e) = out.flush().and_then(|_| out.get_ref().sync_data()) {
                        fail(e, &mut failed);
                    }
                }
                let _ = ack.send(());
            }
            Msg::Finish(ack) => {
                if !failed {
                    if let Err(e) = out.flush().and_then(|_| out.get_ref().sync_data()) {
                        fail(e, &mut failed);
                    }
                }
                let _ = ack.send(());
                return;
            }
        }
    }
    let _ = out.flush();
}

/// The process's sink, once profile mode opened one.
static GLOBAL: OnceLock<Sink> = OnceLock::new();

/// Install `sink` as the process's sink (first call wins; later calls return `false`). It is
/// finished at exit by `crate::coordinator`, after the last host accesses of live devices went in.
pub fn install_global(sink: Sink) -> bool {
    let ok = GLOBAL.set(sink).is_ok();
    if ok {
        crate::lifetime::ensure_exit_hook();
    }
    ok
}

/// The process's sink, if one was installed.
pub fn global() -> Option<&'static Sink> {
    GLOBAL.get()
}

#[cfg(test)]
mod tests {
    use super::*;
    use echo_analyzer::trace::{read_trace, Context, TRACE_FORMAT, TRACE_VERSION};
    use std::os::unix::fs::PermissionsExt;

    fn header() -> Header {
        Header {
            format: TRACE_FORMAT.into(),
            version: TRACE_VERSION,
            context: Context::default(),
            pid: std::process::id(),
            started_unix: 0,
            settings: Default::default(),
            clock_origin_ns: None,
        }
    }

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "echo-sink-{tag}-{}-{}",
            std::process::id(),
            next_seq()
        ));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn records_from_many_threads_read_back_in_seq_order() {
        let dir = tmpdir("order");
        let path = dir.join("sub/trace.jsonl");
        let sink = Sink::open(&path, &header(), 1 << 30).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let mut seqs = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let sink = &sink;
                let seqs = &seqs;
                s.spawn(move || {
                    for i in 0..500u64 {
                        let q = sink.record(
                            0,
                            Event::BufferAddress {
                                buffer: t * 1000 + i,
                            },
                        );
                        seqs.lock().unwrap().push(q);
                    }
                });
            }
        });
        sink.flush();
        sink.record(0, Event::DeviceWaitIdle);
        sink.finish();
        sink.finish(); // idempotent
        assert_eq!(
            sink.record(0, Event::DeviceWaitIdle),
            0,
            "dropped after finish"
        );
        let t = read_trace(std::io::BufReader::new(std::fs::File::open(&path).unwrap())).unwrap();
        assert_eq!(t.records.len(), 2001);
        assert!(!t.truncated);
        let got: Vec<u64> = t.records.iter().map(|r| r.seq).collect();
        let mut want = std::mem::take(seqs.get_mut().unwrap());
        want.sort();
        assert_eq!(&got[..2000], &want[..]);
        assert!(got.windows(2).all(|w| w[0] < w[1]));
        // Per thread, buffers appear in program order.
        let mut threads = std::collections::BTreeSet::new();
        for r in &t.records {
            threads.insert(r.thread);
        }
        assert_eq!(threads.len(), 5, "4 workers + the main thread: {threads:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn truncation_marker_once_and_bounded_size() {
        let dir = tmpdir("trunc");
        let path = dir.join("t.jsonl");
        let max = 4096;
        let sink = Sink::open(&path, &header(), max).unwrap();
        for i in 0..1000 {
            sink.record(0, Event::BufferAddress { buffer: i });
        }
        sink.finish();
        let len = std::fs::metadata(&path).unwrap().len();
        assert!(len <= max, "{len} > {max}");
        let t = read_trace(std::io::BufReader::new(std::fs::File::open(&path).unwrap())).unwrap();
        assert!(t.truncated);
        let markers: Vec<_> = t
            .records
            .iter()
            .filter(|r| matches!(r.event, Event::Truncated { .. }))
            .collect();
        assert_eq!(markers.len(), 1);
        assert!(matches!(
            t.records.last().unwrap().event,
            Event::Truncated { .. }
        ));
        assert!(t.records.len() > 10 && t.records.len() < 1000);
        if let Event::Truncated {
            dropped_after_bytes,
        } = markers[0].event
        {
            assert!(dropped_after_bytes < max && dropped_after_bytes > 3000);
        }
        assert!(!sink.is_active());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn unwritable_path_is_a_warning_and_a_disabled_sink() {
        // A path under a regular file can never be created, even as root.
        let dir = tmpdir("bad");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("plain");
        std::fs::write(&file, b"x").unwrap();
        let (sink, warn) = Sink::open_or_disabled(&file.join("t.jsonl"), &header(), 1 << 20);
        let warn = warn.expect("a warning");
        assert!(warn.contains("trace"), "{warn}");
        assert!(!sink.is_active());
        assert_eq!(sink.record(0, Event::DeviceWaitIdle), 0);
        sink.flush();
        sink.finish();
        // A symlink is not followed.
        let link = dir.join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let (_s, warn) = Sink::open_or_disabled(&link, &header(), 1 << 20);
        assert!(warn.is_some());
        assert_eq!(std::fs::read(&file).unwrap(), b"x");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn forked_child_neither_writes_nor_waits() {
        crate::testutil::own_process!(forked_child_neither_writes_nor_waits, "ECHO_SINK_CHILD");
        let dir = tmpdir("fork");
        let path = dir.join("t.jsonl");
        let sink = Sink::open(&path, &header(), 1 << 20).unwrap();
        sink.record(0, Event::BufferAddress { buffer: 1 });
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let t0 = std::time::Instant::now();
            let ok = sink.record(0, Event::BufferAddress { buffer: 2 }) == 0 && !sink.is_active();
            sink.flush();
            sink.finish();
            let fast = t0.elapsed() < Duration::from_secs(2);
            unsafe { libc::_exit(if ok && fast { 0 } else { 1 }) };
        }
        let mut status = 0;
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{status}"
        );
        sink.record(0, Event::BufferAddress { buffer: 3 });
        sink.finish();
        let t = read_trace(std::io::BufReader::new(std::fs::File::open(&path).unwrap())).unwrap();
        let bufs: Vec<_> = t
            .records
            .iter()
            .map(|r| match r.event {
                Event::BufferAddress { buffer } => buffer,
                _ => 0,
            })
            .collect();
        assert_eq!(bufs, vec![1, 3]);
        let _ = std::fs::remove_dir_all(&dir);
        println!("CHILD-OK");
    }

    /// The host's clock as records read it: monotonic, from the trace's origin, and what one
    /// read costs natively (callgrind does not see the vDSO; tests/tests/costs.rs counts the
    /// rest).
    #[test]
    fn host_time_cost() {
        start_clock();
        let n = 1_000_000u64;
        let t0 = std::time::Instant::now();
        let mut last = 0;
        for _ in 0..n {
            let t = host_time_ns();
            assert!(t >= last, "the clock went back from {last} to {t}");
            last = t;
        }
        let per = t0.elapsed().as_nanos() as f64 / n as f64;
        eprintln!("host_time_ns: {per:.1} ns per read (native)");
        assert!(per < 2_000.0, "{per} ns per clock read");
        let s = stamp();
        assert!(s.t >= last && s.seq > 0);
    }

    #[test]
    fn record_cost_is_small() {
        let dir = tmpdir("cost");
        let sink = Sink::open(&dir.join("t.jsonl"), &header(), 1 << 30).unwrap();
        let n = 20_000u64;
        let t0 = std::time::Instant::now();
        for i in 0..n {
            sink.record(
                0,
                Event::CmdCopyBuffer {
                    cmd: i,
                    src: 1,
                    dst: 2,
                    regions: vec![echo_analyzer::trace::CopyRegion {
                        src_offset: 0,
                        dst_offset: 0,
                        size: 1 << 20,
                    }],
                },
            );
        }
        let per = t0.elapsed().as_nanos() as f64 / n as f64;
        sink.finish();
        eprintln!("sink.record(CmdCopyBuffer): {per:.0} ns per call (calling thread)");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
