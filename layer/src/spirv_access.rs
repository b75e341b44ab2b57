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
#[path = "spirv_access_tests.rs"]
mod tests;
