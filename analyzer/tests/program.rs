//! `context=program` (issue 16): plans keyed by program, argument lists as evidence. Profiles of
//! one program under different arguments merge: groups no profile refused stay, a refusal under
//! any arguments removes the group, groups formed differently around one buffer are left out, and
//! the plan is stable once a profile changes nothing.

mod common;
use common::*;
use echo_analyzer::plan::{Condition, Plan};
use echo_analyzer::program::{auto_should_profile, first, merge};

const MIB: u64 = 1 << 20;

/// One profile of a program with an upload pair (h1 → d1) and a second pair (h2 → d2) that only
/// some arguments use; `race`: the host rewrites h1 while the dispatch reading d1 is in flight.
fn profile(args: &str, race: bool, second: bool) -> Plan {
    let mut t = T::new();
    t.header.context.args_hash = args.into();
    let (h1, d1) = (t.staging(MIB), t.device(MIB));
    let (h2, d2) = (t.staging(MIB), t.device(MIB));
    for _ in 0..3 {
        if race {
            t.host_write(h1.buf);
            let (_, f) = t.submit(&[Cmd::Copy(h1.buf, d1.buf, MIB), Cmd::ReadWrite(d1.buf)]);
            t.host_write(h1.buf);
            t.wait(f);
        } else {
            t.host_write(h1.buf);
            t.run(&[Cmd::Copy(h1.buf, d1.buf, MIB), Cmd::ReadWrite(d1.buf)]);
        }
        if second {
            t.host_write(h2.buf);
            t.run(&[Cmd::Copy(h2.buf, d2.buf, MIB), Cmd::ReadWrite(d2.buf)]);
        }
    }
    t.analyze().plan
}

#[test]
fn profiles_agree_and_the_plan_becomes_stable() {
    let a = first(profile("aa", false, false));
    assert_eq!(a.groups.len(), 1);
    assert!(!a.evidence.as_ref().unwrap().stable);
    assert!(
        !auto_should_profile(&a, "aa"),
        "the arguments profiled are enforced"
    );
    assert!(
        auto_should_profile(&a, "bb"),
        "new arguments are profiled while not stable"
    );
    let b = merge(&a, &profile("bb", false, false));
    let e = b.evidence.as_ref().unwrap();
    assert!(
        e.stable,
        "a profile that changed nothing makes the plan stable"
    );
    assert_eq!(e.profiles, vec!["aa".to_string(), "bb".to_string()]);
    assert_eq!(b.groups.len(), 1);
    assert!(
        !auto_should_profile(&b, "cc"),
        "a stable plan is enforced under any arguments"
    );
    // It reads back.
    assert_eq!(echo_analyzer::plan::parse_plan(&b.to_json()).unwrap(), b);
}

#[test]
fn a_new_group_keeps_profiling_until_a_profile_agrees() {
    let a = first(profile("aa", false, false));
    let b = merge(&a, &profile("bb", false, true));
    assert_eq!(b.groups.len(), 2, "the second pair's group joins");
    assert!(!b.evidence.as_ref().unwrap().stable);
    assert_eq!(
        b.groups.iter().map(|g| g.id).collect::<Vec<_>>(),
        vec![1, 2],
        "ids renumbered"
    );
    let c = merge(&b, &profile("cc", false, true));
    assert!(c.evidence.as_ref().unwrap().stable);
    assert_eq!(c.groups.len(), 2);
    // A profile that does not use the second pair removes nothing: no profile refused it.
    let d = merge(&c, &profile("dd", false, false));
    assert_eq!(d.groups.len(), 2);
}

#[test]
fn a_refusal_under_any_arguments_removes_the_group() {
    let a = first(profile("aa", false, true));
    assert_eq!(a.groups.len(), 2);
    let raced = profile("bb", true, true);
    assert!(
        raced.rejected.iter().any(|r| r.condition == Condition::S2),
        "{:#?}",
        raced.rejected
    );
    let b = merge(&a, &raced);
    assert_eq!(b.groups.len(), 1, "the raced pair's group is gone");
    assert!(!b.evidence.as_ref().unwrap().stable);
    assert!(b.rejected.iter().any(|r| r.condition == Condition::S2));
    // Once refused, a later clean profile does not bring it back.
    let c = merge(&b, &profile("cc", false, true));
    assert_eq!(c.groups.len(), 1);
    assert!(c.evidence.as_ref().unwrap().stable);
}

#[test]
fn groups_formed_differently_around_one_buffer_are_left_out() {
    let a = first(profile("aa", false, true));
    let mut other = profile("bb", false, true);
    // The second profile put another staging buffer into the first group.
    let mut extra = other.groups[0].members[0].clone();
    extra.staging.key.site = "ffffffffffffffff".into();
    other.groups[0].members.push(extra);
    let b = merge(&a, &other);
    assert_eq!(b.groups.len(), 1, "{:#?}", b.groups);
    assert!(b
        .rejected
        .iter()
        .any(|r| r.message.contains("grouped these buffers differently") && !r.plain.is_empty()));
}
