//! Shader access by instruction (issue 24, DESIGN §4): for every entry point of a SPIR-V module
//! and every descriptor binding it uses, whether its code really loads from it, stores to it, or
//! both. Generated SPIR-V (naga, Python frameworks) and most GLSL never say `writeonly`, so the
//! `NonReadable`/`NonWritable` decorations alone would count every storage buffer as read.
//!
//! The words are parsed by `rspirv` (issue 34): its binary parser decodes every instruction by
//! the SPIR-V grammar into a `dr::Module` (opcodes as `spirv::Op`, operands typed: ids,
//! literals, enumerants), and the analysis below reads that module; no opcode number is written
//! here. rspirv's own loader (`dr::load_words`) refuses two placements valid SPIR-V uses, so
//! [`load`] hands it everything else and files those itself: `OpExecutionModeId` (glslang writes
//! it for `local_size_x_id` from Vulkan 1.2 on) and `OpExtInst` (or
//! `OpExtInstWithForwardRefsKHR`) outside a block (the `NonSemantic.Shader.DebugInfo.100`
//! instructions of `glslangValidator -gV`).
//!
//! Per entry point, only the functions reachable from it through `OpFunctionCall` are looked
//! at. A pointer to a descriptor variable is followed through `OpAccessChain`,
//! `OpInBoundsAccessChain`, `OpPtrAccessChain`, `OpInBoundsPtrAccessChain`, `OpCopyObject`,
//! `OpPhi`, `OpSelect`, `OpImageTexelPointer` and into a callee's `OpFunctionParameter` (to a
//! fixed point, so through any depth of calls); an image or texel-buffer handle loaded from one
//! is followed too. Then:
//!
//! - `OpLoad`, `OpAtomicLoad`, the source of `OpCopyMemory[Sized]`, `OpImageRead`,
//!   `OpImageFetch`, sampling and gathering: a read;
//! - `OpStore`, `OpAtomicStore`, `OpAtomicFlagClear`, the target of `OpCopyMemory[Sized]`,
//!   `OpImageWrite`: a write;
//! - every other `OpAtomic*`: both;
//! - `OpArrayLength`, image queries, debug instructions (`OpLine`, `OpName`, non-semantic
//!   `OpExtInst`): neither (a binding only these touch is no use of its memory);
//! - anything else that names a followed id (a pointer stored as a value, returned, converted
//!   to an integer, passed to an opcode not listed here or to a semantic `OpExtInst`):
//!   read-write.
//!
//! Whole modules are read-write for every binding they use when the code may form pointers the
//! analysis cannot follow: the `PhysicalStorageBufferAddresses` or `Addresses` capabilities, or
//! `OpTypeForwardPointer`. `VariablePointers[StorageBuffer]` is followed, not refused: in the
//! logical addressing model it is what makes a pointer `OpPhi`/`OpSelect`/`OpPtrAccessChain`
//! valid at all, and every other way it lets a pointer travel (stored into a variable, an
//! initializer, returned from a function, loaded back) first names the followed pointer in an
//! instruction listed as not understood above, so the binding is read-write there. Decorations
//! only count where they contradict the code (a `NonWritable` binding that is stored to is
//! invalid SPIR-V): then the binding is read-write. Anything rspirv cannot parse (malformed
//! words, an opcode or enumerant newer than its grammar, SPIR-V 1.4.341) is `None`: the caller
//! is conservative.

use echo_analyzer::trace::Access;
use rspirv::binary::{self, Consumer, ParseAction};
use rspirv::dr::{self, Instruction, Operand};
use rspirv::grammar::OperandKind;
use rspirv::spirv::{Capability, Decoration, Op, StorageClass, Word};
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
    id: Word,
    set: u32,
    binding: u32,
    kind: Kind,
    non_writable: bool,
    non_readable: bool,
    /// An image or texel buffer (UniformConstant): loaded as a handle.
    image: bool,
}

/// One function of the module: its parameters and the instructions of its blocks.
struct Function<'m> {
    params: Vec<Word>,
    body: Vec<&'m Instruction>,
}

/// `OpTypeImage`'s *Sampled* operand for an image used without a sampler (a storage image or
/// storage texel buffer); 1 is sampled, 0 known only at run time.
const IMAGE_SAMPLED_STORAGE: u32 = 2;

/// Entry point name → `(set, binding)` → access.
pub type Entries = HashMap<String, HashMap<(u32, u32), Access>>;

/// Words in the module header (magic, version, generator, bound, schema).
const HEADER_WORDS: usize = 5;
/// An instruction's first word: its word count in the high half, the opcode in the low.
const WORD_COUNT_SHIFT: u32 = 16;
const OPCODE_MASK: u32 = 0xffff;

/// rspirv's `dr::Loader`, with the two valid placements it refuses filed here (module docs).
struct Loader {
    inner: dr::Loader,
    in_block: bool,
    execution_modes: Vec<Instruction>,
    global_ext_insts: Vec<Instruction>,
}

impl Consumer for Loader {
    fn initialize(&mut self) -> ParseAction {
        self.inner.initialize()
    }
    fn finalize(&mut self) -> ParseAction {
        self.inner.finalize()
    }
    fn consume_header(&mut self, header: dr::ModuleHeader) -> ParseAction {
        self.inner.consume_header(header)
    }
    fn consume_instruction(&mut self, inst: Instruction) -> ParseAction {
        let op = inst.class.opcode;
        match op {
            Op::ExecutionModeId => {
                self.execution_modes.push(inst);
                return ParseAction::Continue;
            }
            Op::ExtInst | Op::ExtInstWithForwardRefsKHR if !self.in_block => {
                self.global_ext_insts.push(inst);
                return ParseAction::Continue;
            }
            Op::Label => self.in_block = true,
            _ if rspirv::grammar::reflect::is_block_terminator(op) => self.in_block = false,
            _ => {}
        }
        self.inner.consume_instruction(inst)
    }
}

/// The module in `words`, parsed by rspirv; `None` where it cannot be.
pub fn load(words: &[u32]) -> Option<dr::Module> {
    if words.first() != Some(&rspirv::spirv::MAGIC_NUMBER) {
        return None;
    }
    // rspirv's decoder trusts an instruction's word count when it reads a literal string
    // (`Decoder::string` slices `offset + count * 4` bytes unchecked): a count past the end of
    // the words panics there (rspirv 0.12 and 0.13; found by spirv_access_never_panics).
    // Every count is checked against the words first: 0, or past the end, is no module.
    // Its operand parser also panics (`panic!()`) on an `OpSpecConstantOp` whose embedded
    // opcode has a literal that depends on a type or a pair list (`OpConstant`,
    // `OpSpecConstant`, `OpSpecConstantOp`, `OpSwitch`: never valid there; found by the fuzz
    // target): such a module is none either, by rspirv's own grammar table.
    let mut at = HEADER_WORDS;
    while at < words.len() {
        let count = (words[at] >> WORD_COUNT_SHIFT) as usize;
        if count == 0 || at + count > words.len() {
            return None;
        }
        if words[at] & OPCODE_MASK == Op::SpecConstantOp as u32 && count > 3 {
            let g = rspirv::grammar::INSTRUCTION_TABLE.lookup_opcode(words[at + 3])?;
            if g.operands.iter().any(|o| {
                matches!(
                    o.kind,
                    OperandKind::LiteralContextDependentNumber
                        | OperandKind::LiteralSpecConstantOpInteger
                        | OperandKind::PairLiteralIntegerIdRef
                )
            }) {
                return None;
            }
        }
        at += count;
    }
    let mut l = Loader {
        inner: dr::Loader::new(),
        in_block: false,
        execution_modes: Vec::new(),
        global_ext_insts: Vec::new(),
    };
    binary::parse_words(words, &mut l).ok()?;
    let mut m = l.inner.module();
    m.execution_modes.append(&mut l.execution_modes);
    m.types_global_values.append(&mut l.global_ext_insts);
    Some(m)
}

/// Operand `k` as an id (`IdRef`, `IdScope`, `IdMemorySemantics`).
fn id(i: &Instruction, k: usize) -> Option<Word> {
    i.operands.get(k).and_then(Operand::id_ref_any)
}

fn lit(i: &Instruction, k: usize) -> Option<u32> {
    match i.operands.get(k) {
        Some(Operand::LiteralBit32(x)) => Some(*x),
        _ => None,
    }
}

fn string(i: &Instruction, k: usize) -> Option<&str> {
    match i.operands.get(k) {
        Some(Operand::LiteralString(s)) => Some(s),
        _ => None,
    }
}

/// Analyse a module: entry point name → `(set, binding)` → access. Bindings whose memory the
/// entry point neither reads nor writes are absent. `None` when the words are not a module
/// rspirv can parse.
pub fn analyze(words: &[u32]) -> Option<Entries> {
    analyze_module(&load(words)?)
}

/// [`analyze`] on a parsed module.
pub fn analyze_module(m: &dr::Module) -> Option<Entries> {
    let mut untrackable = m.capabilities.iter().any(|c| {
        matches!(
            c.operands.first(),
            Some(Operand::Capability(
                Capability::Addresses | Capability::PhysicalStorageBufferAddresses
            ))
        )
    });
    let non_semantic: HashSet<Word> = m
        .ext_inst_imports
        .iter()
        .filter(|i| string(i, 0).is_some_and(|s| s.starts_with("NonSemantic.")))
        .filter_map(|i| i.result_id)
        .collect();
    let entries: Vec<(Word, &str)> = m
        .entry_points
        .iter()
        .filter_map(|i| Some((id(i, 1)?, string(i, 2)?)))
        .collect();

    let mut set_of: HashMap<Word, u32> = HashMap::new();
    let mut binding_of: HashMap<Word, u32> = HashMap::new();
    let mut non_writable: HashSet<Word> = HashSet::new();
    let mut non_readable: HashSet<Word> = HashSet::new();
    // struct id → members with NonWritable / NonReadable, and its member count.
    let mut member_nw: HashMap<Word, HashSet<u32>> = HashMap::new();
    let mut member_nr: HashMap<Word, HashSet<u32>> = HashMap::new();
    let mut buffer_block: HashSet<Word> = HashSet::new();
    for a in &m.annotations {
        match a.class.opcode {
            Op::Decorate => {
                let (Some(t), Some(Operand::Decoration(d))) = (id(a, 0), a.operands.get(1)) else {
                    continue;
                };
                match d {
                    Decoration::BufferBlock => {
                        buffer_block.insert(t);
                    }
                    Decoration::NonWritable => {
                        non_writable.insert(t);
                    }
                    Decoration::NonReadable => {
                        non_readable.insert(t);
                    }
                    Decoration::Binding => {
                        binding_of.insert(t, lit(a, 2)?);
                    }
                    Decoration::DescriptorSet => {
                        set_of.insert(t, lit(a, 2)?);
                    }
                    _ => {}
                }
            }
            Op::MemberDecorate => {
                let (Some(t), Some(k), Some(Operand::Decoration(d))) =
                    (id(a, 0), lit(a, 1), a.operands.get(2))
                else {
                    continue;
                };
                match d {
                    Decoration::NonWritable => {
                        member_nw.entry(t).or_default().insert(k);
                    }
                    Decoration::NonReadable => {
                        member_nr.entry(t).or_default().insert(k);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    let mut members: HashMap<Word, u32> = HashMap::new();
    let mut pointer: HashMap<Word, (StorageClass, Word)> = HashMap::new();
    let mut array_of: HashMap<Word, Word> = HashMap::new();
    let mut storage_image: HashMap<Word, bool> = HashMap::new(); // id → a storage image
    let mut sampled_image: HashSet<Word> = HashSet::new();
    let mut globals: Vec<(Word, Word, StorageClass)> = Vec::new(); // (id, pointer type, class)
    for i in &m.types_global_values {
        let Some(rid) = i.result_id else {
            if i.class.opcode == Op::TypeForwardPointer {
                // Only with physical addressing.
                untrackable = true;
            }
            continue;
        };
        match i.class.opcode {
            // OpTypeImage sampled-type dim depth arrayed ms sampled format [access]
            Op::TypeImage => {
                if let Some(s) = lit(i, 5) {
                    storage_image.insert(rid, s == IMAGE_SAMPLED_STORAGE);
                }
            }
            Op::TypeSampledImage => {
                sampled_image.insert(rid);
            }
            Op::TypeArray | Op::TypeRuntimeArray => {
                if let Some(e) = id(i, 0) {
                    array_of.insert(rid, e);
                }
            }
            Op::TypeStruct => {
                members.insert(rid, i.operands.len() as u32);
            }
            Op::TypePointer => {
                if let (Some(Operand::StorageClass(sc)), Some(t)) = (i.operands.first(), id(i, 1)) {
                    pointer.insert(rid, (*sc, t));
                }
            }
            Op::Variable => {
                if let (Some(t), Some(Operand::StorageClass(sc))) =
                    (i.result_type, i.operands.first())
                {
                    globals.push((rid, t, *sc));
                }
            }
            _ => {}
        }
    }

    let mut functions: HashMap<Word, Function> = HashMap::new();
    for f in &m.functions {
        let fid = f.def.as_ref().and_then(|d| d.result_id)?;
        let params = f
            .parameters
            .iter()
            .map(|p| p.result_id)
            .collect::<Option<Vec<Word>>>()?;
        let body = f.blocks.iter().flat_map(|b| &b.instructions).collect();
        functions.insert(fid, Function { params, body });
    }

    // The descriptor variables and their kinds.
    let strip = |mut t: Word| {
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
        let all = |m: &HashMap<Word, HashSet<u32>>| {
            members.get(&inner).is_some_and(|n| {
                *n > 0
                    && m.get(&inner)
                        .is_some_and(|s| (0..*n).all(|k| s.contains(&k)))
            })
        };
        let kind = match sc {
            StorageClass::StorageBuffer => Kind::Storage,
            StorageClass::Uniform if buffer_block.contains(&inner) => Kind::Storage,
            StorageClass::Uniform => Kind::ReadOnly,
            StorageClass::UniformConstant => match storage_image.get(&inner) {
                Some(true) => Kind::Storage,
                Some(false) => Kind::ReadOnly,
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
            image: sc == StorageClass::UniformConstant,
        });
    }

    let mut out: Entries = HashMap::new();
    for (entry, name) in &entries {
        let uses = entry_uses(&functions, *entry, &vars, &non_semantic)?;
        let b = out.entry((*name).to_owned()).or_default();
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

/// The uses by one entry point: variable index → its use; absent: not referenced at all.
fn entry_uses(
    functions: &HashMap<Word, Function>,
    entry: Word,
    vars: &[Var],
    non_semantic: &HashSet<Word>,
) -> Option<HashMap<usize, Use>> {
    // Functions reachable from the entry point.
    let mut reach: Vec<Word> = vec![entry];
    let mut seen: HashSet<Word> = HashSet::from([entry]);
    let mut k = 0;
    while k < reach.len() {
        let f = functions.get(&reach[k])?;
        for i in &f.body {
            if i.class.opcode == Op::FunctionCall {
                if let Some(callee) = id(i, 0) {
                    if seen.insert(callee) {
                        reach.push(callee);
                    }
                }
            }
        }
        k += 1;
    }
    // id → the variables it may point to (a pointer) or be the handle of (an image).
    let mut ptr: HashMap<Word, Vec<usize>> = HashMap::new();
    let mut img: HashMap<Word, Vec<usize>> = HashMap::new();
    for (k, v) in vars.iter().enumerate() {
        ptr.insert(v.id, vec![k]);
    }
    let mut uses: HashMap<usize, Use> = HashMap::new();
    let mut acts: Vec<Act> = Vec::new();
    // Iterate to a fixed point: a phi or a call can name a pointer defined later.
    for _round in 0..64 {
        let mut changed = false;
        for f in &reach {
            for i in &functions[f].body {
                step(i, &ptr, &img, vars, functions, non_semantic, &mut acts);
                for a in acts.drain(..) {
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

fn add(m: &mut HashMap<Word, Vec<usize>>, id: Word, from: &[usize]) -> bool {
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
    Ptr(Word, Vec<usize>),
    Img(Word, Vec<usize>),
}

/// The effects of one instruction `i` given the followed ids. Operand `k` is the `k`-th after
/// the result type and result id (rspirv keeps those apart).
fn step(
    i: &Instruction,
    ptr: &HashMap<Word, Vec<usize>>,
    img: &HashMap<Word, Vec<usize>>,
    vars: &[Var],
    functions: &HashMap<Word, Function>,
    non_semantic: &HashSet<Word>,
    acts: &mut Vec<Act>,
) {
    let n = i.operands.len();
    let op = i.class.opcode;
    let p = |k: usize| id(i, k).and_then(|x| ptr.get(&x)).cloned();
    let h = |k: usize| id(i, k).and_then(|x| img.get(&x)).cloned();
    let read = |vs: Vec<usize>| Act::Use(vs, true, false, false);
    let write = |vs: Vec<usize>| Act::Use(vs, false, true, false);
    let named = |x: Word, acts: &mut Vec<Act>| {
        for m in [ptr, img] {
            if let Some(vs) = m.get(&x) {
                acts.push(Act::Use(vs.clone(), false, false, true));
            }
        }
    };
    // Followed ids among operands [from, to): a use not understood.
    let rest = |from: usize, to: usize, acts: &mut Vec<Act>| {
        for o in i.operands.iter().take(to.min(n)).skip(from) {
            if let Some(x) = o.id_ref_any() {
                named(x, acts);
            }
        }
    };
    // The result id: every instruction below that forms one has it by the grammar (0, never an
    // id, where a malformed one could not).
    let result = i.result_id.unwrap_or(0);
    match op {
        // OpLoad pointer [memory operands]
        Op::Load => {
            if let Some(vs) = p(0) {
                let (handles, mem): (Vec<usize>, Vec<usize>) =
                    vs.into_iter().partition(|v| vars[*v].image);
                if !handles.is_empty() {
                    // Loading a handle is no access of the memory behind it: follow it.
                    acts.push(Act::Use(handles.clone(), false, false, false));
                    acts.push(Act::Img(result, handles));
                }
                if !mem.is_empty() {
                    acts.push(read(mem));
                }
            }
        }
        // OpStore pointer object [memory operands]
        Op::Store => {
            if let Some(vs) = p(0) {
                acts.push(write(vs));
            }
            rest(1, 2, acts);
        }
        // OpCopyMemory target source …; OpCopyMemorySized target source size …
        Op::CopyMemory | Op::CopyMemorySized => {
            if let Some(vs) = p(0) {
                acts.push(write(vs));
            }
            if let Some(vs) = p(1) {
                acts.push(read(vs));
            }
            if op == Op::CopyMemorySized {
                rest(2, 3, acts);
            }
        }
        // base (element) indexes…
        Op::AccessChain
        | Op::InBoundsAccessChain
        | Op::PtrAccessChain
        | Op::InBoundsPtrAccessChain => {
            if let Some(vs) = p(0) {
                acts.push(Act::Ptr(result, vs));
            }
            rest(1, n, acts);
        }
        // OpCopyObject operand
        Op::CopyObject => {
            if let Some(vs) = p(0) {
                acts.push(Act::Ptr(result, vs));
            }
            if let Some(vs) = h(0) {
                acts.push(Act::Img(result, vs));
            }
        }
        // OpSelect condition a b; OpPhi (value parent)…
        Op::Select | Op::Phi => {
            let ks: Vec<usize> = if op == Op::Select {
                rest(0, 1, acts);
                vec![1, 2]
            } else {
                (0..n).step_by(2).collect()
            };
            for k in ks {
                if let Some(vs) = p(k) {
                    acts.push(Act::Ptr(result, vs));
                }
                if let Some(vs) = h(k) {
                    acts.push(Act::Img(result, vs));
                }
            }
        }
        // OpFunctionCall function args…: the callee's parameters point there too.
        Op::FunctionCall => {
            let callee = id(i, 0).and_then(|f| functions.get(&f));
            for k in 1..n {
                let (a, b) = (p(k), h(k));
                match callee.and_then(|c| c.params.get(k - 1)) {
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
        // OpAtomicLoad pointer scope semantics
        Op::AtomicLoad => {
            if let Some(vs) = p(0) {
                acts.push(read(vs));
            }
            rest(1, n, acts);
        }
        // OpAtomicStore pointer scope semantics value; OpAtomicFlagClear pointer scope semantics
        Op::AtomicStore | Op::AtomicFlagClear => {
            if let Some(vs) = p(0) {
                acts.push(write(vs));
            }
            rest(1, n, acts);
        }
        // The read-modify-write atomics (exchange, compare-exchange, increments, arithmetic,
        // flag test-and-set, the float extensions): pointer …
        Op::AtomicExchange
        | Op::AtomicCompareExchange
        | Op::AtomicCompareExchangeWeak
        | Op::AtomicIIncrement
        | Op::AtomicIDecrement
        | Op::AtomicIAdd
        | Op::AtomicISub
        | Op::AtomicSMin
        | Op::AtomicUMin
        | Op::AtomicSMax
        | Op::AtomicUMax
        | Op::AtomicAnd
        | Op::AtomicOr
        | Op::AtomicXor
        | Op::AtomicFlagTestAndSet
        | Op::AtomicFMinEXT
        | Op::AtomicFMaxEXT
        | Op::AtomicFAddEXT => {
            if let Some(vs) = p(0) {
                acts.push(Act::Use(vs, true, true, false));
            }
            rest(1, n, acts);
        }
        // OpArrayLength structure member: a reference, no access.
        Op::ArrayLength => {
            if let Some(vs) = p(0) {
                acts.push(Act::Use(vs, false, false, false));
            }
        }
        // OpImageTexelPointer image-pointer coordinate sample: a pointer into it.
        Op::ImageTexelPointer => {
            if let Some(vs) = p(0) {
                acts.push(Act::Ptr(result, vs));
            }
            rest(1, n, acts);
        }
        // OpSampledImage image sampler; OpImage sampled-image
        Op::SampledImage | Op::Image => {
            let k = if op == Op::SampledImage { 2 } else { 1 };
            for k in 0..k {
                if let Some(vs) = h(k) {
                    acts.push(Act::Img(result, vs));
                }
            }
        }
        // Sampling, gathers, fetches, OpImageRead and their sparse forms: image … (the rest
        // are values and image operands).
        Op::ImageSampleImplicitLod
        | Op::ImageSampleExplicitLod
        | Op::ImageSampleDrefImplicitLod
        | Op::ImageSampleDrefExplicitLod
        | Op::ImageSampleProjImplicitLod
        | Op::ImageSampleProjExplicitLod
        | Op::ImageSampleProjDrefImplicitLod
        | Op::ImageSampleProjDrefExplicitLod
        | Op::ImageFetch
        | Op::ImageGather
        | Op::ImageDrefGather
        | Op::ImageRead
        | Op::ImageSparseSampleImplicitLod
        | Op::ImageSparseSampleExplicitLod
        | Op::ImageSparseSampleDrefImplicitLod
        | Op::ImageSparseSampleDrefExplicitLod
        | Op::ImageSparseSampleProjImplicitLod
        | Op::ImageSparseSampleProjExplicitLod
        | Op::ImageSparseSampleProjDrefImplicitLod
        | Op::ImageSparseSampleProjDrefExplicitLod
        | Op::ImageSparseFetch
        | Op::ImageSparseGather
        | Op::ImageSparseDrefGather
        | Op::ImageSparseRead => {
            if let Some(vs) = h(0) {
                acts.push(read(vs));
            }
        }
        // OpImageWrite image coordinate texel [image operands]
        Op::ImageWrite => {
            if let Some(vs) = h(0) {
                acts.push(write(vs));
            }
        }
        // Image queries: neither.
        Op::ImageQuerySizeLod
        | Op::ImageQuerySize
        | Op::ImageQueryLod
        | Op::ImageQueryLevels
        | Op::ImageQuerySamples => {}
        // OpExtInst set instruction operands…: non-semantic sets (debug info) have no effect;
        // any other with a followed operand is not understood. (OpExtInstWithForwardRefsKHR,
        // SPV_KHR_relaxed_extended_instruction, is the same for non-semantic sets only.)
        Op::ExtInst | Op::ExtInstWithForwardRefsKHR => {
            if !id(i, 0).is_some_and(|s| non_semantic.contains(&s)) {
                rest(2, n, acts);
            }
        }
        // Instructions with literal operands where a followed id cannot validly appear:
        // OpCompositeExtract composite literals…
        Op::CompositeExtract => rest(0, 1, acts),
        // OpCompositeInsert object composite literals…; OpVectorShuffle a b …
        Op::CompositeInsert | Op::VectorShuffle => rest(0, 2, acts),
        // OpLine, OpNoLine, merges, branches, switch, kill, return, unreachable, terminate: no
        // memory access (a pointer can be neither a condition nor a selector).
        Op::Line
        | Op::NoLine
        | Op::Label
        | Op::LoopMerge
        | Op::SelectionMerge
        | Op::Branch
        | Op::BranchConditional
        | Op::Switch
        | Op::Kill
        | Op::Return
        | Op::Unreachable
        | Op::TerminateInvocation => {}
        // OpVariable in a function: class [initializer]
        Op::Variable => rest(1, 2, acts),
        // Anything else that names a followed id (OpReturnValue, OpConvertPtrToU, OpStore of a
        // pointer as a value, an extension's opcode …): not understood, read-write.
        _ => {
            for x in [i.result_type, i.result_id].into_iter().flatten() {
                named(x, acts);
            }
            rest(0, n, acts);
        }
    }
}

#[cfg(test)]
mod tests {
    //! Every rule on hand-written SPIR-V (`spirv-as`), on glslang's output for GLSL without
    //! `writeonly`, and on naga's for WGSL as wgpu 30 writes it (layer/testdata/naga). Where the
    //! answer must be conservative, the test says so. Tools missing: the test says so and
    //! passes (the same as the other glslang-based tests).
    use super::*;
    use crate::testutil::{compile_for, compile_with};
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

    /// The opcodes by name are the numbers the hand-written parser before rspirv matched.
    #[test]
    fn op_names_are_the_numbers_matched_before() {
        let pairs = [
            (Op::Load, 61),
            (Op::Store, 62),
            (Op::CopyMemory, 63),
            (Op::CopyMemorySized, 64),
            (Op::AccessChain, 65),
            (Op::InBoundsAccessChain, 66),
            (Op::PtrAccessChain, 67),
            (Op::ArrayLength, 68),
            (Op::InBoundsPtrAccessChain, 70),
            (Op::CopyObject, 83),
            (Op::Select, 169),
            (Op::Phi, 245),
            (Op::FunctionCall, 57),
            (Op::AtomicLoad, 227),
            (Op::AtomicStore, 228),
            (Op::AtomicFlagClear, 319),
            (Op::AtomicExchange, 229),
            (Op::AtomicXor, 242),
            (Op::AtomicFlagTestAndSet, 318),
            (Op::AtomicFMinEXT, 5614),
            (Op::AtomicFMaxEXT, 5615),
            (Op::AtomicFAddEXT, 6035),
            (Op::ImageTexelPointer, 60),
            (Op::SampledImage, 86),
            (Op::Image, 100),
            (Op::ImageSampleImplicitLod, 87),
            (Op::ImageRead, 98),
            (Op::ImageWrite, 99),
            (Op::ImageSparseSampleImplicitLod, 305),
            (Op::ImageSparseDrefGather, 315),
            (Op::ImageSparseRead, 320),
            (Op::ImageQuerySizeLod, 103),
            (Op::ImageQuerySamples, 107),
            (Op::ExtInst, 12),
            (Op::CompositeExtract, 81),
            (Op::CompositeInsert, 82),
            (Op::VectorShuffle, 79),
            (Op::Line, 8),
            (Op::NoLine, 317),
            (Op::LoopMerge, 246),
            (Op::Unreachable, 255),
            (Op::TerminateInvocation, 4416),
            (Op::Variable, 59),
            (Op::TypeImage, 25),
            (Op::TypeSampledImage, 27),
            (Op::TypeArray, 28),
            (Op::TypeRuntimeArray, 29),
            (Op::TypeStruct, 30),
            (Op::TypePointer, 32),
            (Op::TypeForwardPointer, 39),
        ];
        for (op, n) in pairs {
            assert_eq!(op as u32, n, "{op:?}");
        }
        // The atomics between exchange and xor, the sampling range and the terminators.
        for n in 229..=242 {
            assert!(format!("{:?}", Op::from_u32(n).unwrap()).starts_with("Atomic"));
        }
        assert_eq!(Decoration::NonWritable as u32, 24);
        assert_eq!(Decoration::NonReadable as u32, 25);
        assert_eq!(Decoration::Binding as u32, 33);
        assert_eq!(Decoration::DescriptorSet as u32, 34);
        assert_eq!(Decoration::BufferBlock as u32, 3);
        assert_eq!(StorageClass::StorageBuffer as u32, 12);
        assert_eq!(StorageClass::Uniform as u32, 2);
        assert_eq!(StorageClass::UniformConstant as u32, 0);
        assert_eq!(Capability::Addresses as u32, 4);
        assert_eq!(Capability::PhysicalStorageBufferAddresses as u32, 5347);
        assert_eq!(rspirv::spirv::MAGIC_NUMBER, 0x0723_0203);
    }

    /// Valid placements rspirv's own loader refuses (module docs): parsed here all the same.
    #[test]
    fn execution_mode_id_and_global_debug_info_parse() {
        let src = "#version 450\nlayout(local_size_x_id=0) in;\n\
             layout(std430, set=0, binding=0) buffer A { float a[]; };\n\
             void main() { a[gl_GlobalInvocationID.x] = 1.0; }\n";
        for (env, g) in [
            ("vulkan1.3", ""),
            ("vulkan1.3", "-gVS"),
            ("vulkan1.1", "-gV"),
        ] {
            let Some(words) = compile_with(src, env, g) else {
                eprintln!("note: glslangValidator not available; test skipped");
                return;
            };
            // What the module docs say of rspirv's loader (were it fixed, `load` could go).
            assert!(rspirv::dr::load_words(&words).is_err(), "{env} {g}");
            let m = analyze(&words).expect("a module");
            assert_eq!(m["main"].get(&(0, 0)), Some(&W), "{env} {g}");
            // The debug info as OpExtInstWithForwardRefsKHR (glslang here does not write it):
            // parsed and the same verdict, globally and in the function.
            let mut fw = words.clone();
            let mut at = 5;
            while at < fw.len() {
                if fw[at] & 0xffff == Op::ExtInst as u32 {
                    fw[at] = (fw[at] & 0xffff_0000) | Op::ExtInstWithForwardRefsKHR as u32;
                }
                at += (fw[at] >> 16) as usize;
            }
            let m = analyze(&fw).expect("a module");
            assert_eq!(m["main"].get(&(0, 0)), Some(&W), "{env} {g} forward refs");
        }
    }

    #[test]
    fn malformed_is_none() {
        assert!(analyze(&[rspirv::spirv::MAGIC_NUMBER, 0x10000, 0, 5, 0, 0x0005_0000]).is_none());
        assert!(analyze(&[rspirv::spirv::MAGIC_NUMBER, 0x10000, 0, 5, 0, 0]).is_none());
        assert!(analyze(&[1, 2, 3, 4, 5]).is_none());
        // A string operand whose instruction claims more words than there are: rspirv's decoder
        // panics on it unless the counts are checked first.
        let h = [rspirv::spirv::MAGIC_NUMBER, 0x10000, 0, 5, 0];
        let name = (10 << 16) | Op::Name as u32;
        assert!(analyze(&[&h[..], &[name, 1, 0x6e69_616d]].concat()).is_none());
        // OpSpecConstantOp of an OpSpecConstant (rspirv's operand parser panics on it; the fuzz
        // target's crash, reduced), of an OpSwitch, and of an opcode that does not exist.
        for (embedded, extra) in [
            (Op::SpecConstant as u32, 7),
            (Op::Switch as u32, 3),
            (Op::SpecConstantOp as u32, Op::IAdd as u32),
            (0xfff0, 1),
        ] {
            let op = (6 << 16) | Op::SpecConstantOp as u32;
            assert!(analyze(&[&h[..], &[op, 1, 2, embedded, extra, 3]].concat()).is_none());
        }
        let import = (40 << 16) | Op::ExtInstImport as u32;
        assert!(analyze(&[&h[..], &[import, 1, 0x4c53_4c47, 0x6474_732e]].concat()).is_none());
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
