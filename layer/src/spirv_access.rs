//! Shader access by instruction (issue 24, DESIGN §4): for every entry point of a SPIR-V module
//! and every descriptor binding it uses, whether its code really loads from it, stores to it, or
//! both. Generated SPIR-V (naga, Python frameworks) and most GLSL never say `writeonly`, so the
//! `NonReadable`/`NonWritable` decorations alone would count every storage buffer as read.
//!
//! The words are parsed here, with no SPIR-V library. Per entry point, only the functions
//! reachable from it through `OpFunctionCall` are looked at. A pointer to a descriptor variable
//! is followed through `OpAccessChain`, `OpInBoundsAccessChain`, `OpPtrAccessChain`,
//! `OpInBoundsPtrAccessChain`, `OpCopyObject`, `OpPhi`, `OpSelect`, `OpImageTexelPointer` and
//! into a callee's `OpFunctionParameter` (to a fixed point, so through any depth of calls);
//! an image or texel-buffer handle loaded from one is followed too. Then:
//!
//! - `OpLoad`, `OpAtomicLoad`, the source of `OpCopyMemory[Sized]`, `OpImageRead`,
//!   `OpImageFetch`, sampling and gathering: a read;
//! - `OpStore`, `OpAtomicStore`, `OpAtomicFlagClear`, the target of `OpCopyMemory[Sized]`,
//!   `OpImageWrite`: a write;
//! - every other `OpAtomic*`: both;
//! - `OpArrayLength`, image queries, debug instructions (`OpLine`, `OpName`, non-semantic
//!   `OpExtInst`): neither (a binding only these touch is no use of its memory);
//! - anything else that names a followed id (a pointer stored as a value, returned, converted
//!   to an integer, passed to an unknown opcode or to a semantic `OpExtInst`): read-write.
//!
//! Whole modules are read-write for every binding they use when the code may form pointers the
//! analysis cannot follow: the `PhysicalStorageBufferAddresses` or `Addresses` capabilities, or
//! `OpTypeForwardPointer`. `VariablePointers[StorageBuffer]` is followed, not refused: in the
//! logical addressing model it is what makes a pointer `OpPhi`/`OpSelect`/`OpPtrAccessChain`
//! valid at all, and every other way it lets a pointer travel (stored into a variable, an
//! initializer, returned from a function, loaded back) first names the followed pointer in an
//! instruction listed as not understood above, so the binding is read-write there. Decorations only count where
//! they contradict the code (a `NonWritable` binding that is stored to is invalid SPIR-V): then
//! the binding is read-write. Anything malformed is `None` (the caller is conservative).

use echo_analyzer::trace::Access;
use std::collections::{HashMap, HashSet};

/// What the code of one entry point does with one descriptor binding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Use {
    pub read: bool,
    pub write: bool,
    /// Used in a way the analysis does not understand: read-write.
    pub unknown: bool,
}

impl Use {
    /// `None`: referenced, but its memory is neither read nor written (`OpArrayLength`).
    pub fn access(self) -> Option<Access> {
        match (self.read || self.unknown, self.write || self.unknown) {
            (true, true) => Some(Access::ReadWrite),
            (true, false) => Some(Access::Read),
            (false, true) => Some(Access::Write),
            (false, false) => None,
        }
    }
}

/// What kind of resource a descriptor variable is, from its type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Storage buffer, storage texel buffer, storage image: the code decides.
    Storage,
    /// Uniform buffer, sampled image, uniform texel buffer, input attachment: only reads exist.
    ReadOnly,
    /// Samplers, acceleration structures: no buffer memory behind them here.
    Other,
}

#[derive(Clone, Debug)]
struct Var {
    id: u32,
    set: u32,
    binding: u32,
    kind: Kind,
    non_writable: bool,
    non_readable: bool,
    /// An image or texel buffer (UniformConstant): loaded as a handle.
    image: bool,
}

struct Function {
    params: Vec<u32>,
    /// Instructions of the body: (start, len) in the word stream.
    body: Vec<(usize, usize)>,
}

/// Entry point name → `(set, binding)` → access.
pub type Entries = HashMap<String, HashMap<(u32, u32), Access>>;

const CAP_ADDRESSES: u32 = 4;
const CAP_PHYSICAL_SB: u32 = 5347;

/// Analyse a module: entry point name → `(set, binding)` → access. Bindings whose memory the
/// entry point neither reads nor writes are absent. `None` when the words are not a module.
pub fn analyze(words: &[u32]) -> Option<Entries> {
    if words.len() < 5 || words[0] != 0x0723_0203 {
        return None;
    }
    let mut untrackable = false;
    let mut set_of: HashMap<u32, u32> = HashMap::new();
    let mut binding_of: HashMap<u32, u32> = HashMap::new();
    let mut non_writable: HashSet<u32> = HashSet::new();
    let mut non_readable: HashSet<u32> = HashSet::new();
    // struct id → members with NonWritable / NonReadable, and its member count.
    let mut member_nw: HashMap<u32, HashSet<u32>> = HashMap::new();
    let mut member_nr: HashMap<u32, HashSet<u32>> = HashMap::new();
    let mut members: HashMap<u32, u32> = HashMap::new();
    let mut block: HashSet<u32> = HashSet::new();
    let mut buffer_block: HashSet<u32> = HashSet::new();
    // type id → (opcode, words) for the types that matter.
    let mut pointer: HashMap<u32, (u32, u32)> = HashMap::new(); // id → (storage class, pointee)
    let mut array_of: HashMap<u32, u32> = HashMap::new();
    let mut image: HashMap<u32, (u32, u32)> = HashMap::new(); // id → (dim, sampled)
    let mut sampled_image: HashSet<u32> = HashSet::new();
    let mut globals: Vec<(u32, u32, u32)> = Vec::new(); // (id, pointer type, storage class)
    let mut entries: Vec<(u32, String)> = Vec::new();
    let mut non_semantic: HashSet<u32> = HashSet::new();
    let mut functions: HashMap<u32, Function> = HashMap::new();
    let mut current: Option<(u32, Function)> = None;

    let mut i = 5;
    while i < words.len() {
        let count = (words[i] >> 16) as usize;
        let op = words[i] & 0xffff;
        if count == 0 || i + count > words.len() {
            return None;
        }
        let w = &words[i..i + count];
        let at = |k: usize| w.get(k).copied();
        match op {
            17 => {
                // OpCapability
                if matches!(at(1), Some(CAP_ADDRESSES | CAP_PHYSICAL_SB)) {
                    untrackable = true;
                }
            }
            11 => {
                // OpExtInstImport
                if let Some(id) = at(1) {
                    if string(&w[2..]).starts_with("NonSemantic.") {
                        non_semantic.insert(id);
                    }
                }
            }
            15 => {
                // OpEntryPoint model function name interface…
                if let (Some(f), true) = (at(2), count > 3) {
                    entries.push((f, string(&w[3..])));
                }
            }
            71 => {
                // OpDecorate target decoration literals…
                if let (Some(t), Some(d)) = (at(1), at(2)) {
                    match d {
                        2 => {
                            block.insert(t);
                        }
                        3 => {
                            buffer_block.insert(t);
                        }
                        24 => {
                            non_writable.insert(t);
                        }
                        25 => {
                            non_readable.insert(t);
                        }
                        33 => {
                            binding_of.insert(t, at(3)?);
                        }
                        34 => {
                            set_of.insert(t, at(3)?);
                        }
                        _ => {}
                    }
                }
            }
            72 => {
                // OpMemberDecorate struct member decoration
                if let (Some(t), Some(m), Some(d)) = (at(1), at(2), at(3)) {
                    match d {
                        24 => {
                            member_nw.entry(t).or_default().insert(m);
                        }
                        25 => {
                            member_nr.entry(t).or_default().insert(m);
                        }
                        _ => {}
                    }
                }
            }
            25 => {
                // OpTypeImage id sampled-type dim depth arrayed ms sampled format
                if let (Some(id), Some(dim), Some(s)) = (at(1), at(3), at(7)) {
                    image.insert(id, (dim, s));
                }
            }
            27 => {
                if let Some(id) = at(1) {
                    sampled_image.insert(id);
                }
            }
            28 | 29 => {
                // OpTypeArray / OpTypeRuntimeArray id element
                if let (Some(id), Some(e)) = (at(1), at(2)) {
                    array_of.insert(id, e);
                }
            }
            30 => {
                if let Some(id) = at(1) {
                    members.insert(id, count as u32 - 2);
                }
            }
            32 => {
                // OpTypePointer id storage-class type
                if let (Some(id), Some(sc), Some(t)) = (at(1), at(2), at(3)) {
                    pointer.insert(id, (sc, t));
                }
            }
            39 => {
                // OpTypeForwardPointer: only with physical addressing.
                untrackable = true;
            }
            54 => {
                // OpFunction result-type id control type
                let id = at(2)?;
                current = Some((
                    id,
                    Function {
                        params: Vec::new(),
                        body: Vec::new(),
                    },
                ));
            }
            55 => {
                let (_, f) = current.as_mut()?;
                f.params.push(at(2)?);
            }
            56 => {
                let (id, f) = current.take()?;
                functions.insert(id, f);
            }
            59 if current.is_none() => {
                // OpVariable type id storage-class [initializer]
                if let (Some(t), Some(id), Some(sc)) = (at(1), at(2), at(3)) {
                    globals.push((id, t, sc));
                }
            }
            _ => {
                if let Some((_, f)) = current.as_mut() {
                    f.body.push((i, count));
                }
            }
        }
        i += count;
    }
    if current.is_some() {
        return None;
    }

    // The descriptor variables and their kinds.
    let strip = |mut t: u32| {
        let mut n = 0;
        while let Some(e) = array_of.get(&t) {
            t = *e;
            n += 1;
            if n > 64 {
                break;
            }
        }
        t
    };
    let mut vars: Vec<Var> = Vec::new();
    for (id, ty, sc) in globals {
        let (Some(set), Some(binding)) = (set_of.get(&id), binding_of.get(&id)) else {
            continue;
        };
        let Some((_, pointee)) = pointer.get(&ty) else {
            continue;
        };
        let inner = strip(*pointee);
        let all = |m: &HashMap<u32, HashSet<u32>>| {
            members.get(&inner).is_some_and(|n| {
                *n > 0
                    && m.get(&inner)
                        .is_some_and(|s| (0..*n).all(|k| s.contains(&k)))
            })
        };
        let kind = match sc {
            12 => Kind::Storage,
            2 if buffer_block.contains(&inner) => Kind::Storage,
            2 => Kind::ReadOnly,
            0 => match image.get(&inner) {
                Some((_, 2)) => Kind::Storage,
                Some(_) => Kind::ReadOnly,
                None if sampled_image.contains(&inner) => Kind::ReadOnly,
                None => Kind::Other,
            },
            _ => continue,
        };
        vars.push(Var {
            id,
            set: *set,
            binding: *binding,
            kind,
            non_writable: non_writable.contains(&id) || all(&member_nw),
            non_readable: non_readable.contains(&id) || all(&member_nr),
            image: sc == 0,
        });
    }

    let mut out: Entries = HashMap::new();
    for (entry, name) in &entries {
        let uses = entry_uses(words, &functions, *entry, &vars, &non_semantic)?;
        let b = out.entry(name.clone()).or_default();
        for (k, v) in vars.iter().enumerate() {
            let Some(mut u) = uses.get(&k).copied() else {
                continue;
            };
            if untrackable && (u.read || u.write || u.unknown) {
                u.unknown = true;
            }
            let acc = match v.kind {
                Kind::Other => continue,
                Kind::ReadOnly => {
                    if u.read || u.write || u.unknown {
                        Some(Access::Read)
                    } else {
                        None
                    }
                }
                Kind::Storage => {
                    // A decoration the code contradicts is invalid SPIR-V: trust neither.
                    if (v.non_writable && u.write) || (v.non_readable && u.read) {
                        u.unknown = true;
                    }
                    u.access()
                }
            };
            if let Some(acc) = acc {
                b.entry((v.set, v.binding))
                    .and_modify(|a| {
                        if *a != acc {
                            *a = Access::ReadWrite
                        }
                    })
                    .or_insert(acc);
            }
        }
    }
    Some(out)
}

/// A literal string operand (nul-terminated, little-endian bytes in words).
fn string(w: &[u32]) -> String {
    let mut bytes = Vec::new();
    'outer: for x in w {
        for b in x.to_le_bytes() {
            if b == 0 {
                break 'outer;
            }
            bytes.push(b);
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The uses by one entry point: variable index → its use; absent: not referenced at all.
fn entry_uses(
    words: &[u32],
    functions: &HashMap<u32, Function>,
    entry: u32,
    vars: &[Var],
    non_semantic: &HashSet<u32>,
) -> Option<HashMap<usize, Use>> {
    // Functions reachable from the entry point.
    let mut reach: Vec<u32> = vec![entry];
    let mut seen: HashSet<u32> = HashSet::from([entry]);
    let mut k = 0;
    while k < reach.len() {
        let f = functions.get(&reach[k])?;
        for &(s, n) in &f.body {
            if words[s] & 0xffff == 57 && n > 3 && seen.insert(words[s + 3]) {
                reach.push(words[s + 3]);
            }
        }
        k += 1;
    }
    // id → the variables it may point to (a pointer) or be the handle of (an image).
    let mut ptr: HashMap<u32, Vec<usize>> = HashMap::new();
    let mut img: HashMap<u32, Vec<usize>> = HashMap::new();
    for (k, v) in vars.iter().enumerate() {
        ptr.insert(v.id, vec![k]);
    }
    let mut uses: HashMap<usize, Use> = HashMap::new();
    // Iterate to a fixed point: a phi or a call can name a pointer defined later.
    for _round in 0..64 {
        let mut changed = false;
        for f in &reach {
            for &(s, n) in &functions[f].body {
                let w = &words[s..s + n];
                let mut acts: Vec<Act> = Vec::new();
                step(w, &ptr, &img, vars, functions, non_semantic, &mut acts);
                for a in acts {
                    match a {
                        Act::Use(vs, r, wr, unk) => {
                            for v in vs {
                                let u = uses.entry(v).or_default();
                                u.read |= r;
                                u.write |= wr;
                                u.unknown |= unk;
                            }
                        }
                        Act::Ptr(id, vs) => changed |= add(&mut ptr, id, &vs),
                        Act::Img(id, vs) => changed |= add(&mut img, id, &vs),
                    }
                }
            }
        }
        if !changed {
            return Some(uses);
        }
    }
    // No fixed point (cannot happen for finite sets): everything referenced is read-write.
    for u in uses.values_mut() {
        u.unknown = true;
    }
    Some(uses)
}

fn add(m: &mut HashMap<u32, Vec<usize>>, id: u32, from: &[usize]) -> bool {
    let e = m.entry(id).or_default();
    let mut changed = false;
    for x in from {
        if !e.contains(x) {
            e.push(*x);
            changed = true;
        }
    }
    changed
}

/// What one instruction does: a use of variables, or a new id that points to / is the handle
/// of them.
enum Act {
    Use(Vec<usize>, bool, bool, bool),
    Ptr(u32, Vec<usize>),
    Img(u32, Vec<usize>),
}

/// The effects of one instruction `w` given the followed ids.
fn step(
    w: &[u32],
    ptr: &HashMap<u32, Vec<usize>>,
    img: &HashMap<u32, Vec<usize>>,
    vars: &[Var],
    functions: &HashMap<u32, Function>,
    non_semantic: &HashSet<u32>,
    acts: &mut Vec<Act>,
) {
    let n = w.len();
    let op = w[0] & 0xffff;
    let p = |k: usize| w.get(k).and_then(|id| ptr.get(id)).cloned();
    let h = |k: usize| w.get(k).and_then(|id| img.get(id)).cloned();
    let read = |vs: Vec<usize>| Act::Use(vs, true, false, false);
    let write = |vs: Vec<usize>| Act::Use(vs, false, true, false);
    // Followed ids in operand positions [from, to): a use not understood.
    let rest = |from: usize, to: usize, acts: &mut Vec<Act>| {
        for id in w.iter().take(to.min(n)).skip(from) {
            for m in [ptr, img] {
                if let Some(vs) = m.get(id) {
                    acts.push(Act::Use(vs.clone(), false, false, true));
                }
            }
        }
    };
    match op {
        // OpLoad type id pointer [memory operands]
        61 => {
            if let Some(vs) = p(3) {
                let (handles, mem): (Vec<usize>, Vec<usize>) =
                    vs.into_iter().partition(|v| vars[*v].image);
                if !handles.is_empty() {
                    // Loading a handle is no access of the memory behind it: follow it.
                    acts.push(Act::Use(handles.clone(), false, false, false));
                    acts.push(Act::Img(w[2], handles));
                }
                if !mem.is_empty() {
                    acts.push(read(mem));
                }
            }
        }
        // OpStore pointer object [memory operands]
        62 => {
            if let Some(vs) = p(1) {
                acts.push(write(vs));
            }
            rest(2, 3, acts);
        }
        // OpCopyMemory target source …; OpCopyMemorySized target source size …
        63 | 64 => {
            if let Some(vs) = p(1) {
                acts.push(write(vs));
            }
            if let Some(vs) = p(2) {
                acts.push(read(vs));
            }
            if op == 64 {
                rest(3, 4, acts);
            }
        }
        // OpAccessChain, OpInBoundsAccessChain, OpPtrAccessChain, OpInBoundsPtrAccessChain:
        // type id base (element) indexes…
        65 | 66 | 67 | 70 => {
            if let Some(vs) = p(3) {
                acts.push(Act::Ptr(w[2], vs));
            }
            rest(4, n, acts);
        }
        // OpCopyObject type id operand
        83 => {
            if let Some(vs) = p(3) {
                acts.push(Act::Ptr(w[2], vs));
            }
            if let Some(vs) = h(3) {
                acts.push(Act::Img(w[2], vs));
            }
        }
        // OpSelect type id condition a b; OpPhi type id (value parent)…
        169 | 245 => {
            let ks: Vec<usize> = if op == 169 {
                rest(3, 4, acts);
                vec![4, 5]
            } else {
                (3..n).step_by(2).collect()
            };
            for k in ks {
                if let Some(vs) = p(k) {
                    acts.push(Act::Ptr(w[2], vs));
                }
                if let Some(vs) = h(k) {
                    acts.push(Act::Img(w[2], vs));
                }
            }
        }
        // OpFunctionCall type id function args…: the callee's parameters point there too.
        57 => {
            let callee = w.get(3).and_then(|f| functions.get(f));
            for k in 4..n {
                let (a, b) = (p(k), h(k));
                match callee.and_then(|c| c.params.get(k - 4)) {
                    Some(param) => {
                        if let Some(vs) = a {
                            acts.push(Act::Ptr(*param, vs));
                        }
                        if let Some(vs) = b {
                            acts.push(Act::Img(*param, vs));
                        }
                    }
                    None => rest(k, k + 1, acts),
                }
            }
        }
        // OpAtomicLoad type id pointer scope semantics
        227 => {
            if let Some(vs) = p(3) {
                acts.push(read(vs));
            }
            rest(4, n, acts);
        }
        // OpAtomicStore pointer scope semantics value; OpAtomicFlagClear pointer scope semantics
        228 | 319 => {
            if let Some(vs) = p(1) {
                acts.push(write(vs));
            }
            rest(2, n, acts);
        }
        // The read-modify-write atomics (exchange, compare-exchange, increments, arithmetic,
        // flag test-and-set, the float extensions): type id pointer …
        229..=242 | 318 | 5614 | 5615 | 6035 => {
            if let Some(vs) = p(3) {
                acts.push(Act::Use(vs, true, true, false));
            }
            rest(4, n, acts);
        }
        // OpArrayLength type id structure member: a reference, no access.
        68 => {
            if let Some(vs) = p(3) {
                acts.push(Act::Use(vs, false, false, false));
            }
        }
        // OpImageTexelPointer type id image-pointer coordinate sample: a pointer into it.
        60 => {
            if let Some(vs) = p(3) {
                acts.push(Act::Ptr(w[2], vs));
            }
            rest(4, n, acts);
        }
        // OpSampledImage type id image sampler; OpImage type id sampled-image
        86 | 100 => {
            for k in [3, 4].into_iter().take(if op == 86 { 2 } else { 1 }) {
                if let Some(vs) = h(k) {
                    acts.push(Act::Img(w[2], vs));
                }
            }
        }
        // Sampling, gathers, fetches, OpImageRead and their sparse forms: type id image …
        // (the rest are values and literal image operands).
        87..=98 | 305..=315 | 320 => {
            if let Some(vs) = h(3) {
                acts.push(read(vs));
            }
        }
        // OpImageWrite image coordinate texel [image operands]
        99 => {
            if let Some(vs) = h(1) {
                acts.push(write(vs));
            }
        }
        // Image queries: neither.
        103..=107 => {}
        // OpExtInst type id set instruction operands…: non-semantic sets (debug info) have no
        // effect; any other with a followed operand is not understood.
        12 => {
            if n > 3 && !non_semantic.contains(&w[3]) {
                rest(5, n, acts);
            }
        }
        // Instructions with literal operands where a followed id cannot validly appear:
        // OpCompositeExtract type id composite literals…
        81 => rest(3, 4, acts),
        // OpCompositeInsert type id object composite literals…; OpVectorShuffle type id a b …
        79 | 82 => rest(3, 5, acts),
        // OpLine, OpNoLine, OpLabel, merges, branches, switch, kill, return, unreachable,
        // terminate: no memory access (a pointer can be neither a condition nor a selector).
        8 | 317 | 246..=253 | 255 | 4416 => {}
        // OpVariable in a function: type id class [initializer]
        59 => rest(4, 5, acts),
        // Anything else that names a followed id (OpReturnValue, OpConvertPtrToU, OpStore of a
        // pointer as a value, an extension's opcode …): not understood, read-write.
        _ => rest(1, n, acts),
    }
}

#[cfg(test)]
mod tests {
    //! Every rule on hand-written SPIR-V (`spirv-as`), on glslang's output for GLSL without
    //! `writeonly`, and on naga's for WGSL as wgpu 30 writes it (layer/testdata/naga). Where the
    //! answer must be conservative, the test says so. Tools missing: the test says so and
    //! passes (the same as the other glslang-based tests).
    use super::*;
    use crate::reflect::tests::compile_for;
    use Access::{Read as R, ReadWrite as RW, Write as W};

    fn words_of(bytes: &[u8]) -> Vec<u32> {
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    fn assemble(src: &str) -> Option<Vec<u32>> {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("echo-spvas-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let (s, o) = (
            dir.join(format!("{n}.spvasm")),
            dir.join(format!("{n}.spv")),
        );
        std::fs::write(&s, src).ok()?;
        let out = std::process::Command::new("spirv-as")
            .args(["--target-env", "spv1.3", "-o"])
            .arg(&o)
            .arg(&s)
            .output()
            .ok()?;
        assert!(
            out.status.success(),
            "spirv-as failed:\n{}\n{src}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(words_of(&std::fs::read(&o).ok()?))
    }

    /// A compute module with storage buffers `a` (0,0) and `b` (0,1) of `{uint n; float f[];}`,
    /// a storage texel buffer `t` (0,2), `%pa`/`%pb` pointing at `f[0]`, `%ua`/`%ub` at `n`.
    /// `caps`: extra capabilities; `decos`: extra decorations; `vars`: function variables;
    /// `body`: main's code; `funcs`: more functions; `other`: a second entry point's code.
    struct M<'a> {
        caps: &'a str,
        decos: &'a str,
        vars: &'a str,
        body: &'a str,
        funcs: &'a str,
        other: &'a str,
    }

    const M0: M<'static> = M {
        caps: "",
        decos: "",
        vars: "",
        body: "",
        funcs: "",
        other: "",
    };

    fn run(m: M) -> Option<Entries> {
        let src = format!(
            r#"OpCapability Shader
OpCapability ImageBuffer
{caps}
%glsl = OpExtInstImport "GLSL.std.450"
%ns = OpExtInstImport "NonSemantic.Echo.Test"
OpMemoryModel Logical GLSL450
OpEntryPoint GLCompute %main "main"
OpEntryPoint GLCompute %other "other"
OpExecutionMode %main LocalSize 1 1 1
OpExecutionMode %other LocalSize 1 1 1
OpDecorate %S Block
OpMemberDecorate %S 0 Offset 0
OpMemberDecorate %S 1 Offset 4
OpDecorate %farr ArrayStride 4
OpDecorate %a DescriptorSet 0
OpDecorate %a Binding 0
OpDecorate %b DescriptorSet 0
OpDecorate %b Binding 1
OpDecorate %t DescriptorSet 0
OpDecorate %t Binding 2
{decos}
%void = OpTypeVoid
%fn = OpTypeFunction %void
%uint = OpTypeInt 32 0
%float = OpTypeFloat 32
%farr = OpTypeRuntimeArray %float
%S = OpTypeStruct %uint %farr
%pS = OpTypePointer StorageBuffer %S
%pu = OpTypePointer StorageBuffer %uint
%pf = OpTypePointer StorageBuffer %float
%ppf = OpTypePointer Function %pf
%img = OpTypeImage %uint Buffer 0 0 0 2 R32ui
%pimg = OpTypePointer UniformConstant %img
%pti = OpTypePointer Image %uint
%v4u = OpTypeVector %uint 4
%a = OpVariable %pS StorageBuffer
%b = OpVariable %pS StorageBuffer
%t = OpVariable %pimg UniformConstant
%c0 = OpConstant %uint 0
%c1 = OpConstant %uint 1
%c4 = OpConstant %uint 4
%f1 = OpConstant %float 1
%u4 = OpConstantComposite %v4u %c1 %c1 %c1 %c1
%bool = OpTypeBool
%true = OpConstantTrue %bool
%fnpf = OpTypeFunction %void %pf
%fnrp = OpTypeFunction %pf
%main = OpFunction %void None %fn
%entry = OpLabel
{vars}
%pa = OpAccessChain %pf %a %c1 %c0
%pb = OpAccessChain %pf %b %c1 %c0
%ua = OpAccessChain %pu %a %c0
%ub = OpAccessChain %pu %b %c0
{body}
OpReturn
OpFunctionEnd
%other = OpFunction %void None %fn
%oentry = OpLabel
{other}
OpReturn
OpFunctionEnd
{funcs}
"#,
            caps = m.caps,
            decos = m.decos,
            vars = m.vars,
            body = m.body,
            funcs = m.funcs,
            other = m.other
        );
        let Some(words) = assemble(&src) else {
            eprintln!("note: spirv-as not available; test skipped");
            return None;
        };
        Some(analyze(&words).expect("a module"))
    }

    /// main's bindings as a sorted list.
    fn main_of(m: M) -> Option<Vec<((u32, u32), Access)>> {
        let r = run(m)?;
        let mut v: Vec<_> = r["main"].iter().map(|(k, a)| (*k, *a)).collect();
        v.sort_by_key(|x| x.0);
        Some(v)
    }

    macro_rules! check {
        ($m:expr, $want:expr) => {
            if let Some(got) = main_of($m) {
                let want: Vec<((u32, u32), Access)> = $want;
                assert_eq!(got, want);
            }
        };
    }

    #[test]
    fn loads_and_stores_through_access_chains() {
        check!(
            M {
                body: "%v = OpLoad %float %pa",
                ..M0
            },
            vec![((0, 0), R)]
        );
        check!(
            M {
                body: "OpStore %pb %f1",
                ..M0
            },
            vec![((0, 1), W)]
        );
        // Forming a pointer is no access.
        check!(M { body: "", ..M0 }, vec![]);
        check!(
            M {
                body: "%q = OpInBoundsAccessChain %pf %b %c1 %c0\n%r = OpCopyObject %pf %q\n\
                       OpStore %r %f1\n%v = OpLoad %uint %ua",
                ..M0
            },
            vec![((0, 0), R), ((0, 1), W)]
        );
        check!(
            M {
                caps: "OpCapability VariablePointersStorageBuffer",
                body: "%q = OpPtrAccessChain %pf %pb %c1\nOpStore %q %f1",
                ..M0
            },
            vec![((0, 1), W)]
        );
    }

    #[test]
    fn copies_read_the_source_and_write_the_target() {
        check!(
            M {
                body: "OpCopyMemory %pb %pa",
                ..M0
            },
            vec![((0, 0), R), ((0, 1), W)]
        );
        check!(
            M {
                body: "OpCopyMemorySized %pb %pa %c4",
                ..M0
            },
            vec![((0, 0), R), ((0, 1), W)]
        );
    }

    #[test]
    fn atomics() {
        check!(
            M {
                body:
                    "%x = OpAtomicIAdd %uint %ua %c1 %c0 %c1\n%y = OpAtomicLoad %uint %ub %c1 %c0",
                ..M0
            },
            vec![((0, 0), RW), ((0, 1), R)]
        );
        check!(
            M { body: "OpAtomicStore %ub %c1 %c0 %c1\n%x = OpAtomicCompareExchange %uint %ua %c1 %c0 %c0 %c1 %c0", ..M0 },
            vec![((0, 0), RW), ((0, 1), W)]
        );
        check!(
            M {
                body: "%x = OpAtomicExchange %uint %ua %c1 %c0 %c1",
                ..M0
            },
            vec![((0, 0), RW)]
        );
    }

    #[test]
    fn array_length_is_neither() {
        check!(
            M {
                body: "%n = OpArrayLength %uint %a 1\n%v = OpLoad %float %pb",
                ..M0
            },
            vec![((0, 1), R)]
        );
    }

    #[test]
    fn phi_and_select_merge_the_pointers() {
        let caps = "OpCapability VariablePointersStorageBuffer";
        check!(
            M {
                caps,
                body: "OpSelectionMerge %m None\nOpBranchConditional %true %l1 %l2\n\
                       %l1 = OpLabel\nOpBranch %m\n%l2 = OpLabel\nOpBranch %m\n\
                       %m = OpLabel\n%p = OpPhi %pf %pa %l1 %pb %l2\nOpStore %p %f1",
                ..M0
            },
            vec![((0, 0), W), ((0, 1), W)]
        );
        // A phi naming a pointer defined later (a loop's back edge): found at the fixed point.
        check!(
            M {
                caps,
                body: "OpBranch %h\n%h = OpLabel\n%p = OpPhi %pf %pa %entry %q %h\n\
                       %v = OpLoad %float %p\n%q = OpCopyObject %pf %pb\n\
                       OpLoopMerge %x %h None\nOpBranchConditional %true %h %x\n%x = OpLabel",
                ..M0
            },
            vec![((0, 0), R), ((0, 1), R)]
        );
        check!(
            M {
                caps,
                body: "%p = OpSelect %pf %true %pa %pb\n%v = OpLoad %float %p",
                ..M0
            },
            vec![((0, 0), R), ((0, 1), R)]
        );
    }

    const PUT: &str = "%put = OpFunction %void None %fnpf\n%x = OpFunctionParameter %pf\n\
        %pl = OpLabel\n%r = OpFunctionCall %void %put2 %x\nOpReturn\nOpFunctionEnd\n\
        %put2 = OpFunction %void None %fnpf\n%y = OpFunctionParameter %pf\n%pl2 = OpLabel\n\
        OpStore %y %f1\nOpReturn\nOpFunctionEnd\n\
        %get = OpFunction %void None %fnpf\n%z = OpFunctionParameter %pf\n%gl = OpLabel\n\
        %zv = OpLoad %float %z\nOpReturn\nOpFunctionEnd\n\
        %unreached = OpFunction %void None %fn\n%ul = OpLabel\n\
        %uq = OpAccessChain %pf %b %c1 %c0\nOpStore %uq %f1\nOpReturn\nOpFunctionEnd";

    #[test]
    fn calls_follow_pointer_parameters_transitively() {
        // put → put2 stores through its parameter: a write of a; b only in an unreached function.
        check!(
            M {
                body: "%c = OpFunctionCall %void %put %pa",
                funcs: PUT,
                ..M0
            },
            vec![((0, 0), W)]
        );
        // The same callee from two sites: each argument gets the callee's access.
        check!(
            M {
                body: "%c = OpFunctionCall %void %get %pa\n%d = OpFunctionCall %void %get %pb",
                funcs: PUT,
                ..M0
            },
            vec![((0, 0), R), ((0, 1), R)]
        );
        // Entry points are separate: "other" reaches only what it calls.
        if let Some(r) = run(M {
            body: "%c = OpFunctionCall %void %put %pa",
            other: "%oq = OpAccessChain %pf %a %c1 %c0\n%oc = OpFunctionCall %void %get %oq",
            funcs: PUT,
            ..M0
        }) {
            assert_eq!(r["main"].get(&(0, 0)), Some(&W));
            assert_eq!(r["other"].get(&(0, 0)), Some(&R));
            assert_eq!(r["other"].len(), 1);
        }
    }

    #[test]
    fn what_is_not_understood_is_read_write() {
        // A pointer converted to an integer (an opcode the analysis does not follow).
        check!(
            M {
                body: "%i = OpConvertPtrToU %uint %pa",
                ..M0
            },
            vec![((0, 0), RW)]
        );
        // A pointer stored into a variable and loaded back (variable pointers): conservative,
        // although the code only writes.
        check!(
            M {
                caps: "OpCapability VariablePointers",
                vars: "%fv = OpVariable %ppf Function",
                body: "OpStore %fv %pa\n%l = OpLoad %pf %fv\nOpStore %l %f1",
                ..M0
            },
            vec![((0, 0), RW)]
        );
        // A pointer returned from a function: conservative, although the caller only reads.
        check!(
            M {
                caps: "OpCapability VariablePointersStorageBuffer",
                body: "%p = OpFunctionCall %pf %ret\n%v = OpLoad %float %p",
                funcs: "%ret = OpFunction %pf None %fnrp\n%rl = OpLabel\n\
                        %rq = OpAccessChain %pf %a %c1 %c0\nOpReturnValue %rq\nOpFunctionEnd",
                ..M0
            },
            vec![((0, 0), RW)]
        );
        // OpExtInst with a pointer operand (modf writes through it): read-write; a
        // non-semantic instruction naming a pointer (debug info): no access.
        check!(
            M {
                body: "%m = OpExtInst %float %glsl Modf %f1 %pb\n%d = OpExtInst %void %ns 1 %pa",
                ..M0
            },
            vec![((0, 1), RW)]
        );
        // Physical storage buffer pointers can reach any buffer: every binding used is
        // read-write, even one the code only writes.
        check!(
            M {
                caps: "OpCapability PhysicalStorageBufferAddresses",
                body: "OpStore %pb %f1\n%v = OpLoad %float %pa",
                ..M0
            },
            vec![((0, 0), RW), ((0, 1), RW)]
        );
    }

    #[test]
    fn decorations_count_only_where_the_code_agrees() {
        check!(
            M {
                decos: "OpDecorate %a NonWritable",
                body: "%v = OpLoad %float %pa",
                ..M0
            },
            vec![((0, 0), R)]
        );
        check!(
            M {
                decos: "OpDecorate %b NonReadable",
                body: "OpStore %pb %f1",
                ..M0
            },
            vec![((0, 1), W)]
        );
        // Contradicted (invalid SPIR-V): trust neither.
        check!(
            M {
                decos: "OpDecorate %b NonWritable",
                body: "OpStore %pb %f1",
                ..M0
            },
            vec![((0, 1), RW)]
        );
        check!(
            M {
                decos: "OpMemberDecorate %S 0 NonReadable\nOpMemberDecorate %S 1 NonReadable",
                body: "%v = OpLoad %float %pa",
                ..M0
            },
            vec![((0, 0), RW)]
        );
    }

    #[test]
    fn texel_buffers_by_image_instruction() {
        check!(
            M {
                body: "%h = OpLoad %img %t\nOpImageWrite %h %c0 %u4",
                ..M0
            },
            vec![((0, 2), W)]
        );
        check!(
            M {
                body: "%h = OpLoad %img %t\n%r = OpImageRead %v4u %h %c0",
                ..M0
            },
            vec![((0, 2), R)]
        );
        check!(
            M {
                body: "%tp = OpImageTexelPointer %pti %t %c0 %c0\n%o = OpAtomicIAdd %uint %tp %c1 %c0 %c1",
                ..M0
            },
            vec![((0, 2), RW)]
        );
        // A handle passed somewhere not understood.
        check!(
            M {
                body: "%h = OpLoad %img %t\n%s = OpCopyObject %img %h\n%z = OpBitcast %uint %s",
                ..M0
            },
            vec![((0, 2), RW)]
        );
    }

    #[test]
    fn malformed_is_none() {
        assert!(analyze(&[0x0723_0203, 0x10000, 0, 5, 0, 0x0005_0000]).is_none());
        assert!(analyze(&[0x0723_0203, 0x10000, 0, 5, 0, 0]).is_none());
        assert!(analyze(&[1, 2, 3, 4, 5]).is_none());
    }

    /// glslang, GLSL without `writeonly` (issue 24's case 1): the result binding is a write.
    #[test]
    fn glslang_undecorated_write_only_binding() {
        let src = "#version 450\nlayout(local_size_x=64) in;\n\
             layout(std430, set=0, binding=0) buffer In { float a[]; };\n\
             layout(std430, set=0, binding=1) buffer Out { float o[]; };\n\
             layout(std430, set=0, binding=2) buffer Acc { float c[]; };\n\
             layout(std430, set=0, binding=3) buffer Len { float l[]; };\n\
             layout(std430, set=0, binding=4) buffer Cnt { uint n; };\n\
             void put(out float x, float v) { x = v; }\n\
             void bump(inout float x) { x += 1.0; }\n\
             void main() { uint i = gl_GlobalInvocationID.x;\n\
               put(o[i], a[i] * float(l.length()));\n\
               bump(c[i]);\n\
               atomicAdd(n, 1u); }\n";
        for env in ["vulkan1.0", "vulkan1.1", "vulkan1.3"] {
            let Some(words) = compile_for(src, env) else {
                eprintln!("note: glslangValidator not available; test skipped");
                return;
            };
            let m = analyze(&words).expect("a module");
            let e = &m["main"];
            assert_eq!(e.get(&(0, 0)), Some(&R), "{env}");
            assert_eq!(e.get(&(0, 1)), Some(&W), "{env}: o is only written");
            assert_eq!(e.get(&(0, 2)), Some(&RW), "{env}");
            assert_eq!(e.get(&(0, 3)), None, "{env}: only its length");
            assert_eq!(e.get(&(0, 4)), Some(&RW), "{env}");
        }
    }

    /// naga 30, WGSL as wgpu writes it (bounds checks `Restrict`: `OpArrayLength` and `UMin`
    /// on every index), SPIR-V 1.3 and 1.6.
    #[test]
    fn naga_wgsl() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/naga");
        for v in ["", "-spv16"] {
            let load = |n: &str| {
                let w = words_of(&std::fs::read(dir.join(format!("{n}{v}.spv"))).unwrap());
                analyze(&w).expect("a module")
            };
            let d = load("download");
            let mut got: Vec<_> = d["main"].iter().map(|(k, a)| (*k, *a)).collect();
            got.sort_by_key(|x| x.0);
            assert_eq!(got, vec![((0, 0), R), ((0, 1), W)], "download{v}");
            let a = load("accumulate");
            let mut got: Vec<_> = a["main"].iter().map(|(k, a)| (*k, *a)).collect();
            got.sort_by_key(|x| x.0);
            assert_eq!(
                got,
                vec![((0, 0), R), ((0, 1), RW), ((0, 2), W), ((1, 0), RW)],
                "accumulate{v}"
            );
        }
    }
}
