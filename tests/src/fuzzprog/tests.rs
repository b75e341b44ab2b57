//! The tests of the fuzzed programs: their types, the generator, the model and its repair.

use super::model::{repair, validate};
use super::rng::Rng;
use super::*;

const LAVAPIPE: Caps = Caps {
    push_descriptor: true,
    uab_storage: false,
    device_address: true,
    image_size: 4096,
    image_align: 16,
    map2: false,
    maint6: false,
    partially_bound: false,
    shader_object: false,
    draw: true,
    gpl: true,
    timestamps: true,
};
/// Mesa 25's lavapipe (Vulkan 1.4).
const MESA25: Caps = Caps {
    push_descriptor: true,
    uab_storage: true,
    device_address: true,
    image_size: 4096,
    image_align: 16,
    map2: true,
    maint6: true,
    partially_bound: true,
    shader_object: true,
    draw: true,
    gpl: true,
    timestamps: true,
};
const SWIFTSHADER: Caps = Caps {
    push_descriptor: false,
    uab_storage: true,
    device_address: true,
    image_size: 4096,
    image_align: 16,
    map2: false,
    maint6: false,
    partially_bound: true,
    shader_object: false,
    draw: true,
    gpl: true,
    timestamps: true,
};

#[test]
fn a_seed_names_one_valid_program() {
    let mut without_reads = 0;
    for seed in 0..200 {
        for caps in [LAVAPIPE, SWIFTSHADER] {
            let p = gen::generate(seed, caps);
            assert_eq!(
                p,
                gen::generate(seed, caps),
                "seed {seed}: not deterministic"
            );
            if let Err((i, e)) = validate(&p) {
                panic!("seed {seed}: op {i} invalid: {e}");
            }
            assert_eq!(Program::from_json(&p.to_json()).unwrap(), p);
            without_reads += !p.ops.iter().any(|o| matches!(o, Op::Read { .. })) as u32;
        }
    }
    assert!(
        without_reads < 20,
        "{without_reads} of 400 programs read nothing"
    );
}

#[test]
fn repair_makes_any_sub_list_valid() {
    let mut rng = Rng::new(45);
    for seed in 0..60 {
        let p = gen::generate(seed, LAVAPIPE);
        for _ in 0..10 {
            let keep = rng.range(20, 95) as f64 / 100.0;
            let ops = p.ops.iter().filter(|_| rng.chance(keep)).cloned().collect();
            let r = repair(&Program {
                seed,
                caps: LAVAPIPE,
                ops,
            });
            if let Err((i, e)) = validate(&r) {
                panic!("seed {seed}: the repaired program's op {i} is invalid: {e}");
            }
        }
    }
}

/// The model refuses what the generator must never emit (its checks can fail).
#[test]
fn the_model_refuses_invalid_programs() {
    let p = gen::generate(3, LAVAPIPE);
    let refuses = |ops: Vec<Op>| {
        validate(&Program {
            seed: 0,
            caps: LAVAPIPE,
            ops,
        })
        .is_err()
    };
    // A host read before the wait that completes the GPU work writing those bytes.
    let first_wait = p
        .ops
        .iter()
        .position(|o| {
            matches!(
                o,
                Op::WaitFence { .. } | Op::WaitSem { .. } | Op::QueueIdle | Op::DeviceIdle
            )
        })
        .unwrap();
    let mut ops = p.ops.clone();
    ops.remove(first_wait);
    assert!(refuses(ops), "a read without the wait");
    // A recorded command buffer without its barriers.
    let mut ops = p.ops.clone();
    for o in ops.iter_mut() {
        if let Op::Record { cmds, .. } = o {
            cmds.retain(|c| !matches!(c, Cmd::Barrier { .. }));
        }
    }
    assert!(refuses(ops), "no barriers");
    // An id created twice.
    let mut ops = p.ops.clone();
    ops.insert(1, p.ops[0].clone());
    assert!(refuses(ops), "an id created twice");
}

/// Update-after-bind for real (issue 53): sets written after a command buffer that binds
/// them is recorded and before it is submitted, on devices with update-after-bind only.
#[test]
fn update_after_bind_sets_are_written_between_recording_and_submission() {
    let late = |caps: Caps| {
        (0..300)
            .filter(|&seed| {
                let p = gen::generate(seed, caps);
                let mut recorded: Vec<(u32, Vec<u32>)> = vec![];
                p.ops.iter().any(|o| match o {
                    Op::Record { cb, cmds, .. } => {
                        let sets = cmds
                            .iter()
                            .filter_map(|c| match c {
                                Cmd::Dispatch {
                                    desc: Desc::Set { set },
                                    ..
                                } => Some(*set),
                                _ => None,
                            })
                            .collect();
                        recorded.retain(|(c, _)| c != cb);
                        recorded.push((*cb, sets));
                        false
                    }
                    Op::Submit { cbs, .. } => {
                        recorded.retain(|(c, _)| !cbs.contains(c));
                        false
                    }
                    Op::WriteSet { set, .. } => recorded.iter().any(|(_, sets)| sets.contains(set)),
                    _ => false,
                })
            })
            .count()
    };
    let n = late(SWIFTSHADER);
    assert!(
        n >= 15,
        "{n} of 300 programs write a set between recording and submission"
    );
    assert_eq!(late(LAVAPIPE), 0, "lavapipe 22.3 has no update-after-bind");
}

/// What the generator reaches over many seeds: enough of each kind of op to matter.
#[test]
fn the_generator_reaches_its_features() {
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..300 {
        for caps in [LAVAPIPE, SWIFTSHADER, MESA25] {
            for op in gen::generate(seed, caps).ops {
                let name = match &op {
                    Op::Record {
                        cmds, secondary, ..
                    } => {
                        if !secondary.is_empty() {
                            seen.insert("secondary".to_string());
                        }
                        for c in cmds {
                            let n = match c {
                                Cmd::Dispatch {
                                    desc: Desc::Push { template: true, .. },
                                    ..
                                } => "push-template",
                                Cmd::Dispatch {
                                    desc: Desc::Push { .. },
                                    ..
                                } => "push",
                                Cmd::Dispatch {
                                    desc: Desc::Addr { .. },
                                    ..
                                } => "addr",
                                Cmd::Dispatch {
                                    indirect: Some(_), ..
                                } => "indirect",
                                Cmd::Dispatch {
                                    draw: Draw::Library,
                                    ..
                                } => "draw-library",
                                Cmd::Dispatch {
                                    draw: Draw::Monolithic,
                                    ..
                                } => "draw",
                                Cmd::Dispatch {
                                    code: Code::ObjectUnbind,
                                    ..
                                } => "shader-object-unbind",
                                Cmd::Dispatch {
                                    code: Code::PipelineThenObject,
                                    ..
                                } => "pipeline-then-object",
                                Cmd::Dispatch {
                                    code: Code::ObjectThenPipeline,
                                    ..
                                } => "object-then-pipeline",
                                Cmd::Dispatch {
                                    code: Code::Object, ..
                                } => "shader-object",
                                Cmd::Dispatch { bind2: true, .. } => "bind2",
                                Cmd::Dispatch { base, .. } if *base > 0 => "base",
                                Cmd::Barrier { event: true, .. } => "event",
                                Cmd::Barrier { buf: Some(_), .. } => "buffer-barrier",
                                Cmd::Barrier { v2: true, .. } => "barrier2",
                                Cmd::ToImage { .. } => "to-image",
                                Cmd::ClearImage { .. } => "clear-image",
                                Cmd::QueryCopy { .. } => "query-copy",
                                Cmd::PushConstants { .. } => "push-constants",
                                Cmd::FromImage { .. } => "from-image",
                                Cmd::Fill { .. } => "fill",
                                Cmd::Update { .. } => "update",
                                Cmd::Copy { v2: true, .. } => "copy2",
                                _ => "other",
                            };
                            seen.insert(n.to_string());
                        }
                        "record"
                    }
                    Op::Set { partial: true, .. } => "partial-set",
                    Op::Set { uab: true, .. } => "uab-set",
                    Op::WriteSet { template: true, .. } => "template-write",
                    Op::Submit { wait, .. } if !wait.is_empty() => "semaphore-wait",
                    Op::Submit { v2: true, .. } => "submit2",
                    Op::WaitSem { .. } => "timeline-wait",
                    Op::Free { .. } => "free",
                    Op::BindImage { .. } => "image-bind",
                    Op::View { .. } => "view",
                    Op::WriteIndirect { .. } => "indirect-write",
                    Op::Map { v2: true, .. } => "map2",
                    Op::Unmap { v2: true, .. } => "unmap2",
                    Op::Map { .. } => "map",
                    Op::Unmap { .. } => "unmap",
                    Op::Flush { .. } => "flush",
                    Op::Invalidate { .. } => "invalidate",
                    _ => "other",
                };
                seen.insert(name.to_string());
            }
        }
    }
    for want in [
        "push-template",
        "push",
        "addr",
        "indirect",
        "base",
        "event",
        "buffer-barrier",
        "barrier2",
        "to-image",
        "clear-image",
        "query-copy",
        "push-constants",
        "from-image",
        "fill",
        "update",
        "copy2",
        "uab-set",
        "partial-set",
        "shader-object",
        "shader-object-unbind",
        "draw",
        "draw-library",
        "pipeline-then-object",
        "object-then-pipeline",
        "template-write",
        "semaphore-wait",
        "submit2",
        "timeline-wait",
        "free",
        "image-bind",
        "view",
        "indirect-write",
        "map",
        "map2",
        "bind2",
        "secondary",
        "unmap",
        "unmap2",
        "flush",
        "invalidate",
    ] {
        assert!(seen.contains(want), "no program has {want}: {seen:?}");
    }
}
