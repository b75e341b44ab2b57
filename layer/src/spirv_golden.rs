//! The shader-access verdicts on every SPIR-V module the project has, against a checked-in
//! golden file (issue 34 item 3): `layer/testdata/spirv_access.golden`. It was written by the
//! hand-written word parser that `spirv_access` had before it moved onto `rspirv`, and every
//! later implementation must give the same verdicts.
//!
//! The corpus:
//! - every `samples/shaders/*.comp` and `tests/shaders/*.comp|vert|frag`, compiled with
//!   glslangValidator the way their build scripts do (samples: Vulkan 1.2 where they use
//!   `GL_EXT_buffer_reference`, else 1.1; tests: 1.0 for `c_*`, else 1.1), and again for
//!   Vulkan 1.0, 1.1, 1.2 and 1.3, with `-g` (OpLine, OpName), with `-gVS` (the
//!   `NonSemantic.Shader.DebugInfo.100` instructions) and with `-Os` (glslang's optimizer);
//!   a combination glslang refuses is recorded as refused;
//! - naga 30's output for the WGSL in `layer/testdata/naga`;
//! - the shaders VkFFT 1.2.26 (Debian libvkfft-dev) generates and compiles at run time for
//!   `tests/c/c_vkfft.c`'s small and large cases, dumped from its `vkCreateShaderModule` calls
//!   (`layer/testdata/vkfft/modules.tar.xz`, made by `layer/testdata/vkfft/make.sh`).
//!
//! One line per module, entry point and binding: `MODULE ENTRY SET.BINDING read|write|readwrite`;
//! `MODULE ENTRY -` for an entry point with no binding used; `MODULE none` where the analysis
//! has no answer (the layer is then conservative).
//!
//! Needs glslangValidator (scripts/deps.sh): without it the test says so and passes, as the
//! other glslang-based tests do. `VKECHO_BLESS=1` rewrites the golden file.

use crate::reflect;
use echo_analyzer::trace::Access;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn words_of(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// glslangValidator `args` on `src`: `Ok(words)`, `Err(true)` where it refused the source,
/// `Err(false)` where it could not be run.
fn glslang(src: &Path, args: &[&str], out: &Path) -> Result<Vec<u32>, bool> {
    let o = std::process::Command::new("glslangValidator")
        .args(args)
        .arg("-o")
        .arg(out)
        .arg(src)
        .output()
        .map_err(|_| false)?;
    if !o.status.success() {
        return Err(true);
    }
    Ok(words_of(&std::fs::read(out).map_err(|_| false)?))
}

/// Every module of the corpus as (label, words or `None`: glslang refused it). `None` when
/// glslangValidator is not installed.
pub(crate) fn corpus() -> Option<Vec<(String, Option<Vec<u32>>)>> {
    let root = root();
    // One directory per call: the tests that read the corpus run in parallel in one process, and
    // two `tar` runs unpacking into the same directory fail.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = std::env::temp_dir().join(format!("echo-golden-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&tmp).ok()?;
    let mut out = Vec::new();
    let mut n = 0;
    for dir in ["samples/shaders", "tests/shaders"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .ok()?
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.extension()
                    .is_some_and(|x| x == "comp" || x == "vert" || x == "frag")
            })
            .collect();
        files.sort();
        for f in files {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&f).ok()?;
            // As the build scripts compile it.
            let build_env = if dir.starts_with("samples") {
                if text.contains("GL_EXT_buffer_reference") {
                    "vulkan1.2"
                } else {
                    "vulkan1.1"
                }
            } else if name.starts_with("c_") {
                "vulkan1.0"
            } else {
                "vulkan1.1"
            };
            let mut variants: Vec<(String, Vec<&str>)> = vec![(
                format!("build:{build_env}"),
                vec!["--target-env", build_env],
            )];
            for env in ["vulkan1.0", "vulkan1.1", "vulkan1.2", "vulkan1.3"] {
                variants.push((env.into(), vec!["--target-env", env]));
            }
            variants.push((
                "vulkan1.1-g".into(),
                vec!["--target-env", "vulkan1.1", "-g"],
            ));
            variants.push((
                "vulkan1.3-gVS".into(),
                vec!["--target-env", "vulkan1.3", "-gVS"],
            ));
            variants.push((
                "vulkan1.2-Os".into(),
                vec!["--target-env", "vulkan1.2", "-Os"],
            ));
            for (label, mut args) in variants {
                args.insert(0, "-V");
                let spv = tmp.join(format!("{n}.spv"));
                n += 1;
                let words = match glslang(&f, &args, &spv) {
                    Ok(w) => Some(w),
                    Err(true) => None,
                    Err(false) => return None,
                };
                out.push((format!("{dir}/{name}[{label}]"), words));
            }
        }
    }
    // VkFFT's modules, packed (1.2 MB of SPIR-V, 66 kB as .tar.xz).
    let vkfft = tmp.join("vkfft");
    std::fs::create_dir_all(&vkfft).ok()?;
    let unpacked = std::process::Command::new("tar")
        .arg("xJf")
        .arg(root.join("layer/testdata/vkfft/modules.tar.xz"))
        .arg("-C")
        .arg(&vkfft)
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        unpacked,
        "cannot unpack layer/testdata/vkfft/modules.tar.xz (tar, xz)"
    );
    for (dir, label) in [
        (root.join("layer/testdata/naga"), "layer/testdata/naga"),
        (vkfft, "layer/testdata/vkfft/modules.tar.xz:"),
    ] {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = rd
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "spv"))
            .collect();
        files.sort();
        for f in files {
            let w = words_of(&std::fs::read(&f).ok()?);
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            let sep = if label.ends_with(':') { "" } else { "/" };
            out.push((format!("{label}{sep}{name}"), Some(w)));
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    Some(out)
}

fn access(a: Access) -> &'static str {
    match a {
        Access::Read => "read",
        Access::Write => "write",
        Access::ReadWrite => "readwrite",
    }
}

/// The verdicts on the corpus, in the golden file's format.
fn verdicts(corpus: &[(String, Option<Vec<u32>>)]) -> String {
    let mut s = String::new();
    for (label, words) in corpus {
        let Some(words) = words else {
            writeln!(s, "{label} refused-by-glslang").unwrap();
            continue;
        };
        let Some(m) = reflect::reflect(words) else {
            writeln!(s, "{label} none").unwrap();
            continue;
        };
        let mut entries: Vec<_> = m.entries.iter().collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        if entries.is_empty() {
            writeln!(s, "{label} no-entry-point").unwrap();
        }
        for (entry, b) in entries {
            let mut b: Vec<_> = b.iter().collect();
            b.sort_by_key(|x| *x.0);
            if b.is_empty() {
                writeln!(s, "{label} {entry} -").unwrap();
            }
            for ((set, binding), a) in b {
                writeln!(s, "{label} {entry} {set}.{binding} {}", access(*a)).unwrap();
            }
        }
    }
    s
}

#[test]
fn spirv_access_golden() {
    let Some(corpus) = corpus() else {
        eprintln!("note: glslangValidator not available; golden test skipped");
        return;
    };
    let got = verdicts(&corpus);
    let path = root().join("layer/testdata/spirv_access.golden");
    if std::env::var_os("VKECHO_BLESS").is_some() {
        std::fs::write(&path, &got).unwrap();
        eprintln!("wrote {}", path.display());
        return;
    }
    let want = std::fs::read_to_string(&path).expect("layer/testdata/spirv_access.golden");
    if got != want {
        let g: Vec<&str> = got.lines().collect();
        let w: Vec<&str> = want.lines().collect();
        let mut diff = String::new();
        for l in &w {
            if !g.contains(l) {
                writeln!(diff, "- {l}").unwrap();
            }
        }
        for l in &g {
            if !w.contains(l) {
                writeln!(diff, "+ {l}").unwrap();
            }
        }
        panic!(
            "verdicts differ from layer/testdata/spirv_access.golden \
             ({} lines golden, {} now; - golden only, + now only):\n{diff}",
            w.len(),
            g.len()
        );
    }
    eprintln!(
        "{} modules, {} verdict lines: as golden",
        corpus.len(),
        g_len(&got)
    );
}

fn g_len(s: &str) -> usize {
    s.lines().count()
}

/// The stable stand-in for the `spirv_access` fuzz target (fuzz/, scripts/fuzz.sh): mutations
/// of the corpus (bits flipped, words replaced by small numbers, ids and opcodes, word counts
/// changed, ranges deleted, duplicated or swapped), each analysed without `catch_unwind`, so a
/// panic in rspirv's parser or in the analysis fails the test. `VKECHO_FUZZ_ITERS` mutations
/// (default 3000), from `VKECHO_FUZZ_SEED` (default 1).
#[test]
fn spirv_access_never_panics() {
    let Some(corpus) = corpus() else {
        eprintln!("note: glslangValidator not available; test skipped");
        return;
    };
    // The modules as their build scripts compile them, naga's and VkFFT's smallest.
    let mut seeds: Vec<Vec<u32>> = corpus
        .iter()
        .filter(|(l, _)| l.contains("[build:") || l.contains("-gVS]") || !l.contains('['))
        .filter_map(|(_, w)| w.clone())
        .filter(|w| w.len() < 8192)
        .collect();
    seeds.sort_by_key(Vec::len);
    let iters: u64 = std::env::var("VKECHO_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let mut x: u64 = std::env::var("VKECHO_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        | 1;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut parsed, mut answered) = (0u64, 0u64);
    for it in 0..iters {
        let mut w = seeds[(rnd() % seeds.len() as u64) as usize].clone();
        for _ in 0..1 + rnd() % 4 {
            let n = w.len().max(1);
            let k = (rnd() % n as u64) as usize;
            match rnd() % 8 {
                0 => {
                    if let Some(v) = w.get_mut(k) {
                        *v ^= 1 << (rnd() % 32);
                    }
                }
                1 => {
                    if let Some(v) = w.get_mut(k) {
                        *v = (rnd() % 64) as u32;
                    }
                }
                // An opcode or a word count (instruction words' halves).
                2 => {
                    if let Some(v) = w.get_mut(k) {
                        *v = (*v & 0xffff_0000) | (rnd() % 400) as u32;
                    }
                }
                3 => {
                    if let Some(v) = w.get_mut(k) {
                        *v = (*v & 0xffff) | (((rnd() % 12) as u32) << 16);
                    }
                }
                4 => {
                    let e = (k + 1 + (rnd() % 16) as usize).min(w.len());
                    w.drain(k.min(w.len())..e);
                }
                5 => {
                    let e = (k + 1 + (rnd() % 16) as usize).min(w.len());
                    let dup: Vec<u32> = w[k.min(w.len())..e].to_vec();
                    let at = (rnd() % (w.len() as u64 + 1)) as usize;
                    w.splice(at..at, dup);
                }
                6 => {
                    let j = (rnd() % n as u64) as usize;
                    if j < w.len() && k < w.len() {
                        w.swap(j, k);
                    }
                }
                _ => w.truncate(k),
            }
        }
        let m = crate::spirv_access::load(&w);
        parsed += m.is_some() as u64;
        if let Some(m) = m {
            answered += crate::spirv_access::analyze_module(&m).is_some() as u64;
        }
        if it == 0 {
            // The unmutated seeds too.
            for s in &seeds {
                assert!(crate::spirv_access::analyze(s).is_some());
            }
        }
    }
    eprintln!(
        "{iters} mutations of {} modules: {parsed} parsed, {answered} answered",
        seeds.len()
    );
}

/// `VKECHO_WRITE_SEEDS=DIR`: the corpus as seeds for the `spirv_access` fuzz target, in
/// `DIR/spirv_access/` (scripts/fuzz.sh).
#[test]
fn write_spirv_seeds() {
    let Ok(dir) = std::env::var("VKECHO_WRITE_SEEDS") else {
        return;
    };
    let Some(corpus) = corpus() else {
        eprintln!("note: glslangValidator not available; no SPIR-V seeds");
        return;
    };
    let dir = Path::new(&dir).join("spirv_access");
    std::fs::create_dir_all(&dir).unwrap();
    for (label, words) in corpus {
        let Some(words) = words else { continue };
        let name: String = label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}
