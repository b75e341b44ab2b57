//! Plans keyed by program, device and driver, with argument lists as evidence (`context=program`,
//! DESIGN §5, issue 16).
//!
//! Under `context=program` a plan is found by the program (for an interpreter, the script too:
//! [`interpreted_program`]), the device and the driver, not the arguments. Enforce matches the
//! plan's buffers by identity (call site, size, usage, flags, ordinal) as always, so a group
//! applies under other arguments exactly when its buffers are recreated with the same identities;
//! the others stay as the program made them.
//!
//! Auto mode profiles a new argument list only while the plan is still changing
//! ([`auto_should_profile`]), and merges each profile into the plan ([`merge`]): a group is kept
//! only if no profile ever refused one of its pairs, groups that different profiles formed
//! differently around one buffer are both left out, and the plan is *stable* once a profile under
//! new arguments leaves its groups as they were.
//!
//! What this cannot see: a pair that is safe under the profiled arguments and unsafe under others
//! whose profile never ran. Guarded enforce (DESIGN §5, `layer/src/enforce/guard.rs`) covers host
//! writes inside a GPU window, and `guard=auto` turns it on under `context=program`.

use crate::plan::{Condition, Evidence, Group, Plan, Rejection};
use crate::trace::{fnv1a64, ObjectKey};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Executable names that run a program given as an argument.
const INTERPRETERS: &[&str] = &[
    "python", "pypy", "node", "nodejs", "deno", "bun", "ruby", "perl", "php", "lua", "luajit",
    "rscript", "julia", "java", "bash", "sh", "dash", "zsh",
];

/// Whether an executable (path or name) is an interpreter: `python3.11`, `node`, `java` …
pub fn is_interpreter(exe_path: &str) -> bool {
    let base = exe_path
        .rsplit('/')
        .next()
        .unwrap_or(exe_path)
        .to_ascii_lowercase();
    INTERPRETERS.iter().any(|i| {
        base.strip_prefix(i).is_some_and(|rest| {
            rest.is_empty()
                || rest
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '.' || c == '-')
        })
    })
}

/// For an interpreter, what program it runs, as an identity to add to the executable's:
/// `script=fnv64:<hash of the file>` (a script or `-jar` file, read relative to `cwd`),
/// `module=<name>` (`python -m`), `code=fnv64:<hash>` (`-c`/`-e`), `main=<class>` (java). `None`
/// for anything that is not an interpreter, or an interpreter without a program (a REPL).
pub fn interpreted_program(exe_path: &str, args: &[Vec<u8>], cwd: &Path) -> Option<String> {
    if !is_interpreter(exe_path) {
        return None;
    }
    const WITH_VALUE: &[&str] = &[
        "-W",
        "-X",
        "-Q",
        "-cp",
        "-classpath",
        "--class-path",
        "-r",
        "--require",
        "-I",
        "-p",
        "--module-path",
        "--import",
        "--loader",
        "-O",
    ];
    let text = |a: &[u8]| String::from_utf8_lossy(a).into_owned();
    let file_id = |a: &[u8]| -> Option<String> {
        let p = cwd.join(text(a));
        let bytes = std::fs::read(p).ok()?;
        Some(format!("script=fnv64:{:016x}", fnv1a64(&bytes)))
    };
    let mut i = 0;
    while i < args.len() {
        let a = text(&args[i]);
        match a.as_str() {
            "-m" => return args.get(i + 1).map(|m| format!("module={}", text(m))),
            "-c" | "-e" | "--eval" => {
                return args
                    .get(i + 1)
                    .map(|c| format!("code=fnv64:{:016x}", fnv1a64(c)))
            }
            "-jar" => return args.get(i + 1).and_then(|f| file_id(f)),
            "--" => return args.get(i + 1).and_then(|f| file_id(f)),
            v if WITH_VALUE.contains(&v) => i += 2,
            v if v.starts_with('-') => i += 1,
            _ => {
                return file_id(&args[i]).or_else(|| Some(format!("main={a}")));
            }
        }
    }
    None
}

/// A group's identity across profiles: its device, the keys of its buffers, its direction.
fn group_id(g: &Group) -> (u32, ObjectKey, Vec<ObjectKey>, String) {
    let mut members: Vec<ObjectKey> = g.members.iter().map(|m| m.staging.key.clone()).collect();
    members.sort();
    (
        g.device_index,
        g.device.key.clone(),
        members,
        format!("{:?}", g.direction),
    )
}

fn pair_id(device_index: u32, d: &ObjectKey, h: &ObjectKey) -> (u32, ObjectKey, ObjectKey) {
    (device_index, d.clone(), h.clone())
}

/// Whether auto mode should profile this run rather than enforce `plan` (its context already
/// matched, arguments aside): a plan made without evidence (by hand, or under
/// `context=arguments`) or a stable one is enforced; otherwise only the argument lists already
/// profiled are.
pub fn auto_should_profile(plan: &Plan, args_hash: &str) -> bool {
    match &plan.evidence {
        None => false,
        Some(e) => !e.stable && !e.profiles.iter().any(|a| a == args_hash),
    }
}

/// Whether a profile saw this argument list: the plan's own, or one its evidence merged.
pub fn arguments_profiled(plan: &Plan, args_hash: &str) -> bool {
    plan.context.args_hash == args_hash
        || plan
            .evidence
            .as_ref()
            .is_some_and(|e| e.profiles.iter().any(|a| a == args_hash))
}

/// Under `context=program`, for a run whose argument list no profile saw (`observed` false):
/// keeps only the groups that may be applied to behaviour no profile observed
/// ([`crate::safety::extrapolate`]), and only with the runtime guard on (`guard`), which catches
/// the host writes they may meet unseen. Returns each group left out, with why.
pub fn extrapolate(plan: &mut Plan, observed: bool, guard: bool) -> Vec<(u32, String)> {
    if observed {
        return Vec::new();
    }
    let mut out = Vec::new();
    plan.groups.retain(|g| {
        let why = if !g.extrapolable {
            if g.not_extrapolable.is_empty() {
                "the plan does not say it may be applied to behaviour no profile saw (an older plan)"
            } else {
                g.not_extrapolable.as_str()
            }
        } else if !guard {
            "the runtime guard is off (guard=off), and it is what catches the host writes such a run may make"
        } else {
            return true;
        };
        out.push((
            g.id,
            format!("these arguments were not profiled (context=program), and {why}"),
        ));
        false
    });
    out
}

/// Which per-call classes enforce may apply past the instances profiled (`crate::classes`):
/// those whose instances are all still in the plan (after [`extrapolate`]), that say `beyond`,
/// and, where they need it, with the runtime guard on (`guard`). The others are removed; returns
/// each removed class, with why. Instances the profile saw stay matched by their groups.
pub fn classes_beyond(plan: &mut Plan, guard: bool) -> Vec<(u32, String)> {
    let ids: BTreeSet<u32> = plan.groups.iter().map(|g| g.id).collect();
    let mut out = Vec::new();
    plan.classes.retain(|c| {
        let why = if !c.groups.iter().all(|g| ids.contains(g)) {
            "some of its instance groups are not applied in this run".to_string()
        } else if !c.beyond {
            if c.not_beyond.is_empty() {
                "the plan does not let it go past the instances profiled".to_string()
            } else {
                c.not_beyond.clone()
            }
        } else if c.guard_needed && !guard {
            "the runtime guard is off (guard=off), and it is what catches the host writes an instance no profile saw may make".to_string()
        } else {
            return true;
        };
        out.push((
            c.id,
            format!("class {} stays at the {} instances profiled: {why}", c.id, c.groups.len()),
        ));
        false
    });
    out
}

/// The first plan of a program: `new` with its argument list as the only evidence.
pub fn first(mut new: Plan) -> Plan {
    new.evidence = Some(Evidence {
        profiles: vec![new.context.args_hash.clone()],
        stable: false,
    });
    new
}

/// Merges the plan `new`, just made from one profile, into `old`, the plan of the same program
/// so far (DESIGN §5 "argument lists become evidence"): every rejection of either is kept; a
/// group is kept only if no profile refused one of its pairs; two different groups around one
/// buffer are both left out (a rejection says so); ids are renumbered. The result is stable when
/// its groups are the old plan's (this profile changed nothing).
pub fn merge(old: &Plan, new: &Plan) -> Plan {
    let mut out = new.clone();
    out.calibration = None;
    // Rejections: both, once per pair and condition.
    let mut seen = BTreeSet::new();
    out.rejected = Vec::new();
    for r in old.rejected.iter().chain(new.rejected.iter()) {
        let k = (
            pair_id(r.device_index, &r.device.key, &r.staging.key),
            r.condition,
        );
        if seen.insert(k) {
            out.rejected.push(r.clone());
        }
    }
    let refused: BTreeSet<_> = out
        .rejected
        .iter()
        .map(|r| pair_id(r.device_index, &r.device.key, &r.staging.key))
        .collect();
    // Groups of either profile (the newer copy of one both formed), none with a refused pair.
    let mut by_id: BTreeMap<String, Group> = BTreeMap::new();
    for g in old.groups.iter().chain(new.groups.iter()) {
        let refused_pair = g
            .members
            .iter()
            .any(|m| refused.contains(&pair_id(g.device_index, &g.device.key, &m.staging.key)));
        if !refused_pair {
            let mut g = g.clone();
            // Extrapolable only if every profile that formed it says so.
            if let Some(prev) = by_id.get(&format!("{:?}", group_id(&g))) {
                if !prev.extrapolable && g.extrapolable {
                    g.extrapolable = false;
                    g.not_extrapolable = prev.not_extrapolable.clone();
                }
            }
            by_id.insert(format!("{:?}", group_id(&g)), g);
        }
    }
    // One buffer in two different groups: the profiles disagree about it; leave both out.
    let mut users: BTreeMap<(u32, ObjectKey), Vec<String>> = BTreeMap::new();
    for (id, g) in &by_id {
        for k in std::iter::once(&g.device.key).chain(g.members.iter().map(|m| &m.staging.key)) {
            users
                .entry((g.device_index, k.clone()))
                .or_default()
                .push(id.clone());
        }
    }
    let clash: BTreeSet<String> = users
        .values()
        .filter(|ids| ids.len() > 1)
        .flatten()
        .cloned()
        .collect();
    for id in &clash {
        if let Some(g) = by_id.remove(id) {
            for m in &g.members {
                out.rejected.push(Rejection {
                    device_index: g.device_index,
                    device: g.device.clone(),
                    staging: m.staging.clone(),
                    condition: Condition::Compat,
                    event: None,
                    message: "compat: profiles of this program under different arguments grouped these buffers differently (context=program); the group is left out".into(),
                    plain: "Runs of the program with different arguments used these buffers in different combinations, so echo does not know which sharing is right; it leaves them apart.".into(),
                    copies: m.copies,
                    bytes: m.bytes,
                });
            }
        }
    }
    let mut groups: Vec<Group> = by_id.into_values().collect();
    groups.sort_by_key(|g| (g.device_index, g.id));
    // The newest profile's classes, their groups renumbered; a class with an instance left out
    // is dropped.
    let identity: BTreeMap<u32, String> = new
        .groups
        .iter()
        .map(|g| (g.id, format!("{:?}", group_id(g))))
        .collect();
    let mut renumber: BTreeMap<String, u32> = BTreeMap::new();
    for (i, g) in groups.iter_mut().enumerate() {
        renumber.insert(format!("{:?}", group_id(g)), i as u32 + 1);
        g.id = i as u32 + 1;
    }
    out.classes = new
        .classes
        .iter()
        .filter_map(|c| {
            let ids: Option<Vec<u32>> = c
                .groups
                .iter()
                .map(|id| identity.get(id).and_then(|k| renumber.get(k)).copied())
                .collect();
            let mut c = c.clone();
            c.groups = ids?;
            // Extrapolable only if every profile that formed the instances says so.
            if c.beyond {
                if let Some(g) = groups
                    .iter()
                    .find(|g| c.groups.contains(&g.id) && !g.extrapolable)
                {
                    c.beyond = false;
                    c.not_beyond = g.not_extrapolable.clone();
                }
            }
            Some(c)
        })
        .collect();
    let ids = |gs: &[Group]| -> BTreeSet<String> {
        gs.iter().map(|g| format!("{:?}", group_id(g))).collect()
    };
    let stable = ids(&groups) == ids(&old.groups);
    let mut profiles = old
        .evidence
        .as_ref()
        .map(|e| e.profiles.clone())
        .unwrap_or_else(|| vec![old.context.args_hash.clone()]);
    profiles.push(new.context.args_hash.clone());
    out.groups = groups;
    out.evidence = Some(Evidence { profiles, stable });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpreters_and_their_programs() {
        assert!(is_interpreter("/usr/bin/python3.11"));
        assert!(is_interpreter("node"));
        assert!(is_interpreter("/usr/lib/jvm/bin/java"));
        assert!(!is_interpreter("/usr/bin/echo-samples"));
        assert!(!is_interpreter("/usr/bin/pythonista"));
        let dir = std::env::temp_dir().join(format!("echo-interp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.py"), "print(1)").unwrap();
        std::fs::write(dir.join("b.py"), "print(2)").unwrap();
        let v = |a: &[&str]| a.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        let py = "/usr/bin/python3.11";
        let a = interpreted_program(py, &v(&["-u", "a.py", "--input", "x.png"]), &dir).unwrap();
        let a2 = interpreted_program(py, &v(&["a.py", "--input", "y.png"]), &dir).unwrap();
        let b = interpreted_program(py, &v(&["-X", "dev", "b.py"]), &dir).unwrap();
        assert!(a.starts_with("script=fnv64:"), "{a}");
        assert_eq!(
            a, a2,
            "the same script under other arguments is the same program"
        );
        assert_ne!(a, b, "another script is another program");
        assert_eq!(
            interpreted_program(py, &v(&["-m", "http.server"]), &dir).as_deref(),
            Some("module=http.server")
        );
        assert!(interpreted_program(py, &v(&["-c", "x"]), &dir)
            .unwrap()
            .starts_with("code=fnv64:"));
        assert_eq!(interpreted_program(py, &v(&[]), &dir), None, "a REPL");
        assert_eq!(
            interpreted_program("/bin/app", &v(&["a.py"]), &dir),
            None,
            "not an interpreter"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
