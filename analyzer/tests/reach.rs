//! What reaches a pair's bytes besides the commands echo follows (issue 32), on synthetic traces:
//! a command echo steps aside from names a member, or its memory, or can reach everything; another
//! buffer or an image is bound over a member's bytes; a trace from a layer that did not see every
//! command (format before version 4). Each refuses; the control (nothing of the kind) accepts.

mod common;
use common::*;
use echo_analyzer::analysis::Decision;
use echo_analyzer::plan::Condition;
use echo_analyzer::trace::Event;

fn upload(t: &mut T) -> (Buf, Buf) {
    let h = t.staging(MIB);
    let d = t.device(MIB);
    for _ in 0..3 {
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
    }
    (h, d)
}

fn refused(a: &echo_analyzer::analysis::Analysis, words: &str) -> Condition {
    match decision(a, 1, 2) {
        Decision::Rejected {
            condition,
            plain,
            message,
            ..
        } => {
            assert!(
                plain.contains(words) || message.contains(words),
                "'{words}' not in: {plain} / {message}"
            );
            *condition
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn aside(t: &mut T, buffers: Vec<u64>, memory: Vec<u64>, everything: bool) {
    t.push(Event::Aside {
        command: "vkCmdFrobECHO".into(),
        cmd: None,
        buffers,
        memory,
        everything,
    });
}

#[test]
fn the_control_is_accepted() {
    let mut t = T::new();
    upload(&mut t);
    aside(&mut t, vec![], vec![], false); // names nothing: leaves the pair where it was
    assert!(matches!(
        decision(&t.analyze(), 1, 2),
        Decision::Accepted { .. }
    ));
}

#[test]
fn a_command_echo_steps_aside_from_names_the_device_buffer() {
    let mut t = T::new();
    let (_, d) = upload(&mut t);
    aside(&mut t, vec![d.buf], vec![], false);
    let c = refused(
        &t.analyze(),
        "through vkCmdFrobECHO, a command echo does not follow",
    );
    assert_eq!(c, Condition::Compat);
}

#[test]
fn a_command_echo_steps_aside_from_names_the_staging_memory() {
    let mut t = T::new();
    let (h, _) = upload(&mut t);
    aside(&mut t, vec![], vec![h.mem], false);
    refused(&t.analyze(), "vkCmdFrobECHO");
}

#[test]
fn a_command_that_can_reach_everything_refuses_every_pair() {
    let mut t = T::new();
    upload(&mut t);
    aside(&mut t, vec![], vec![], true);
    refused(&t.analyze(), "which can reach any buffer");
}

#[test]
fn a_buffer_bound_over_the_device_buffers_bytes_refuses_it() {
    let mut t = T::new();
    let (_, d) = upload(&mut t);
    let x = t.create(MIB, 0x20, 0);
    t.bind(x, d.mem, 0);
    refused(
        &t.analyze(),
        "is bound over the same bytes as device buffer #2",
    );
}

#[test]
fn a_buffer_bound_beside_the_device_buffer_leaves_it_alone() {
    // One 2 MiB block: the device buffer at 0, another buffer at 1 MiB (a sub-allocator's
    // neighbour): no byte in common, the pair stands.
    let mut t = T::new();
    let h = t.staging(MIB);
    let block = t.alloc(2 * MIB, 0, None);
    let d = t.create(MIB, 0x2 | 0x20, 0);
    t.bind(d, block, 0);
    let x = t.create(MIB, 0x20, 0);
    t.bind(x, block, MIB);
    for _ in 0..3 {
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d, MIB), Cmd::ReadWrite(d)]);
    }
    assert!(
        matches!(decision(&t.analyze(), 1, 2), Decision::Accepted { .. }),
        "{:#?}",
        t.analyze().candidates
    );
    // Bound over the device buffer's last byte instead: refused.
    let mut t2 = T::new();
    let h = t2.staging(MIB);
    let block = t2.alloc(2 * MIB, 0, None);
    let d = t2.create(MIB, 0x2 | 0x20, 0);
    t2.bind(d, block, 0);
    let x = t2.create(MIB, 0x20, 0);
    t2.bind(x, block, MIB - 256);
    for _ in 0..3 {
        t2.host_write(h.buf);
        t2.run(&[Cmd::Copy(h.buf, d, MIB), Cmd::ReadWrite(d)]);
    }
    refused(
        &t2.analyze(),
        "is bound over the same bytes as device buffer #2",
    );
}

#[test]
fn an_image_bound_over_the_staging_bytes_refuses_it() {
    let mut t = T::new();
    let (h, _) = upload(&mut t);
    t.push(Event::BindImage {
        image: 0x777,
        memory: h.mem,
        offset: 4096,
        size: 4096,
    });
    refused(&t.analyze(), "shares its bytes with an image");
}

#[test]
fn a_trace_from_a_layer_that_did_not_see_every_command_is_refused() {
    let mut t = T::new();
    upload(&mut t);
    for version in [3, 4] {
        // Version 3 did not see every command; version 4 took descriptors as recorded.
        t.header.version = version;
        let c = refused(
            &t.analyze(),
            "did not see every way a command can reach a buffer",
        );
        assert_eq!(c, Condition::Evidence);
    }
}

/// An image beside the device buffer in one block shares no byte with it: the pair stands
/// (issue 55: a mutant that refused any image in the memory survived).
#[test]
fn an_image_bound_beside_the_device_buffer_leaves_it_alone() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let block = t.alloc(2 * MIB, 0, None);
    let d = t.create(MIB, 0x2 | 0x20, 0);
    t.bind(d, block, 0);
    t.push(Event::BindImage {
        image: 0x777,
        memory: block,
        offset: MIB,
        size: MIB,
    });
    for _ in 0..3 {
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d, MIB), Cmd::ReadWrite(d)]);
    }
    assert!(
        matches!(decision(&t.analyze(), 1, 2), Decision::Accepted { .. }),
        "{:#?}",
        t.analyze().candidates
    );
}
