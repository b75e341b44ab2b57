//! Call-site identity's tests: keys equal across runs under ASLR (a child process run twice),
//! frames resolved and filtered, the unwinder against `backtrace()`, its cost.

use super::*;

fn keep_all(_: &Resolved) -> bool {
    false
}

// Two distinct call sites (never inlined, so each has its own return address).
#[inline(never)]
fn site_a() -> CallSite {
    std::hint::black_box(capture_with(16, &keep_all))
}
#[inline(never)]
fn site_b() -> CallSite {
    std::hint::black_box(capture_with(16, &keep_all))
}

/// The same code on differently named threads gives different sites (ordinals then count per
/// thread, stable across runs); the same name gives the same site; the frames are equal.
#[test]
fn named_threads_get_their_own_sites() {
    let on = |name: &str| {
        std::thread::Builder::new()
            .name(name.into())
            .spawn(site_a)
            .unwrap()
            .join()
            .unwrap()
    };
    let (a1, a2, b) = (on("worker-0"), on("worker-0"), on("worker-1"));
    assert_eq!(a1.hash, a2.hash);
    assert_ne!(a1.hash, b.hash);
    let strip = |c: &CallSite| c.frames.iter().skip(1).take(2).cloned().collect::<Vec<_>>();
    assert_eq!(strip(&a1), strip(&b), "same code, same frames");
    assert_eq!(CallSite::mix_thread(7, "x"), CallSite::mix_thread(7, "x"));
    assert_ne!(CallSite::mix_thread(7, "x"), CallSite::mix_thread(7, "y"));
}

/// Echo's unwinder alone (no fallback): `None` where it would fall back.
#[inline(never)]
fn unwound_only(depth: usize, skip: &dyn Fn(&Resolved) -> bool) -> Option<CallSite> {
    let regs = unwind::Regs::here()?;
    let frames = unwound(regs, depth, skip, |_, c, pcs, mods| frames_of(c, pcs, mods))?;
    Some(CallSite {
        hash: with_thread(CallSite::hash_frames(&frames)),
        frames,
    })
}

type Capture = fn(usize, &dyn Fn(&Resolved) -> bool) -> CallSite;

#[inline(never)]
fn unwound_or_panic(depth: usize, skip: &dyn Fn(&Resolved) -> bool) -> CallSite {
    std::hint::black_box(unwound_only(depth, skip))
        .expect("echo's unwinder follows every frame here")
}

#[inline(never)]
fn reference_wrapped(depth: usize, skip: &dyn Fn(&Resolved) -> bool) -> CallSite {
    std::hint::black_box(reference_with(depth, skip))
}

/// Both capture paths from one call instruction (an indirect call: same return address),
/// `n` recursive frames below the caller.
#[inline(never)]
fn both_from(n: usize, depth: usize, out: &mut Vec<CallSite>) {
    if n == 0 {
        for f in [unwound_or_panic as Capture, reference_wrapped as Capture] {
            out.push(std::hint::black_box(f)(depth, &keep_all));
        }
    } else {
        both_from(n - 1, depth, out);
        std::hint::black_box(&out);
    }
}

/// Issue 35: echo's unwinder finds the return addresses libgcc's finds (`backtrace()`, the
/// path every site was captured with before), frame for frame, whatever the depth: the
/// sites are the same, so plans made before still match. The first three frames are each
/// path's own (where it took its registers, its wrapper, and the call to it, which the
/// optimiser may duplicate per path), and are not compared.
#[test]
fn unwinder_gives_the_reference_frames() {
    for (n, depth) in [(0, 16), (5, 16), (40, 64), (3, 4), (70, 64)] {
        for _ in 0..3 {
            // Three times: the row cache and the memo answer the later ones.
            let mut v = Vec::new();
            both_from(n, depth, &mut v);
            let (ours, reference) = (&v[0], &v[1]);
            assert_eq!(
                ours.frames.len(),
                reference.frames.len(),
                "{n} {depth}: {ours:?} {reference:?}"
            );
            assert_eq!(
                ours.frames.get(3..),
                reference.frames.get(3..),
                "n={n} depth={depth}"
            );
            assert!(ours.frames.len() >= (n + 4).min(depth), "{ours:?}");
        }
    }
    // On another thread (its own stack bounds, row cache and memo), to its outermost frame.
    std::thread::spawn(|| {
        let mut v = Vec::new();
        both_from(2, 64, &mut v);
        assert_eq!(v[0].frames[3..], v[1].frames[3..]);
        assert!(
            v[0].frames.len() < 64,
            "the walk reaches the thread's first frame"
        );
    })
    .join()
    .unwrap();
}

/// A capture whose stack is not the thread's own (a signal handler on an alternate stack,
/// a coroutine's stack) is never walked by echo's unwinder, which reads only inside the
/// thread's stack: it falls back to the reference, and gives the reference's frames.
#[test]
fn a_foreign_stack_falls_back_to_the_reference() {
    static OUT: Mutex<Vec<(bool, CallSite)>> = Mutex::new(Vec::new());
    #[inline(never)]
    fn from_handler() {
        let fast = unwound_only(16, &keep_all).is_some();
        let mut v = Vec::new();
        for f in [capture_with as Capture, reference_wrapped as Capture] {
            v.push(std::hint::black_box(f)(16, &keep_all));
        }
        let mut out = OUT.lock().unwrap();
        out.push((fast, v.remove(0)));
        out.push((fast, v.remove(0)));
    }
    extern "C" fn handler(_: c_int) {
        from_handler();
    }
    std::thread::spawn(|| unsafe {
        let mut stack = vec![0u8; 1 << 18];
        let ss = libc::stack_t {
            ss_sp: stack.as_mut_ptr() as *mut c_void,
            ss_flags: 0,
            ss_size: stack.len(),
        };
        assert_eq!(libc::sigaltstack(&ss, std::ptr::null_mut()), 0);
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as extern "C" fn(c_int) as usize;
        sa.sa_flags = libc::SA_ONSTACK;
        assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
        let before = stats().fallbacks;
        libc::raise(libc::SIGUSR2);
        assert!(stats().fallbacks > before);
        let off = libc::stack_t {
            ss_sp: std::ptr::null_mut(),
            ss_flags: libc::SS_DISABLE,
            ss_size: 0,
        };
        libc::sigaltstack(&off, std::ptr::null_mut());
        drop(stack);
    })
    .join()
    .unwrap();
    let out = OUT.lock().unwrap();
    assert_eq!(out.len(), 2);
    assert!(!out[0].0, "echo's unwinder read outside the thread's stack");
    let (ours, reference) = (&out[0].1, &out[1].1);
    assert!(reference.frames.len() > 4, "{reference:?}");
    assert_eq!(ours.frames[3..], reference.frames[3..]);
}

/// The production paths (hash alone, frames, reference) agree: the layer's frames dropped,
/// each gives the same site; the counters say which path ran.
#[test]
fn hash_frames_and_reference_agree() {
    for _ in 0..3 {
        let h = capture_hash(16);
        let s = capture(16);
        let r = capture_reference(16);
        assert_eq!(h, r.hash, "{:?}", r.frames);
        assert_eq!(s, r);
    }
    let before = stats();
    capture_hash(16);
    let after = stats();
    assert!(after.unwound > before.unwound, "{before:?} {after:?}");
}

/// A `dlopen`/`dlclose` refills the module cache: modules still loaded are taken over with
/// their serials (and tables), a new one gets a new serial, and sites stay the reference's.
#[test]
fn modules_stay_across_dlopen_and_dlclose() {
    let a = load_modules(Vec::new());
    let serials: Vec<(String, u32)> = a.iter().map(|m| (m.path.clone(), m.serial)).collect();
    let b = load_modules(a);
    let again: Vec<(String, u32)> = b.iter().map(|m| (m.path.clone(), m.serial)).collect();
    assert_eq!(
        serials, again,
        "nothing was loaded or unloaded: every module is taken over"
    );
    let fresh = load_modules(Vec::new());
    assert!(fresh.iter().zip(&b).all(|(x, y)| x.serial != y.serial));

    let site = || (capture_hash(16), capture_reference(16).hash);
    let (h0, r0) = site();
    assert_eq!(h0, r0);
    let fills = stats().module_fills;
    // A library no test loads: glibc's libutil stub (its functions live in libc now).
    let lib = unsafe { libc::dlopen(c"libutil.so.1".as_ptr(), libc::RTLD_NOW) };
    assert!(!lib.is_null(), "dlopen libutil.so.1");
    let (h1, r1) = site();
    assert_eq!(h1, r1);
    assert_eq!(h1, h0, "the same call site, another module loaded");
    assert!(stats().module_fills > fills);
    assert!(with_modules(|c| c
        .modules
        .iter()
        .any(|m| m.name == "libutil.so.1")));
    unsafe { libc::dlclose(lib) };
    let (h2, r2) = site();
    assert_eq!((h2, r2), (h0, r0));
}

const CHILD_ENV: &str = "ECHO_CALLSITE_CHILD";

/// In the child: print the hashes and a raw address, so the parent can compare runs.
#[test]
fn aslr_child_prints_sites() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let a = site_a();
    let b = site_b();
    println!(
        "SITES {} {} {} {:#x}",
        a.hex(),
        b.hex(),
        a.frames[0].module,
        site_a as *const () as usize
    );
}

fn run_child() -> (String, String, String, String) {
    let out = crate::testutil::run_alone("callsite::tests::aslr_child_prints_sites", CHILD_ENV);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.split_once("SITES ").map(|x| x.1))
        .unwrap_or_else(|| panic!("no SITES line in {text}"));
    let v: Vec<String> = line.split(' ').map(String::from).collect();
    (v[0].clone(), v[1].clone(), v[2].clone(), v[3].clone())
}

#[test]
fn same_program_twice_gives_same_sites_despite_aslr() {
    let (a1, b1, m1, raw1) = run_child();
    let (a2, b2, m2, raw2) = run_child();
    assert_eq!(a1, a2, "site A differs between runs");
    assert_eq!(b1, b2, "site B differs between runs");
    assert_ne!(a1, b1, "two call sites must hash differently");
    assert_eq!(m1, m2);
    let aslr = std::fs::read_to_string("/proc/sys/kernel/randomize_va_space")
        .map(|s| s.trim() != "0")
        .unwrap_or(false);
    // qemu-user loads a PIE at one fixed base (0x5500000000 for aarch64 guests).
    let qemu = std::env::var("ECHO_TEST_RUNNER").is_ok_and(|r| r.contains("qemu"));
    if qemu {
        eprintln!("note: under qemu-user (fixed load base) the raw-address check is skipped");
    } else if aslr {
        // The test is only meaningful if the load address really moved.
        assert_ne!(
            raw1, raw2,
            "PIE test binary loaded at the same address twice"
        );
    } else {
        eprintln!("note: ASLR is off on this machine; the raw-address check is skipped");
    }
}

#[test]
fn frames_are_module_relative_and_hash_is_their_fnv() {
    let a = site_a();
    assert!(!a.frames.is_empty());
    // The test harness names its threads, so the thread tag is mixed in here.
    let frames_hash = CallSite::hash_frames(&a.frames);
    let expected = match thread_tag() {
        Some(name) => CallSite::mix_thread(frames_hash, &name),
        None => frames_hash,
    };
    assert_eq!(a.hash, expected);
    assert_eq!(a.hex().len(), 16);
    let exe = exe_basename();
    assert!(a.frames.iter().any(|f| f.module == exe), "{:?}", a.frames);
    // The same call site twice (a loop): same hash. Another line of the caller, or another
    // function: another hash (the caller's return address is part of the site).
    // The trip count hidden from the optimizer: a release build (one codegen unit) unrolled
    // `0..2` into two call sites.
    let v: Vec<u64> = (0..std::hint::black_box(2))
        .map(|_| site_a().hash)
        .collect();
    assert_eq!(v[0], v[1]);
    assert_ne!(site_a().hash, v[0]);
    assert_ne!(site_b().hash, v[0]);
    // Depth is honoured.
    assert!(capture_with(3, &keep_all).frames.len() <= 3);
}

/// Each module is described once, with the executable's full path and the build-id its
/// file has (the one the analyzer reads), and describing adds nothing to the site.
#[test]
fn modules_are_announced_once_with_path_and_build_id() {
    let a = site_a();
    let done = Mutex::new(Vec::new());
    let first = announce_in(&done, &a.frames);
    let exe = first
        .iter()
        .find(|m| m.name == exe_basename())
        .unwrap_or_else(|| panic!("{first:?}"));
    let path = std::env::current_exe().unwrap();
    assert_eq!(exe.path, path.to_str().unwrap());
    // The file's build-id, or none when the linker wrote none (the aarch64 cross build links
    // with zig's, which does not by default): the record says the same either way.
    let id =
        echo_analyzer::context::elf_build_id(&std::fs::read(&path).unwrap()).unwrap_or_default();
    assert_eq!(exe.build_id, id);
    let names: Vec<&str> = first.iter().map(|m| m.name.as_str()).collect();
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(names.len(), unique.len(), "{names:?}");
    assert!(announce_in(&done, &a.frames).is_empty(), "once per module");
    // What every later buffer_create pays: a lock and a scan of the names, no allocation.
    let n = 2000;
    let t0 = std::time::Instant::now();
    for _ in 0..n {
        std::hint::black_box(announce_in(&done, std::hint::black_box(&a.frames)));
    }
    let per = t0.elapsed().as_nanos() as f64 / n as f64;
    eprintln!(
        "callsite::announce, {} frames, modules known: {per:.0} ns per call",
        a.frames.len()
    );
    assert!(per < 50_000.0, "announce takes {per} ns");
    assert!(announce_in(&done, &site_b().frames).is_empty());
    assert!(gnu_build_id(b"short", 4).is_none());
    assert!(gnu_build_id(&[0xff; 64], 4).is_none());
}

/// The site hash is FNV-1a 64 over the frames alone, as DESIGN §4 and trace-format.md say:
/// pinned here so that plans made by earlier layers keep matching (issue 34 added module
/// records to the trace, none of which is hashed).
#[test]
fn site_hash_is_pinned() {
    let frames = [
        Frame {
            module: "libdemo.so".into(),
            offset: 0x1172,
        },
        Frame {
            module: "demo-app".into(),
            offset: 0x2e2e,
        },
    ];
    assert_eq!(CallSite::hash_frames(&frames), 0xe9ed_2b12_5093_9855);
    assert_eq!(CallSite::hash_frames(&[]), FNV_OFFSET);
}

#[test]
fn production_rule_drops_layer_and_loader_frames() {
    assert!(is_loader_or_layer("libvulkan.so.1"));
    assert!(is_loader_or_layer("libvulkan.so.1.3.239"));
    assert!(is_loader_or_layer("libVkLayer_khronos_validation.so"));
    assert!(is_loader_or_layer("libVkLayer_echo.so"));
    assert!(!is_loader_or_layer("saxpy"));
    assert!(!is_loader_or_layer("libc.so.6"));
    // In the test binary the layer's code IS the executable: the production rule skips
    // its frames and starts at libstd/libc (thread start), so it still yields a site.
    let s = capture(16);
    assert!(
        s.frames.iter().all(|f| f.module != exe_basename()),
        "{:?}",
        s.frames
    );
}

#[test]
fn check_values() {
    assert_eq!(check_value(None), Check::Off);
    assert_eq!(check_value(Some("")), Check::Off);
    assert_eq!(check_value(Some("0")), Check::Off);
    assert_eq!(check_value(Some("1")), Check::Compare);
    assert_eq!(check_value(Some("On")), Check::Compare);
    assert_eq!(check_value(Some("reference")), Check::Reference);
}

#[test]
fn key_ordinals_count_per_key() {
    let k = KeyAllocator::new();
    assert_eq!(k.key(1, 64, 3, 0).ordinal, 0);
    assert_eq!(k.key(1, 64, 3, 0).ordinal, 1);
    assert_eq!(k.key(1, 65, 3, 0).ordinal, 0);
    assert_eq!(k.key(2, 64, 3, 0).ordinal, 0);
    let key = k.key(1, 64, 3, 0);
    assert_eq!(key.ordinal, 2);
    assert_eq!(key.site, "0000000000000001");
}

#[test]
fn capture_cost() {
    let _ = capture(16); // first call loads libgcc_s
    let n = 200;
    let mut per = f64::MAX;
    for _ in 0..10 {
        let t0 = std::time::Instant::now();
        for _ in 0..n {
            std::hint::black_box(capture(16));
        }
        per = per.min(t0.elapsed().as_nanos() as f64 / n as f64 / 1000.0);
    }
    eprintln!("callsite::capture(16): {per:.2} us per call (min of 10 batches)");
    assert!(per < 5000.0, "capture takes {per} us");
}
