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
            body: "%x = OpAtomicIAdd %uint %ua %c1 %c0 %c1\n%y = OpAtomicLoad %uint %ub %c1 %c0",
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
            body:
                "%tp = OpImageTexelPointer %pti %t %c0 %c0\n%o = OpAtomicIAdd %uint %tp %c1 %c0 %c1",
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
