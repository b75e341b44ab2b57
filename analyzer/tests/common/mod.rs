//! A small builder for synthetic traces: write what the layer would record, in order.
#![allow(dead_code)]

use echo_analyzer::analysis::{explain, plain_site, Analysis, Decision};
use echo_analyzer::plan::{Condition, Direction, Thresholds};
use echo_analyzer::trace::*;

pub const MIB: u64 = 1 << 20;
pub const SRC: u32 = 0x1;
pub const DST: u32 = 0x2;
pub const STORAGE: u32 = 0x20;

/// A buffer and the allocation it was given.
#[derive(Clone, Copy, Debug)]
pub struct Buf {
    pub buf: u64,
    pub mem: u64,
}

/// One command of a command buffer.
#[derive(Clone, Debug)]
pub enum Cmd {
    /// Whole-size copy at offset 0 → 0.
    Copy(u64, u64, u64),
    /// `(src, dst, src_offset, dst_offset, size)`.
    CopyAt(u64, u64, u64, u64, u64),
    /// A dispatch reading the buffer.
    Read(u64),
    /// A dispatch writing the buffer.
    Write(u64),
    /// A dispatch reading and writing the buffer.
    ReadWrite(u64),
    /// A use the layer cannot follow.
    Untracked(u64),
}

pub struct T {
    pub header: Header,
    pub recs: Vec<Record>,
    seq: u64,
    next: u64,
    pub queue: u64,
    pub truncated: bool,
    /// The device index records are filed under (`Record::dev`).
    pub dev: u32,
}

impl Default for T {
    fn default() -> Self {
        Self::new()
    }
}

impl T {
    pub fn new() -> T {
        let mut t = T {
            header: Header {
                format: TRACE_FORMAT.into(),
                version: TRACE_VERSION,
                context: Context {
                    exe_path: "/nonexistent/app".into(),
                    device_name: "synthetic".into(),
                    ..Default::default()
                },
                pid: 1,
                started_unix: 0,
                // The synthetic programs rewrite their whole staging buffer at every host write
                // (the tests' loops say so): `host_writes=whole`, the setting a user who vouches
                // for that gives. The default (`any`: a write may leave bytes as they were) has
                // its own tests (analyzer/tests/host_writes.rs); `T::partial_writes` selects it.
                settings: [("host_writes".to_string(), "whole".to_string())]
                    .into_iter()
                    .collect(),
                clock_origin_ns: None,
            },
            recs: Vec::new(),
            seq: 0,
            next: 0x1000,
            queue: 0x900,
            truncated: false,
            dev: 0,
        };
        t.push(Event::DeviceCreate {
            device: 0xd0,
            class: "uma-strict".into(),
            alias_type: Some(0),
            min_import_alignment: 4096,
            device_index: 0,
            name: "llvmpipe".into(),
            validation: "double-map".into(),
        });
        t
    }

    pub fn push(&mut self, event: Event) -> u64 {
        self.seq += 1;
        self.recs.push(Record {
            seq: self.seq,
            thread: 0,
            dev: self.dev,
            t: None,
            dur: None,
            event,
        });
        self.seq
    }

    /// From now on records belong to device `index` (created here with validation `validation`).
    /// Handles restart, so they collide with the other devices' as they may in a real process.
    pub fn new_device(&mut self, index: u32, validation: &str) {
        self.dev = index;
        self.next = 0x1000;
        self.push(Event::DeviceCreate {
            device: 0xd0,
            class: "uma-strict".into(),
            alias_type: Some(0),
            min_import_alignment: 4096,
            device_index: index,
            name: "llvmpipe".into(),
            validation: validation.into(),
        });
    }

    /// A trace whose only device was profiled with host-access validation `validation`.
    pub fn with_validation(validation: &str) -> T {
        let mut t = T::new();
        t.recs.clear();
        t.seq = 0;
        t.new_device(0, validation);
        t
    }

    pub fn handle(&mut self) -> u64 {
        self.next += 0x10;
        self.next
    }

    /// Create a buffer (not bound).
    pub fn create(&mut self, size: u64, usage: u32, flags: u32) -> u64 {
        let buffer = self.handle();
        self.push(Event::BufferCreate {
            buffer,
            key: ObjectKey {
                site: format!("{buffer:016x}"),
                size,
                usage,
                flags,
                ordinal: 0,
            },
            usage,
            flags,
            size,
            req: MemReq {
                size,
                alignment: 256,
                type_bits: 0b11,
            },
            stack: vec![
                Frame {
                    module: "libvulkan.so.1".into(),
                    offset: 0x4242,
                },
                Frame {
                    module: "app".into(),
                    offset: buffer,
                },
            ],
            modules: vec![],
        });
        buffer
    }

    pub fn alloc(&mut self, size: u64, type_index: u32, dedicated: Option<u64>) -> u64 {
        let memory = self.handle();
        self.push(Event::MemoryAlloc {
            memory,
            key: ObjectKey {
                site: format!("{memory:016x}"),
                size,
                usage: type_index,
                flags: 0,
                ordinal: 0,
            },
            type_index,
            size,
            dedicated_buffer: dedicated,
            host_visible: true,
            external: false,
            host_import: false,
        });
        memory
    }

    pub fn bind(&mut self, buffer: u64, memory: u64, offset: u64) -> u64 {
        self.push(Event::BindBuffer {
            buffer,
            memory,
            offset,
        })
    }

    pub fn map(&mut self, memory: u64) -> u64 {
        self.push(Event::MapMemory {
            memory,
            offset: 0,
            size: u64::MAX,
        })
    }

    /// A host-visible staging buffer in its own (dedicated) allocation, mapped.
    pub fn staging(&mut self, size: u64) -> Buf {
        let buf = self.create(size, SRC | DST, 0);
        let mem = self.alloc(size, 0, Some(buf));
        self.bind(buf, mem, 0);
        self.map(mem);
        Buf { buf, mem }
    }

    /// A staging buffer in its own (dedicated) allocation, bound but not mapped yet: map it
    /// ([`T::map`]) once its device partner is bound. A map the program made before the device
    /// buffer was bound, and still holds, cannot be served from the shared memory, so enforce
    /// refuses such a member and the analysis with it (issue 36, `compat_mapped`).
    pub fn staging_unmapped(&mut self, size: u64) -> Buf {
        let buf = self.create(size, SRC | DST, 0);
        let mem = self.alloc(size, 0, Some(buf));
        self.bind(buf, mem, 0);
        Buf { buf, mem }
    }

    /// A staging buffer the renderer way: its own allocation mapped, (unseen) host writes,
    /// unmapped — and the buffer not bound yet.
    pub fn filled_unbound(&mut self, size: u64) -> Buf {
        let buf = self.create(size, SRC | DST, 0);
        let mem = self.alloc(size, 0, Some(buf));
        self.map(mem);
        self.push(Event::UnmapMemory { memory: mem });
        Buf { buf, mem }
    }

    /// A device buffer in its own allocation, never mapped.
    pub fn device(&mut self, size: u64) -> Buf {
        let buf = self.create(size, STORAGE | SRC | DST, 0);
        let mem = self.alloc(size, 0, Some(buf));
        self.bind(buf, mem, 0);
        Buf { buf, mem }
    }

    /// A mapped pool allocation for sub-allocated staging buffers.
    pub fn pool(&mut self, size: u64) -> u64 {
        let mem = self.alloc(size, 0, None);
        self.map(mem);
        mem
    }

    /// A staging buffer sub-allocated from `pool` at `offset`.
    pub fn sub_staging(&mut self, pool: u64, offset: u64, size: u64) -> Buf {
        let buf = self.create(size, SRC | DST, 0);
        self.bind(buf, pool, offset);
        Buf { buf, mem: pool }
    }

    /// The layer armed `buffer` (its host accesses are recorded from here on).
    pub fn watch(&mut self, buffer: u64) -> u64 {
        self.push(Event::Watched { buffer })
    }

    /// A buffer sub-allocated from `pool` at `offset` with `usage`, watched from its bind as
    /// the layer does for a mapped buffer ≥ min_bytes.
    pub fn sub_watched(&mut self, pool: u64, offset: u64, size: u64, usage: u32) -> Buf {
        let buf = self.create(size, usage, 0);
        self.bind(buf, pool, offset);
        self.watch(buf);
        Buf { buf, mem: pool }
    }

    /// Analyze as the default does: a host write may have left any byte as it was.
    pub fn partial_writes(&mut self) {
        self.header.settings.remove("host_writes");
    }

    pub fn host_write(&mut self, buffer: u64) -> u64 {
        self.push(Event::HostAccess {
            buffer,
            access: Access::Write,
        })
    }

    pub fn host_read(&mut self, buffer: u64) -> u64 {
        self.push(Event::HostAccess {
            buffer,
            access: Access::Read,
        })
    }

    /// Record a fresh command buffer with `cmds` and submit it with a new fence: `(seq, fence)`.
    pub fn submit(&mut self, cmds: &[Cmd]) -> (u64, u64) {
        let fence = self.handle();
        let seq = self.submit_with(cmds, Some(fence), vec![]);
        (seq, fence)
    }

    pub fn submit_with(
        &mut self,
        cmds: &[Cmd],
        fence: Option<u64>,
        signals: Vec<(u64, u64)>,
    ) -> u64 {
        let cmd = self.handle();
        self.push(Event::CmdBegin {
            cmd,
            one_time: true,
        });
        for c in cmds {
            let ev = match c.clone() {
                Cmd::Copy(src, dst, size) => Event::CmdCopyBuffer {
                    cmd,
                    src,
                    dst,
                    regions: vec![CopyRegion {
                        src_offset: 0,
                        dst_offset: 0,
                        size,
                    }],
                },
                Cmd::CopyAt(src, dst, so, d_o, size) => Event::CmdCopyBuffer {
                    cmd,
                    src,
                    dst,
                    regions: vec![CopyRegion {
                        src_offset: so,
                        dst_offset: d_o,
                        size,
                    }],
                },
                Cmd::Read(b) | Cmd::Write(b) | Cmd::ReadWrite(b) | Cmd::Untracked(b) => {
                    let (access, kind) = match c {
                        Cmd::Read(_) => (Access::Read, UseKind::Descriptor),
                        Cmd::Write(_) => (Access::Write, UseKind::Descriptor),
                        Cmd::ReadWrite(_) => (Access::ReadWrite, UseKind::Descriptor),
                        _ => (Access::Read, UseKind::Untracked),
                    };
                    Event::CmdUse {
                        cmd,
                        command: "vkCmdDispatch".into(),
                        uses: vec![BufferUse {
                            buffer: b,
                            offset: 0,
                            size: u64::MAX,
                            access,
                            kind,
                        }],
                        late: None,
                    }
                }
            };
            self.push(ev);
        }
        self.push(Event::CmdEnd { cmd });
        let queue = self.queue;
        self.push(Event::QueueSubmit {
            queue,
            batches: vec![SubmitBatch {
                command_buffers: vec![cmd],
                waits: vec![],
                signals,
            }],
            fence,
        })
    }

    pub fn wait(&mut self, fence: u64) -> u64 {
        self.push(Event::FenceSignaled {
            fences: vec![fence],
        })
    }

    /// Submit and wait at once.
    pub fn run(&mut self, cmds: &[Cmd]) -> u64 {
        let (s, f) = self.submit(cmds);
        self.wait(f);
        s
    }

    pub fn destroy(&mut self, buffer: u64) -> u64 {
        self.push(Event::BufferDestroy { buffer })
    }

    pub fn free(&mut self, memory: u64) -> u64 {
        self.push(Event::MemoryFree { memory })
    }

    pub fn address(&mut self, buffer: u64) -> u64 {
        self.push(Event::BufferAddress { buffer })
    }

    /// The trace as the layer writes it.
    pub fn text(&self) -> String {
        let mut s = header_line(&self.header);
        s.push('\n');
        for r in &self.recs {
            s.push_str(&record_line(r));
            s.push('\n');
        }
        s
    }

    /// Through the real reader, so every test also exercises the format.
    pub fn trace(&self) -> Trace {
        read_trace(self.text().as_bytes()).expect("synthetic trace reads back")
    }

    pub fn analyze(&self) -> Analysis {
        self.analyze_with(Thresholds::default())
    }

    pub fn analyze_with(&self, t: Thresholds) -> Analysis {
        let a = explain(&self.trace(), t, &plain_site);
        dump_golden(&self.text(), t, &a);
        // Every plan the analyzer writes must read back.
        let again = echo_analyzer::plan::parse_plan(&a.plan.to_json()).expect("plan parses");
        assert_eq!(again, a.plan);
        assert_plain_words(&a);
        assert_causes_agree(&a, t);
        // Every copy is accounted for: in an accepted pair, or under exactly one reason.
        let c = &a.copies;
        let explained: u64 = c
            .reasons
            .iter()
            .filter(|r| r.reason != "unknown_buffer")
            .map(|r| r.copies)
            .sum();
        assert_eq!(c.accepted_copies + explained, c.copies, "{c:#?}");
        a
    }
}

/// With `ECHO_GOLDEN_DIR` set, every analysis a test makes is written there as JSON, one file
/// per (trace, thresholds): a refactoring that must not change behaviour runs the tests before
/// and after and compares the two folders byte for byte.
fn dump_golden(text: &str, t: Thresholds, a: &Analysis) {
    use std::hash::{Hash, Hasher};
    let Some(dir) = std::env::var_os("ECHO_GOLDEN_DIR") else {
        return;
    };
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    format!("{t:?}").hash(&mut h);
    let name = format!("{:016x}", h.finish());
    let dir = std::path::Path::new(&dir);
    std::fs::create_dir_all(dir).expect("golden folder");
    let json = serde_json::to_string_pretty(a).expect("analysis serializes");
    // Tests run in parallel and may analyze the same trace: write aside, then rename.
    let tmp = dir.join(format!("{name}.{:?}.tmp", std::thread::current().id()));
    std::fs::write(&tmp, format!("{json}\n")).expect("golden write");
    std::fs::rename(&tmp, dir.join(format!("{name}.json"))).expect("golden rename");
}

/// Issue 24, one cause, one name: for every refused pair, its condition, the summary reason it
/// is counted under, the summary's explanation and remedy, its own remedy and the report's lines
/// all come from one [`Cause`], so they agree.
pub fn assert_causes_agree(a: &Analysis, t: Thresholds) {
    use echo_analyzer::safety::Cause;
    let table = echo_analyzer::report::table(a, "test");
    let mut pairs_by_reason: std::collections::BTreeMap<String, u64> = Default::default();
    for (i, c) in a.candidates.iter().enumerate() {
        let Decision::Rejected {
            condition,
            message,
            reason,
            remedy,
            ..
        } = &c.decision
        else {
            continue;
        };
        let cause = Cause::ALL
            .into_iter()
            .find(|x| x.key() == reason)
            .unwrap_or_else(|| panic!("row {}: no cause named {reason:?}", i + 1));
        assert_eq!(
            cause.condition(),
            Some(*condition),
            "row {}: {message}",
            i + 1
        );
        assert!(
            message.starts_with(&format!("{}: ", condition.as_str())),
            "row {}: the detail starts with its condition: {message}",
            i + 1
        );
        assert_eq!(remedy, &cause.remedy(t), "row {}", i + 1);
        let r = a
            .copies
            .reasons
            .iter()
            .find(|r| &r.reason == reason)
            .unwrap_or_else(|| {
                panic!("row {}: no summary reason {reason}: {:#?}", i + 1, a.copies)
            });
        assert!(
            r.explanation.contains(&cause.explanation(t)),
            "{reason}: {}",
            r.explanation
        );
        assert!(
            r.remedy.contains(&cause.remedy(t)),
            "{reason}: {}",
            r.remedy
        );
        assert!(
            table.contains(&format!("to change ({reason}): {remedy}")),
            "row {}: the report shows the pair's remedy:\n{table}",
            i + 1
        );
        *pairs_by_reason.entry(reason.clone()).or_default() += 1;
    }
    // The summary counts exactly the refused pairs of each pair cause, no other.
    for r in &a.copies.reasons {
        let cause = Cause::ALL.into_iter().find(|x| x.key() == r.reason);
        let cause = cause.unwrap_or_else(|| panic!("summary reason {:?} has no cause", r.reason));
        if cause.condition().is_some() {
            assert_eq!(
                pairs_by_reason.get(&r.reason).copied().unwrap_or(0),
                r.pairs,
                "{}: {:#?}",
                r.reason,
                a.copies
            );
        }
    }
    // Grammar.
    for bad in ["1 copies", "≥ 0 B", " 1 pairs", " 1 members"] {
        assert!(!table.contains(bad), "{bad:?} in\n{table}");
    }
    if table.contains("(reasons above)") {
        assert!(
            table.contains("not in accepted pairs, by reason:"),
            "{table}"
        );
    }
}

/// Issue 16: every rejection has plain words — a sentence that starts with a capital letter, not
/// with the condition's tag, and names the staging or the device buffer of the pair — and the
/// report puts them first, then the creation sites, then the detail.
pub fn assert_plain_words(a: &Analysis) {
    let table = echo_analyzer::report::table(a, "test");
    for (i, c) in a.candidates.iter().enumerate() {
        let Decision::Rejected {
            condition,
            message,
            plain,
            ..
        } = &c.decision
        else {
            continue;
        };
        assert!(
            plain.chars().next().is_some_and(char::is_uppercase),
            "{condition:?} without plain words: {plain:?} (detail: {message})"
        );
        assert!(
            !plain.starts_with(&format!("{}:", condition.as_str())),
            "plain words begin with the tag: {plain}"
        );
        assert!(
            plain.contains(&format!("#{}", c.staging.number))
                || plain.contains(&format!("#{}", c.device.number))
                || *condition == Condition::Evidence,
            "plain words name neither buffer of the pair: {plain}"
        );
        let item = format!("  {}. {plain}\n", i + 1);
        let at = table
            .find(&item)
            .unwrap_or_else(|| panic!("report lacks {item:?}:\n{table}"));
        let rest = &table[at + item.len()..];
        let detail = rest
            .find(&format!("detail: {message}"))
            .expect("detail follows");
        let staging = rest
            .find(&format!("staging buffer #{} (", c.staging.number))
            .expect("the staging buffer's site follows");
        assert!(staging < detail, "sites come before the detail:\n{table}");
        let r = a
            .plan
            .rejected
            .iter()
            .find(|r| r.message == *message)
            .expect("the plan has the rejection");
        assert_eq!(&r.plain, plain, "the plan keeps the plain words");
    }
}

/// The decision for the candidate (staging, device), by buffer handle order of creation.
pub fn decision(a: &Analysis, staging_no: usize, device_no: usize) -> &Decision {
    &a.candidates
        .iter()
        .find(|c| c.staging.number == staging_no && c.device.number == device_no)
        .unwrap_or_else(|| {
            panic!(
                "no candidate #{staging_no}/#{device_no}: {:#?}",
                a.candidates
            )
        })
        .decision
}

/// The group, direction and one-time flag of an accepted pair.
pub fn accepted(d: &Decision) -> (u32, Direction, bool) {
    match d {
        Decision::Accepted {
            group,
            direction,
            one_time,
        } => (*group, *direction, *one_time),
        other => panic!("expected acceptance, got {other:?}"),
    }
}

pub fn rejected(d: &Decision) -> (Condition, Option<u64>, String) {
    match d {
        Decision::Rejected {
            condition,
            event,
            message,
            ..
        } => (*condition, *event, message.clone()),
        other => panic!("expected a rejection, got {other:?}"),
    }
}
