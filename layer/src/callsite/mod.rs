//! Call-site identity (DESIGN §4): which line of the APPLICATION created a buffer or an
//! allocation, in a form that is equal across runs despite ASLR.
//!
//! 1. Echo's own unwinder ([`unwind`], issue 35) collects return addresses from the modules'
//!    `.eh_frame` tables (which x86_64 and aarch64 code has by default), parsed once per module
//!    and cached per address; wherever it cannot follow a frame exactly, the whole capture is
//!    taken again with glibc's `backtrace()` (libgcc's `_Unwind_Backtrace`, the reference: the
//!    same return addresses, hence the same sites). `VK_ECHO_CALLSITE_CHECK=1` runs both on
//!    every capture and counts the differences.
//! 2. Leading frames inside this layer, the Vulkan loader (`libvulkan.so*`) or another layer
//!    (`libVkLayer_*`) are dropped, so the site starts at the application's call; the next
//!    `depth` frames are kept.
//! 3. Each address becomes `(module, offset)`: the module (found with `dl_iterate_phdr`, cached
//!    until the loader's add/remove counters change) is named by its file's basename (so `./app`
//!    and `/abs/app` agree; the main program by its executable's name); `offset = address − load
//!    bias`, i.e. the ELF virtual address of the return address, which is what `addr2line -e
//!    module` takes (look up `offset − 1` to land in the call instruction).
//! 4. `site = FNV-1a 64` over, per frame, the module bytes, a 0 byte, and the offset as 8
//!    little-endian bytes; written as 16 hex digits.
//! 5. In profile mode [`announce`] describes each module once per process for the trace (its
//!    full path and GNU build-id, read from its `PT_NOTE` segments in memory when the module
//!    cache is filled): the analyzer finds its symbols with them. Nothing of this enters the
//!    hash.
//!
//! [`KeyAllocator`] adds the ordinal among objects with the same (site, size, usage, flags).

mod unwind;

use crate::log;
use dashmap::DashMap;
use echo_analyzer::trace::{Frame, Module as ModuleRecord, ObjectKey};
use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, RwLock};

extern "C" {
    // glibc <execinfo.h>. Async-signal-unsafe on first use (it loads libgcc_s); fine here.
    fn backtrace(buffer: *mut *mut c_void, size: c_int) -> c_int;
}

pub use unwind::MAX_DEPTH;
/// Extra frames captured to make room for the ones we drop (layer, loader, other layers).
const SLACK: usize = 48;

/// A resolved call site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallSite {
    pub hash: u64,
    pub frames: Vec<Frame>,
}

impl CallSite {
    /// The site as the trace writes it: 16 lowercase hex digits.
    #[cfg(test)]
    pub fn hex(&self) -> String {
        format!("{:016x}", self.hash)
    }

    /// The hash of a list of module-relative frames (also usable by tests and the analyzer).
    pub fn hash_frames(frames: &[Frame]) -> u64 {
        let mut h = FNV_OFFSET;
        for f in frames {
            eat_frame(&mut h, &f.module, f.offset);
        }
        h
    }
}

/// One raw frame resolved to its module (borrowed from the module cache: no allocation).
struct Resolved<'a> {
    module: &'a str,
    base: usize,
    addr: usize,
    /// The module is this layer's, the Vulkan loader's or another layer's.
    layer: bool,
}

/// A loaded module: its PT_LOAD address ranges, load bias and basename; the path it was loaded
/// from and its GNU build-id (hex, empty when none) for the trace's module records.
struct Module {
    ranges: Vec<(usize, usize)>,
    bias: usize,
    name: String,
    path: String,
    build_id: String,
    /// This layer, the Vulkan loader or another layer (the production skip rule).
    layer: bool,
    /// Its unwind tables, when it has `.eh_frame_hdr` (parsed when the cache is filled).
    unwind: Option<unwind::Tables>,
    /// Which loaded module this is, unique in the process: a module that stays loaded keeps
    /// its serial (and its tables and build-id) when the cache is refilled for another's
    /// `dlopen`/`dlclose`, so the per-thread unwind rows and site hashes of its frames stay.
    serial: u32,
}

/// The next [`Module::serial`].
static NEXT_SERIAL: AtomicU32 = AtomicU32::new(1);
/// How many times the module cache was filled (the loader's counters moved).
static FILLS: AtomicU64 = AtomicU64::new(0);

/// Modules, refreshed when the dynamic loader's add/remove counters change. (`dladdr` would do,
/// but glibc's also searches the symbol table for the nearest symbol: ~1 µs per frame.)
struct ModuleCache {
    adds: u64,
    subs: u64,
    /// How many times the cache was filled: what the per-thread unwind caches are tagged with.
    gen: u64,
    modules: Vec<Module>,
    /// Every PT_LOAD range as `(start, end, module index)`, sorted by start: a frame's module
    /// is one binary search away.
    spans: Vec<(usize, usize, usize)>,
}

static MODULES: RwLock<ModuleCache> = RwLock::new(ModuleCache {
    adds: u64::MAX,
    subs: u64::MAX,
    gen: 0,
    modules: Vec::new(),
    spans: Vec::new(),
});

/// `(dlpi_adds, dlpi_subs)`: how many objects were ever loaded and unloaded.
fn loader_counters() -> (u64, u64) {
    unsafe extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        size: usize,
        data: *mut c_void,
    ) -> c_int {
        let out = &mut *(data as *mut (u64, u64));
        if size >= std::mem::size_of::<libc::dl_phdr_info>() {
            *out = ((*info).dlpi_adds, (*info).dlpi_subs);
        }
        1 // stop after the first object
    }
    let mut v = (0u64, 0u64);
    unsafe { libc::dl_iterate_phdr(Some(first), &mut v as *mut _ as *mut c_void) };
    v
}

/// The loaded modules, in the loader's order. A module of `old` that is still loaded (same
/// path, load bias and segments) is taken over as it is: its build-id and unwind tables are not
/// read again, and it keeps its serial.
fn load_modules(old: Vec<Module>) -> Vec<Module> {
    struct Fill {
        old: Vec<Option<Module>>,
        out: Vec<Module>,
    }
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
        let fill = &mut *(data as *mut Fill);
        let info = &*info;
        let bias = info.dlpi_addr as usize;
        let mut ranges = Vec::new();
        let mut notes = Vec::new();
        let mut eh_frame_hdr = None;
        for i in 0..info.dlpi_phnum as usize {
            let ph = &*info.dlpi_phdr.add(i);
            let start = bias.wrapping_add(ph.p_vaddr as usize);
            let span = (start, start.wrapping_add(ph.p_memsz as usize));
            if ph.p_type == libc::PT_LOAD {
                ranges.push(span);
            } else if ph.p_type == libc::PT_NOTE {
                notes.push((span, ph.p_align as usize));
            } else if ph.p_type == libc::PT_GNU_EH_FRAME {
                eh_frame_hdr = Some(span);
            }
        }
        let name = if info.dlpi_name.is_null() {
            ""
        } else {
            CStr::from_ptr(info.dlpi_name).to_str().unwrap_or("")
        };
        let (name, path) = match name.rsplit('/').next() {
            Some(b) if !b.is_empty() => (b.to_string(), name.to_string()),
            // The main program has an empty name.
            _ => (exe_basename().to_string(), exe_path().to_string()),
        };
        let kept = fill.old.iter_mut().find(|m| {
            m.as_ref()
                .is_some_and(|m| m.bias == bias && m.ranges == ranges && m.path == path)
        });
        if let Some(m) = kept.and_then(Option::take) {
            fill.out.push(m);
            return 0;
        }
        // SAFETY: the segments of a module loaded now; the tables go with the module, which
        // leaves the cache when it is no longer loaded (the cache is refilled when the loader's
        // counters move).
        let unwind = eh_frame_hdr.and_then(|h| unwind::Tables::from_segments(h, &ranges));
        let own = load_modules as *const () as usize;
        let ours = ranges.iter().any(|r| r.0 <= own && own < r.1);
        let mut build_id = String::new();
        for ((a, b), align) in notes {
            // Only notes inside a loaded segment are read (the first one, which holds the
            // build-id in every linker's output, is readable).
            if build_id.is_empty() && a <= b && ranges.iter().any(|r| r.0 <= a && b <= r.1) {
                // SAFETY: inside a PT_LOAD segment of a loaded module, which cannot be unloaded
                // while dl_iterate_phdr runs this callback.
                let bytes = std::slice::from_raw_parts(a as *const u8, b - a);
                build_id = gnu_build_id(bytes, align).unwrap_or_default();
            }
        }
        fill.out.push(Module {
            layer: ours || is_loader_or_layer(&name),
            ranges,
            bias,
            name,
            path,
            build_id,
            unwind,
            serial: NEXT_SERIAL.fetch_add(1, Ordering::Relaxed),
        });
        0
    }
    let mut fill = Fill {
        old: old.into_iter().map(Some).collect(),
        out: Vec::new(),
    };
    unsafe { libc::dl_iterate_phdr(Some(each), &mut fill as *mut _ as *mut c_void) };
    fill.out
}

fn spans_of(modules: &[Module]) -> Vec<(usize, usize, usize)> {
    let mut v: Vec<(usize, usize, usize)> = modules
        .iter()
        .enumerate()
        .flat_map(|(i, m)| m.ranges.iter().map(move |&(a, b)| (a, b, i)))
        .collect();
    v.sort_unstable();
    v
}

/// The index of the module that holds `addr`.
fn module_of(c: &ModuleCache, addr: usize) -> Option<usize> {
    let i = c.spans.partition_point(|s| s.0 <= addr);
    let &(_, end, m) = c.spans.get(i.checked_sub(1)?)?;
    (addr < end).then_some(m)
}

fn resolved(c: &ModuleCache, m: usize, addr: usize) -> Resolved<'_> {
    let m = &c.modules[m];
    Resolved {
        module: &m.name,
        base: m.bias,
        addr,
        layer: m.layer,
    }
}

fn resolve_in(c: &ModuleCache, addr: usize) -> Option<Resolved<'_>> {
    Some(resolved(c, module_of(c, addr)?, addr))
}

/// Runs `f` on the module cache under its read lock, refreshed first when the loader's counters
/// moved. `f` never runs under the write lock, and must not call back in here (a read lock
/// taken twice by one thread can wait behind a writer).
fn with_modules<R>(f: impl FnOnce(&ModuleCache) -> R) -> R {
    let now = loader_counters();
    loop {
        {
            let c = MODULES.read().unwrap_or_else(|p| p.into_inner());
            if (c.adds, c.subs) == now {
                return f(&c);
            }
        }
        let mut c = MODULES.write().unwrap_or_else(|p| p.into_inner());
        if (c.adds, c.subs) != now {
            let old = std::mem::take(&mut c.modules);
            c.modules = load_modules(old);
            c.spans = spans_of(&c.modules);
            c.gen += 1;
            FILLS.fetch_add(1, Ordering::Relaxed);
            c.adds = now.0;
            c.subs = now.1;
        }
    }
}

/// The GNU build-id (hex) in a PT_NOTE segment's bytes, if it holds one. Never reads past
/// `notes`.
fn gnu_build_id(notes: &[u8], align: usize) -> Option<String> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let pad = |n: usize| {
        if align == 8 {
            (n + 7) & !7
        } else {
            (n + 3) & !3
        }
    };
    let word = |o: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(
            notes.get(o..o.checked_add(4)?)?.try_into().ok()?,
        ))
    };
    let mut o = 0usize;
    while o.checked_add(12)? <= notes.len() {
        let (namesz, descsz, ty) = (word(o)? as usize, word(o + 4)? as usize, word(o + 8)?);
        let name_at = o + 12;
        let desc_at = name_at.checked_add(pad(namesz))?;
        let next = desc_at.checked_add(pad(descsz))?;
        let name = notes.get(name_at..name_at.checked_add(namesz)?)?;
        if ty == NT_GNU_BUILD_ID && name == b"GNU\0" {
            let desc = notes.get(desc_at..desc_at.checked_add(descsz)?)?;
            return Some(desc.iter().map(|b| format!("{b:02x}")).collect());
        }
        o = next;
    }
    None
}

/// The executable's full path (`/proc/self/exe`).
fn exe_path() -> &'static str {
    static EXE: OnceLock<String> = OnceLock::new();
    EXE.get_or_init(|| {
        std::env::current_exe()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    })
}

/// Names of the modules [`announce`] described already (a process writes one trace).
static ANNOUNCED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The modules of `frames` that no earlier call described: path and build-id, for the trace's
/// `buffer_create` record (each module once per process; empty, and no allocation, on every
/// later call). A module unloaded since the frames were taken is left out.
pub fn announce(frames: &[Frame]) -> Vec<ModuleRecord> {
    announce_in(&ANNOUNCED, frames)
}

fn announce_in(done: &Mutex<Vec<String>>, frames: &[Frame]) -> Vec<ModuleRecord> {
    if frames.is_empty() {
        return Vec::new();
    }
    let mut done = done.lock().unwrap_or_else(|p| p.into_inner());
    let mut new: Vec<&str> = Vec::new();
    let mut prev: Option<&str> = None;
    for f in frames {
        let m = f.module.as_str();
        if prev == Some(m) || m == "?" || new.contains(&m) {
            continue;
        }
        prev = Some(m);
        if !done.iter().any(|d| d == m) {
            new.push(m);
        }
    }
    if new.is_empty() {
        return Vec::new();
    }
    let found: Vec<ModuleRecord> = with_modules(|c| {
        new.iter()
            .filter_map(|n| c.modules.iter().find(|m| m.name == *n))
            .map(|m| ModuleRecord {
                name: m.name.clone(),
                path: absolute(&m.path),
                build_id: m.build_id.clone(),
            })
            .collect()
    });
    done.extend(found.iter().map(|m| m.name.clone()));
    found
}

/// A loaded path made absolute against the working directory (a library `dlopen`ed as
/// `./libfoo.so`); names without a `/` (the vDSO) are not files and stay as they are.
fn absolute(path: &str) -> String {
    let p = std::path::Path::new(path);
    if p.is_absolute() || !path.contains('/') {
        return path.to_string();
    }
    std::env::current_dir()
        .map(|d| d.join(p).to_string_lossy().into_owned())
        .unwrap_or_else(|_| path.to_string())
}

fn exe_basename() -> &'static str {
    static EXE: OnceLock<String> = OnceLock::new();
    EXE.get_or_init(|| {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "<exe>".into())
    })
}

/// Is this module the Vulkan loader or a layer (ours or another)? Their frames are not part of
/// the application's call site.
pub fn is_loader_or_layer(module: &str) -> bool {
    module.starts_with("libvulkan.so") || module.starts_with("libVkLayer_")
}

/// The production skip rule: this layer's own module, the loader, other layers.
fn skip_layer_frames(r: &Resolved) -> bool {
    r.layer
}

/// Capture the application's call site, `depth` frames deep (clamped to 1..=MAX_DEPTH), with
/// the frames (profile mode writes them into the trace).
#[inline(never)]
pub fn capture(depth: usize) -> CallSite {
    match check_mode() {
        Check::Off => capture_with(depth, &skip_layer_frames),
        Check::Compare => {
            let site = capture_with(depth, &skip_layer_frames);
            check(site.hash, depth);
            site
        }
        Check::Reference => {
            REFERENCE.fetch_add(1, Ordering::Relaxed);
            reference_with(depth, &skip_layer_frames)
        }
    }
}

/// The site hash alone, equal to [`capture`]'s: what enforce mode needs to recognise a buffer.
/// No frame is named or allocated; a thread that captures the same frames again (a loop that
/// makes a buffer per iteration) finds the hash in its memo.
#[inline(never)]
pub fn capture_hash(depth: usize) -> u64 {
    let mode = check_mode();
    if mode == Check::Reference {
        REFERENCE.fetch_add(1, Ordering::Relaxed);
        return with_thread(reference_hash(depth, &skip_layer_frames));
    }
    let regs = unwind::Regs::here();
    let fast = regs.and_then(|r| {
        unwound(r, depth, &skip_layer_frames, |t, c, pcs, mods| {
            let serial = |i: usize| c.modules[mods[i] as usize].serial;
            t.memo(c.gen, pcs, serial, || {
                let mut h = FNV_OFFSET;
                for (&pc, &m) in pcs.iter().zip(mods) {
                    let m = &c.modules[m as usize];
                    eat_frame(&mut h, &m.name, pc.wrapping_sub(m.bias) as u64);
                }
                h
            })
        })
    });
    let h = with_thread(match fast {
        Some(h) => {
            UNWOUND.fetch_add(1, Ordering::Relaxed);
            h
        }
        None => {
            FALLBACKS.fetch_add(1, Ordering::Relaxed);
            reference_hash(depth, &skip_layer_frames)
        }
    });
    if mode == Check::Compare {
        check(h, depth);
    }
    h
}

/// The call site of an object being created, `depth` frames deep: its hash, and its frames
/// when profile mode writes them into the trace (`frames`; enforce needs the hash alone, which
/// costs no allocation).
pub fn site(depth: usize, frames: bool) -> (u64, Vec<Frame>) {
    if frames {
        let s = capture(depth);
        (s.hash, s.frames)
    } else {
        (capture_hash(depth), Vec::new())
    }
}

/// Like [`capture`], with the rule that drops leading frames given by the caller (tests run
/// the layer's code inside the test executable, where "our own module" is everything).
#[inline(never)]
fn capture_with(depth: usize, skip_leading: &dyn Fn(&Resolved) -> bool) -> CallSite {
    let regs = unwind::Regs::here();
    let fast = regs.and_then(|r| {
        unwound(r, depth, skip_leading, |_, c, pcs, mods| {
            frames_of(c, pcs, mods)
        })
    });
    match fast {
        Some(frames) => {
            UNWOUND.fetch_add(1, Ordering::Relaxed);
            CallSite {
                hash: with_thread(CallSite::hash_frames(&frames)),
                frames,
            }
        }
        None => {
            FALLBACKS.fetch_add(1, Ordering::Relaxed);
            reference_with(depth, skip_leading)
        }
    }
}

/// Module-relative frames of raw addresses and their module indices.
fn frames_of(c: &ModuleCache, pcs: &[usize], mods: &[u32]) -> Vec<Frame> {
    pcs.iter()
        .zip(mods)
        .map(|(&pc, &m)| {
            let m = &c.modules[m as usize];
            Frame {
                module: m.name.clone(),
                offset: pc.wrapping_sub(m.bias) as u64,
            }
        })
        .collect()
}

/// The frames of the current call from the application's call on, found by echo's unwinder
/// from `regs` (the capturing function's registers; it is still running): at most `depth`
/// frames after the leading frames `skip_leading` names, among at most `depth + SLACK` frames
/// in all, as the reference takes them. `f(thread, modules, pcs, module indices)` gets them.
/// `None` when the unwinder cannot follow every frame: the caller takes the reference path.
#[inline(always)]
fn unwound<R>(
    regs: unwind::Regs,
    depth: usize,
    skip_leading: &dyn Fn(&Resolved) -> bool,
    f: impl FnOnce(&mut unwind::Thread, &ModuleCache, &[usize], &[u32]) -> R,
) -> Option<R> {
    let depth = depth.clamp(1, MAX_DEPTH);
    let limit = depth + SLACK;
    with_modules(|c| {
        unwind::with_thread(|t| {
            // Not zeroed (768 bytes a capture): only `..kept` is ever read.
            let mut pcs = [std::mem::MaybeUninit::<usize>::uninit(); MAX_DEPTH];
            let mut mods = [std::mem::MaybeUninit::<u32>::uninit(); MAX_DEPTH];
            let (mut kept, mut raw, mut leading) = (0, 0, true);
            let modules = unwind::Modules {
                gen: c.gen,
                lookup: |a: usize| {
                    let m = module_of(c, a)?;
                    let module = &c.modules[m];
                    Some((m as u32, module.serial, module.unwind.as_ref()))
                },
                index: |serial: u32| {
                    c.modules
                        .iter()
                        .position(|m| m.serial == serial)
                        .map(|i| i as u32)
                },
            };
            unwind::walk(t, &modules, regs, |pc, m| {
                raw += 1;
                if !(leading && skip_leading(&resolved(c, m as usize, pc))) {
                    leading = false;
                    pcs[kept].write(pc);
                    mods[kept].write(m);
                    kept += 1;
                }
                kept < depth && raw < limit
            })?;
            // SAFETY: `kept` ≤ MAX_DEPTH (`depth` is clamped to it) and `..kept` was written.
            let (pcs, mods) = unsafe {
                (
                    std::slice::from_raw_parts(pcs.as_ptr() as *const usize, kept),
                    std::slice::from_raw_parts(mods.as_ptr() as *const u32, kept),
                )
            };
            Some(f(t, c, pcs, mods))
        })
        .flatten()
    })
}

/// The reference capture: libgcc's unwinder through glibc's `backtrace()` (what every capture
/// used before issue 35, and what echo's unwinder falls back to).
#[inline(never)]
fn reference_with(depth: usize, skip_leading: &dyn Fn(&Resolved) -> bool) -> CallSite {
    let mut frames = Vec::with_capacity(depth.clamp(1, MAX_DEPTH));
    reference_walk(depth, skip_leading, &mut |module, offset| {
        frames.push(Frame {
            module: module.to_string(),
            offset,
        })
    });
    CallSite {
        hash: with_thread(CallSite::hash_frames(&frames)),
        frames,
    }
}

/// [`capture`] by the reference path alone.
#[inline(never)]
pub fn capture_reference(depth: usize) -> CallSite {
    reference_with(depth, &skip_layer_frames)
}

/// The reference path's site hash, before the thread's name is mixed in.
#[inline(never)]
fn reference_hash(depth: usize, skip_leading: &dyn Fn(&Resolved) -> bool) -> u64 {
    let mut h = FNV_OFFSET;
    reference_walk(depth, skip_leading, &mut |module, offset| {
        eat_frame(&mut h, module, offset)
    });
    h
}

/// The frames of the current call by the reference path: `visit(module, offset)` for each of
/// at most `depth` frames (leading frames `skip_leading` names are dropped). An address in no
/// module (JIT code) is visited as `("?", 0)`: the depth still counts, without the
/// run-dependent address.
#[inline(always)]
fn reference_walk(
    depth: usize,
    skip_leading: &dyn Fn(&Resolved) -> bool,
    visit: &mut dyn FnMut(&str, u64),
) {
    let depth = depth.clamp(1, MAX_DEPTH);
    let mut buf = [std::ptr::null_mut::<c_void>(); MAX_DEPTH + SLACK];
    let want = (depth + SLACK).min(buf.len()) as c_int;
    // SAFETY: `buf` has room for `want` pointers.
    let n = unsafe { backtrace(buf.as_mut_ptr(), want) }.max(0) as usize;
    with_modules(|c| {
        let mut kept = 0;
        let mut leading = true;
        for &a in &buf[..n] {
            match resolve_in(c, a as usize) {
                None if leading => continue,
                None => visit("?", 0),
                Some(r) => {
                    if leading && skip_leading(&r) {
                        continue;
                    }
                    leading = false;
                    visit(r.module, r.addr.wrapping_sub(r.base) as u64);
                }
            }
            kept += 1;
            if kept == depth {
                break;
            }
        }
    });
}

/// Captures that echo's unwinder took, captures that fell back to the reference, captures
/// made by the reference alone (`VK_ECHO_CALLSITE_CHECK=reference`), captures checked against
/// the reference (`VK_ECHO_CALLSITE_CHECK=1`), and how many of those differed.
static UNWOUND: AtomicU64 = AtomicU64::new(0);
static FALLBACKS: AtomicU64 = AtomicU64::new(0);
static REFERENCE: AtomicU64 = AtomicU64::new(0);
static CHECKED: AtomicU64 = AtomicU64::new(0);
static MISMATCHES: AtomicU64 = AtomicU64::new(0);

/// The call-site counters of this process so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Captures echo's unwinder made.
    pub unwound: u64,
    /// Captures that fell back to libgcc's unwinder (a frame echo's could not follow).
    pub fallbacks: u64,
    /// Captures made by libgcc's unwinder alone (`VK_ECHO_CALLSITE_CHECK=reference`).
    pub reference: u64,
    /// Captures also made by the reference path (`VK_ECHO_CALLSITE_CHECK=1`).
    pub checked: u64,
    /// Of those, how many gave another site.
    pub mismatches: u64,
    /// How many times the module cache was filled (at start, then after `dlopen`/`dlclose`).
    pub module_fills: u64,
}

#[cfg_attr(not(test), allow(dead_code))]
pub fn stats() -> Stats {
    Stats {
        unwound: UNWOUND.load(Ordering::Relaxed),
        fallbacks: FALLBACKS.load(Ordering::Relaxed),
        reference: REFERENCE.load(Ordering::Relaxed),
        checked: CHECKED.load(Ordering::Relaxed),
        mismatches: MISMATCHES.load(Ordering::Relaxed),
        module_fills: FILLS.load(Ordering::Relaxed),
    }
}

/// The log line of the counters (`vkDestroyDevice`, info), when any capture was made.
pub fn log_stats() {
    let s = stats();
    if s.unwound + s.fallbacks + s.reference == 0 {
        return;
    }
    log::info!(
        "call sites: {} captured by echo's unwinder, {} by libgcc's (fallback){}; {} checked against libgcc's, {} differed; module cache filled {} times",
        s.unwound,
        s.fallbacks,
        if s.reference > 0 {
            format!(", {} by libgcc's alone (VK_ECHO_CALLSITE_CHECK=reference)", s.reference)
        } else {
            String::new()
        },
        s.checked,
        s.mismatches,
        s.module_fills
    );
}

/// `VK_ECHO_CALLSITE_CHECK` (a diagnostic, not a setting).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// Unset: echo's unwinder, libgcc's where it cannot follow a frame.
    Off,
    /// `1`: every capture is also made by the reference path and compared.
    Compare,
    /// `reference`: every capture by the reference path alone (what echo did before issue 35;
    /// tests make plans with it).
    Reference,
}

fn check_mode() -> Check {
    static MODE: OnceLock<Check> = OnceLock::new();
    *MODE.get_or_init(|| {
        let env = crate::settings::env_lookup(crate::settings::secure_execution());
        check_value(env("VK_ECHO_CALLSITE_CHECK").as_deref())
    })
}

fn check_value(v: Option<&str>) -> Check {
    match v.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        Some("1" | "true" | "on") => Check::Compare,
        Some("reference") => Check::Reference,
        _ => Check::Off,
    }
}

/// Compares a site hash with the reference path's for the same call (both drop this layer's
/// frames, so they start at the application's call); a difference is counted and its frames
/// are logged (the first few).
#[inline(never)]
fn check(hash: u64, depth: usize) {
    CHECKED.fetch_add(1, Ordering::Relaxed);
    let reference = capture_reference(depth);
    if reference.hash == hash {
        return;
    }
    let n = MISMATCHES.fetch_add(1, Ordering::Relaxed);
    if n < 8 {
        let ours = capture_with(depth, &skip_layer_frames);
        log::warn!(
            "call-site check: echo's unwinder gave {:016x} {:?}, libgcc's {:016x} {:?}",
            hash,
            ours.frames,
            reference.hash,
            reference.frames
        );
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

#[inline]
fn fnv(h: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *h ^= *b as u64;
        *h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
}

/// One frame into a site hash: the module's bytes, a 0 byte, the offset as 8 little-endian
/// bytes (the one definition both [`CallSite::hash_frames`] and [`capture_hash`] use).
#[inline]
fn eat_frame(h: &mut u64, module: &str, offset: u64) {
    fnv(h, module.as_bytes());
    fnv(h, &[0]);
    fnv(h, &offset.to_le_bytes());
}

/// A site hash mixed with the calling thread's name, when the application named the thread.
fn with_thread(h: u64) -> u64 {
    match thread_tag() {
        Some(name) => CallSite::mix_thread(h, &name),
        None => h,
    }
}

/// The name of the calling thread when the application gave it one: objects created by the same
/// code on several threads get their ordinals per thread then, which stays stable across runs
/// (creation order *across* threads follows the scheduler). `None` on the main thread and on
/// threads that kept the process name (Linux threads inherit it).
fn thread_tag() -> Option<String> {
    // SAFETY: plain syscalls; PR_GET_NAME writes at most 16 bytes including the NUL.
    unsafe {
        if libc::syscall(libc::SYS_gettid) as libc::pid_t == libc::getpid() {
            return None;
        }
        let mut buf = [0u8; 17];
        if libc::prctl(
            libc::PR_GET_NAME,
            buf.as_mut_ptr() as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return None;
        }
        let name = CStr::from_bytes_until_nul(&buf)
            .ok()?
            .to_string_lossy()
            .into_owned();
        static PROCESS: OnceLock<String> = OnceLock::new();
        let process = PROCESS.get_or_init(|| {
            std::fs::read_to_string("/proc/self/comm")
                .map(|s| s.trim_end().to_string())
                .unwrap_or_default()
        });
        (!name.is_empty() && name != *process).then_some(name)
    }
}

impl CallSite {
    /// Mix a thread name into a site hash (FNV-1a continued over `"\0thread\0" + name`).
    pub fn mix_thread(mut h: u64, name: &str) -> u64 {
        fnv(&mut h, b"\0thread\0");
        fnv(&mut h, name.as_bytes());
        h
    }
}

/// Hands out [`ObjectKey`]s: the ordinal counts objects with the same (site, size, usage,
/// flags) in creation order. Safe to share among threads.
#[derive(Default)]
pub struct KeyAllocator {
    next: DashMap<(u64, u64, u32, u32), u32>,
}

impl KeyAllocator {
    #[cfg(test)]
    pub fn new() -> Self {
        Self::default()
    }

    /// The key the next [`Self::key`] with these fields would give, without taking it.
    pub fn peek(&self, site: u64, size: u64, usage: u32, flags: u32) -> ObjectKey {
        let ordinal = self.next.get(&(site, size, usage, flags)).map_or(0, |e| *e);
        ObjectKey {
            site: format!("{site:016x}"),
            size,
            usage,
            flags,
            ordinal,
        }
    }

    pub fn key(&self, site: u64, size: u64, usage: u32, flags: u32) -> ObjectKey {
        let mut e = self.next.entry((site, size, usage, flags)).or_insert(0);
        let ordinal = *e;
        *e += 1;
        ObjectKey {
            site: format!("{site:016x}"),
            size,
            usage,
            flags,
            ordinal,
        }
    }
}

#[cfg(test)]
#[path = "site_tests.rs"]
mod tests;
