//! SPIR-V reflection (DESIGN §4): which descriptor bindings a shader entry point uses, and
//! whether it reads, writes or both. Built on `spirq`, which reports the access of storage
//! buffers and images from their `NonWritable`/`NonReadable` decorations (GLSL `readonly` /
//! `writeonly`); an undecorated storage buffer is read-write. Only resources the entry point
//! really references are listed, so a binding a shader never touches is not a use.
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

fn access_of(a: spirq::ty::AccessType) -> Access {
    match a {
        spirq::ty::AccessType::ReadOnly => Access::Read,
        spirq::ty::AccessType::WriteOnly => Access::Write,
        spirq::ty::AccessType::ReadWrite => Access::ReadWrite,
    }
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
    use spirq::prelude::*;
    // spirq panics (caught below, but noisy) on a stream shorter than the header.
    if words.len() < 5 || words[0] != 0x0723_0203 {
        return None;
    }
    let words = words.to_vec();
    let eps = std::panic::catch_unwind(move || {
        ReflectConfig::new()
            .spv(words)
            .ref_all_rscs(false)
            .combine_img_samplers(true)
            .reflect()
            .ok()
    })
    .ok()
    .flatten()?;
    let mut m = Module::default();
    for ep in eps {
        let mut b = Bindings::new();
        for v in &ep.vars {
            if let Variable::Descriptor {
                desc_bind, desc_ty, ..
            } = v
            {
                let acc = match desc_ty {
                    DescriptorType::StorageBuffer(a) | DescriptorType::StorageTexelBuffer(a) => {
                        access_of(*a)
                    }
                    DescriptorType::StorageImage(a) => access_of(*a),
                    DescriptorType::UniformBuffer() | DescriptorType::UniformTexelBuffer() => {
                        Access::Read
                    }
                    _ => Access::Read,
                };
                let (set, bind) = desc_bind.into_inner();
                b.entry((set, bind))
                    .and_modify(|a| *a = merge(*a, acc))
                    .or_insert(acc);
            }
        }
        m.entries
            .entry(ep.name.clone())
            .and_modify(|x| merge_into(x, &b))
            .or_insert(b);
    }
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(src: &str) -> Option<Vec<u32>> {
        let dir = std::env::temp_dir().join(format!("echo-reflect-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let comp = dir.join("t.comp");
        let spv = dir.join("t.spv");
        std::fs::write(&comp, src).ok()?;
        let ok = std::process::Command::new("glslangValidator")
            .args(["-V", "-o"])
            .arg(&spv)
            .arg(&comp)
            .output()
            .ok()?
            .status
            .success();
        if !ok {
            return None;
        }
        let bytes = std::fs::read(&spv).ok()?;
        Some(
            bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        )
    }

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

    #[test]
    fn garbage_is_none_not_a_panic() {
        assert!(reflect(&[1, 2, 3]).is_none());
        assert!(reflect(&[]).is_none());
        // A header and a bad instruction: no module, or one without entry points (either way
        // no binding is known, and the caller is conservative).
        let r = reflect(&[0x0723_0203, 0x10000, 0, 5, 0, 0xffff_ffff]);
        assert!(!matches!(r, Some(m) if !m.entries.is_empty()));
    }
}
