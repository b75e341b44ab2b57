//! SPIR-V reflection (DESIGN §4): which descriptor bindings a shader entry point uses, and
//! whether its code reads, writes or both. The access comes from the instructions
//! ([`crate::spirv_access`], issue 24), not from the `NonWritable`/`NonReadable` decorations
//! alone: generated SPIR-V and most GLSL never say `writeonly`, and counting every undecorated
//! storage buffer as read refused real download pairs (S1). Only bindings whose memory the entry
//! point really reads or writes are listed, so a binding a shader never touches (or only asks
//! the length of) is not a use.
//!
//! Anything reflection cannot answer (a module it fails to parse, an entry point it does not
//! find) is `None`: the caller then treats every bound buffer as read-write (conservative).

use echo_analyzer::trace::Access;
use std::collections::HashMap;

/// `(set, binding)` → access, for one entry point.
pub type Bindings = HashMap<(u32, u32), Access>;

/// Every entry point of a module: name → its bindings.
#[derive(Clone, Debug, Default)]
pub struct Module {
    pub entries: HashMap<String, Bindings>,
}

fn merge(a: Access, b: Access) -> Access {
    if a == b {
        a
    } else {
        Access::ReadWrite
    }
}

/// Merge the bindings of several stages (a graphics pipeline) into one map.
pub fn merge_into(into: &mut Bindings, from: &Bindings) {
    for (k, v) in from {
        into.entry(*k)
            .and_modify(|a| *a = merge(*a, *v))
            .or_insert(*v);
    }
}

/// Reflect a SPIR-V module (words). `None` when it cannot be parsed; never panics.
pub fn reflect(words: &[u32]) -> Option<Module> {
    let entries = std::panic::catch_unwind(|| crate::spirv_access::analyze(words))
        .ok()
        .flatten()?;
    Some(Module { entries })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::compile;

    #[test]
    fn storage_buffer_access_from_decorations() {
        let Some(words) = compile(
            "#version 450\nlayout(local_size_x=1) in;\n\
             layout(std430, set=0, binding=0) readonly buffer A { float a[]; };\n\
             layout(std430, set=0, binding=1) writeonly buffer B { float b[]; };\n\
             layout(std430, set=1, binding=2) buffer C { float c[]; };\n\
             layout(std430, set=0, binding=3) buffer Unused { float u[]; };\n\
             layout(set=0, binding=4) uniform U { float k; };\n\
             void main() { b[0] = a[0] * k; c[0] += 1.0; }\n",
        ) else {
            eprintln!("note: glslangValidator not available; reflection test skipped");
            return;
        };
        let m = reflect(&words).expect("reflects");
        let e = &m.entries["main"];
        assert_eq!(e.get(&(0, 0)), Some(&Access::Read));
        assert_eq!(e.get(&(0, 1)), Some(&Access::Write));
        assert_eq!(e.get(&(1, 2)), Some(&Access::ReadWrite));
        assert_eq!(e.get(&(0, 4)), Some(&Access::Read));
        assert_eq!(e.get(&(0, 3)), None, "an unreferenced binding is no use");
    }

    /// Issue 24's case 1: a binding the code only stores to, with no `writeonly`, is a write
    /// (by decorations alone, as before, it was read-write, which refused download pairs for
    /// S1); one it only asks the length of is no use.
    #[test]
    fn undecorated_write_only_binding_is_a_write() {
        let Some(words) = compile(
            "#version 450\nlayout(local_size_x=1) in;\n\
             layout(std430, set=0, binding=0) buffer A { float a[]; };\n\
             layout(std430, set=0, binding=1) buffer B { float b[]; };\n\
             void main() { b[0] = a[0] * float(b.length()); }\n",
        ) else {
            eprintln!("note: glslangValidator not available; reflection test skipped");
            return;
        };
        let m = reflect(&words).expect("reflects");
        let e = &m.entries["main"];
        assert_eq!(e.get(&(0, 0)), Some(&Access::Read));
        assert_eq!(e.get(&(0, 1)), Some(&Access::Write));
    }

    /// What reflection costs per shader module (issue 24): every compute shader of the samples
    /// and the test programs, each reflected 2000 times. Run with
    /// `cargo test --release -p vk-layer-echo reflect_cost -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn reflect_cost() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut total_ns = 0f64;
        let mut n = 0;
        for dir in ["samples/shaders", "tests/shaders"] {
            let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "comp"))
                .collect();
            files.sort();
            for f in files {
                let src = std::fs::read_to_string(&f).unwrap();
                let Some(words) = compile(&src) else {
                    continue;
                };
                let iters = 2000;
                let t = std::time::Instant::now();
                for _ in 0..iters {
                    std::hint::black_box(reflect(std::hint::black_box(&words)));
                }
                let ns = t.elapsed().as_nanos() as f64 / iters as f64;
                println!(
                    "reflect {:<20} {:>6} words {:>10.0} ns",
                    f.file_name().unwrap().to_string_lossy(),
                    words.len(),
                    ns
                );
                total_ns += ns;
                n += 1;
            }
        }
        assert!(n > 0);
        println!(
            "reflect mean over {n} modules: {:.0} ns",
            total_ns / n as f64
        );
    }

    #[test]
    fn garbage_is_none_not_a_panic() {
        assert!(reflect(&[1, 2, 3]).is_none());
        assert!(reflect(&[]).is_none());
        // A header and a bad instruction: no module, or one without entry points (either way
        // no binding is known, and the caller is conservative).
        let r = reflect(&[rspirv::spirv::MAGIC_NUMBER, 0x10000, 0, 5, 0, 0xffff_ffff]);
        assert!(!matches!(r, Some(m) if !m.entries.is_empty()));
    }
}
