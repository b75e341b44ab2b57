//! The extrapolation rule (issue 22, `analyzer/src/safety/extrapolate.rs`) on synthetic traces:
//! which accepted groups may be applied to behaviour no profile observed.

mod common;
use common::*;
use echo_analyzer::program::extrapolate;

fn flag(t: &T) -> (bool, String) {
    let a = t.analyze();
    assert_eq!(a.plan.groups.len(), 1, "{:#?}", a.candidates);
    let g = &a.plan.groups[0];
    (g.extrapolable, g.not_extrapolable.clone())
}

#[test]
fn a_fresh_download_is_extrapolable_even_when_a_shader_writes_its_device_buffer() {
    let mut t = T::new();
    let h = t.staging_unmapped(MIB);
    let d = t.device(MIB);
    t.map(h.mem);
    t.run(&[Cmd::ReadWrite(d.buf)]);
    t.run(&[Cmd::Copy(d.buf, h.buf, MIB)]);
    t.host_read(h.buf);
    t.destroy(h.buf);
    t.free(h.mem);
    let (ok, why) = flag(&t);
    assert!(ok, "{why}");
}

#[test]
fn a_persistent_readback_buffer_is_never_extrapolated() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    for _ in 0..3 {
        t.run(&[Cmd::ReadWrite(d.buf), Cmd::Copy(d.buf, h.buf, MIB)]);
        t.host_read(h.buf);
    }
    let (ok, why) = flag(&t);
    assert!(!ok);
    assert!(why.contains("persistent readback"), "{why}");
}

#[test]
fn an_upload_is_extrapolable_only_while_the_gpu_writes_its_device_buffer_through_it_alone() {
    // The GPU only reads d: a host read of h sees what the program's own h held.
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    for _ in 0..3 {
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::Read(d.buf)]);
    }
    let (ok, why) = flag(&t);
    assert!(ok, "{why}");
    // A shader writes d too: a host read of h would see the GPU's bytes.
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    for _ in 0..3 {
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
    }
    let (ok, why) = flag(&t);
    assert!(!ok);
    assert!(why.contains("written on the GPU"), "{why}");
}

/// A one-time *upload* is no fresh download: when a shader writes its device buffer, a host
/// read of the staging buffer would see the GPU's bytes (issue 55: "one-time" alone let it go).
#[test]
fn a_one_time_upload_is_not_extrapolated_when_a_shader_writes_its_device_buffer() {
    let mut t = T::new();
    let h = t.staging_unmapped(MIB);
    let d = t.device(MIB);
    t.map(h.mem);
    t.host_write(h.buf);
    t.run(&[Cmd::Copy(h.buf, d.buf, MIB)]);
    t.destroy(h.buf);
    t.free(h.mem);
    t.run(&[Cmd::ReadWrite(d.buf)]);
    let (ok, why) = flag(&t);
    assert!(!ok);
    assert!(why.contains("written on the GPU"), "{why}");
}

#[test]
fn unprofiled_arguments_keep_only_extrapolable_groups_and_only_with_the_guard() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    for _ in 0..3 {
        t.run(&[Cmd::ReadWrite(d.buf), Cmd::Copy(d.buf, h.buf, MIB)]);
        t.host_read(h.buf);
    }
    let plan = t.analyze().plan;
    let mut p = plan.clone();
    assert!(
        extrapolate(&mut p, true, false).is_empty(),
        "observed: all stay"
    );
    assert_eq!(p.groups.len(), 1);
    let out = extrapolate(&mut p, false, true);
    assert!(p.groups.is_empty());
    assert_eq!(out.len(), 1);
    assert!(out[0].1.contains("persistent readback"), "{out:?}");
    // An extrapolable group needs the guard.
    let mut p = plan.clone();
    p.groups[0].extrapolable = true;
    let out = extrapolate(&mut p, false, false);
    assert!(p.groups.is_empty() && out[0].1.contains("guard"), "{out:?}");
    let mut p = plan;
    p.groups[0].extrapolable = true;
    assert!(extrapolate(&mut p, false, true).is_empty());
    assert_eq!(p.groups.len(), 1);
}
