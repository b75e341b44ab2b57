//! From an analysis to diagnostics (issue 57): one per creation site of a staging buffer in the
//! program's own code ([`super::sites`]), holding every candidate pair whose staging buffer was
//! created there — what the buffers are, what echo saw them do (the self-copy, its bytes per
//! iteration, the GPU time its copies took in the profiled run where the trace has timestamps),
//! and the change that removes it at the source: for a pair echo accepted, allocating and mapping
//! the device buffer from the DEVICE_LOCAL|HOST_VISIBLE memory type echo saw; for a refused one,
//! the refusal's own "to change" (`vkecho analyze`'s words, docs/rejections.md).

use super::sites::{locate, Classifier, Place, Site};
use echo_analyzer::analysis::{device_indices, Analysis, CandidateRow, Decision};
use echo_analyzer::model::Model;
use echo_analyzer::plan::{Condition, Role};
use echo_analyzer::show::RunView;
use echo_analyzer::timing::human_ns;
use echo_analyzer::topology::flags;
use echo_analyzer::trace::{Event, Trace};
use echo_analyzer::words::{human_bytes, usage_names};
use echo_symbols::Symbolizer;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The one rule `vkecho lint` checks (SARIF `ruleId`, the `[…]` after a warning).
pub const RULE: &str = "uma-self-copy";

/// One diagnostic: a creation site and what was found there.
#[derive(Clone, Debug, Serialize)]
pub struct Diagnostic {
    pub rule: String,
    /// Always `warning` (`--deny warnings` makes them fail a CI job).
    pub level: String,
    pub location: Place,
    pub message: String,
    pub notes: Vec<Note>,
    /// The candidate pairs whose staging buffer was created here.
    pub pairs: Vec<PairFinding>,
}

/// A `note:` line, with a place when it names one.
#[derive(Clone, Debug, Serialize)]
pub struct Note {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<Place>,
    pub message: String,
}

/// One candidate pair of a diagnostic, as figures.
#[derive(Clone, Debug, Serialize)]
pub struct PairFinding {
    pub device_index: u32,
    /// Buffer numbers (`#n` of `vkecho analyze`) and stable identities.
    pub staging: usize,
    pub device: usize,
    pub staging_key: String,
    pub device_key: String,
    pub role: String,
    pub copies: u64,
    pub bytes: u64,
    pub iterations: u64,
    pub copies_per_iter: f64,
    pub bytes_per_iter: u64,
    /// GPU time of the pair's copies in the profiled run and per iteration (ns), where the
    /// trace has GPU timestamps for them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_ns: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_ns_per_iter: Option<f64>,
    pub accepted: bool,
    /// `vkecho analyze`'s decision column.
    pub decision: String,
    /// The change that removes the copy at the source.
    pub change: String,
}

/// What the diagnostics are built from.
pub struct Inputs<'a> {
    pub trace: &'a Trace,
    pub analysis: &'a Analysis,
    pub sym: &'a Symbolizer,
    pub cls: &'a Classifier,
    /// The run's timeline (per-copy GPU times), when the trace has times.
    pub view: Option<&'a RunView>,
    /// Where split debug files are looked for (for the no-line-information note).
    pub debug_root: String,
}

/// What a device told the trace.
#[derive(Clone, Debug, Default)]
struct DeviceInfo {
    name: String,
    class: String,
    alias_type: Option<u32>,
}

/// What lint knows of one buffer.
struct BufInfo {
    site: Option<Site>,
    /// Its memory's type index, when bound.
    memory_type: Option<u32>,
}

/// The memory types of the trace's memory table (`heaps …; types 0xF@H,…`), their flags.
fn memory_types(table: &str) -> Vec<u32> {
    let Some((_, types)) = table.split_once("types ") else {
        return Vec::new();
    };
    types
        .split(',')
        .filter_map(|t| {
            let f = t.trim().split('@').next()?;
            u32::from_str_radix(f.trim_start_matches("0x"), 16).ok()
        })
        .collect()
}

/// `DEVICE_LOCAL|HOST_VISIBLE|…`, as the Vulkan names read.
pub fn memory_flag_names(f: u32) -> String {
    let names = [
        (flags::DEVICE_LOCAL, "DEVICE_LOCAL"),
        (flags::HOST_VISIBLE, "HOST_VISIBLE"),
        (flags::HOST_COHERENT, "HOST_COHERENT"),
        (flags::HOST_CACHED, "HOST_CACHED"),
        (flags::LAZILY_ALLOCATED, "LAZILY_ALLOCATED"),
        (flags::PROTECTED, "PROTECTED"),
    ];
    let v: Vec<&str> = names
        .iter()
        .filter(|(b, _)| f & b != 0)
        .map(|(_, n)| *n)
        .collect();
    if v.is_empty() {
        "no flags".into()
    } else {
        v.join("|")
    }
}

/// The GPU time (ns) of a pair's copies in the profiled run: the copies with a time of their
/// own (GPU timestamps) between buffers `#s` and `#d`, both ways.
fn pair_gpu_ns(view: &RunView, s: usize, d: usize) -> Option<f64> {
    let (a, b) = (format!("copy #{s} → #{d} ("), format!("copy #{d} → #{s} ("));
    let mut total: Option<f64> = None;
    for sp in &view.spans {
        let measured = sp.timing.starts_with("gpu") && !sp.label.contains("not measured");
        if !matches!(sp.kind.as_str(), "copy" | "elided") || !measured {
            continue;
        }
        if sp.label.contains(&a) || sp.label.contains(&b) {
            if let (Some(t0), Some(t1)) = (sp.t0, sp.t1) {
                *total.get_or_insert(0.0) += (t1 - t0).max(0.0);
            }
        }
    }
    total
}

/// `1 copy`, `1.5 copies`.
fn per_iteration(x: f64) -> String {
    if (x - x.round()).abs() < 0.05 {
        plural(x.round() as u64, "copy", "copies")
    } else {
        format!("{x:.1} copies")
    }
}

fn role_verb(r: Role) -> &'static str {
    match r {
        Role::Upload => "is copied into",
        Role::Readback => "receives copies of",
        Role::Both => "is copied to and from",
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Build the diagnostics, sorted by place. Pairs refused only for the thresholds are left out
/// (the second value counts them).
pub fn build(inp: &Inputs) -> (Vec<Diagnostic>, usize) {
    let trace = inp.trace;
    let devices = device_indices(trace);
    // Every buffer of every device, its frames and memory type.
    let mut index: BTreeMap<(u32, usize), usize> = BTreeMap::new();
    let mut stacks = Vec::new();
    let mut mem_types = Vec::new();
    for &d in &devices {
        let sub;
        let t = if devices.len() > 1 {
            sub = trace.for_device(d);
            &sub
        } else {
            trace
        };
        let m = Model::build(t);
        for b in &m.buffers {
            index.insert((d, b.number), stacks.len());
            stacks.push(inp.sym.source_frames(&b.stack));
            mem_types.push(b.bind.as_ref().map(|x| m.memories[x.memory].type_index));
        }
    }
    let sites = locate(&stacks, inp.cls);
    let bufs: Vec<BufInfo> = sites
        .into_iter()
        .zip(mem_types)
        .map(|(site, memory_type)| BufInfo { site, memory_type })
        .collect();
    let mut dev_info: BTreeMap<u32, DeviceInfo> = BTreeMap::new();
    for r in &trace.records {
        if let Event::DeviceCreate {
            class,
            alias_type,
            device_index,
            name,
            ..
        } = &r.event
        {
            dev_info.insert(
                *device_index,
                DeviceInfo {
                    name: name.clone(),
                    class: class.clone(),
                    alias_type: *alias_type,
                },
            );
        }
    }
    // The header holds one memory table: with several devices it may be another device's.
    let types = if devices.len() <= 1 {
        memory_types(&trace.header.context.memory_table)
    } else {
        Vec::new()
    };
    let exe = trace.header.context.exe_path.clone();
    let unknown = Place {
        file: None,
        line: None,
        column: None,
        function: None,
        module: exe.rsplit('/').next().unwrap_or(&exe).to_string(),
        module_path: Some(exe.clone()).filter(|e| !e.is_empty()),
        offset: 0,
        symbol_offset: None,
    };
    let one_device = devices.len() <= 1;

    // Group the rows by the staging buffer's site: its file, line and column (two calls on one
    // line are one site), else its return address.
    type SiteKey = (Option<String>, Option<u32>, Option<u32>, String);
    let mut by_site: BTreeMap<SiteKey, (Place, Vec<&CandidateRow>)> = BTreeMap::new();
    let mut below = 0;
    for c in &inp.analysis.candidates {
        if matches!(
            c.decision,
            Decision::Rejected {
                condition: Condition::Threshold,
                ..
            }
        ) {
            below += 1;
            continue;
        }
        let place = index
            .get(&(c.device_index, c.staging.number))
            .and_then(|&i| bufs[i].site.as_ref())
            .map(|s| s.place.clone())
            .unwrap_or_else(|| unknown.clone());
        let key = (
            place.file.clone(),
            place.line,
            place.column,
            if place.has_line() {
                String::new()
            } else {
                format!("{}+{:#x}", place.module, place.offset)
            },
        );
        by_site
            .entry(key)
            .or_insert_with(|| (place, Vec::new()))
            .1
            .push(c);
    }

    let site_of = |c: &CandidateRow, n: usize| -> Option<&Site> {
        index
            .get(&(c.device_index, n))
            .and_then(|&i| bufs[i].site.as_ref())
    };
    let mut out = Vec::new();
    for (_, (place, rows)) in by_site {
        let dev = dev_info
            .get(&rows[0].device_index)
            .cloned()
            .unwrap_or_default();
        let name = if dev.name.is_empty() {
            "this device".to_string()
        } else {
            dev.name.clone()
        };
        // Buffer numbers are per device: a trace of several names the device.
        let device_words = if one_device {
            format!("{name}, a unified-memory device ({})", dev.class)
        } else {
            format!(
                "device {} ({name}), a unified-memory device ({})",
                rows[0].device_index, dev.class
            )
        };
        let copies: u64 = rows.iter().map(|c| c.copies).sum();
        let bytes: u64 = rows.iter().map(|c| c.bytes).sum();
        let message = if let [c] = rows.as_slice() {
            format!(
                "staging buffer #{} ({}, {}) {} device buffer #{}: {} per iteration ({} in the profiled run) moved from DRAM to the same DRAM on {device_words}",
                c.staging.number,
                human_bytes(c.staging.size),
                usage_names(c.staging.usage),
                role_verb(c.role),
                c.device.number,
                human_bytes(c.bytes_per_iter),
                plural(c.copies, "copy", "copies"),
            )
        } else {
            let devs: BTreeSet<usize> = rows.iter().map(|c| c.device.number).collect();
            let devs: Vec<String> = devs.iter().map(|d| format!("#{d}")).collect();
            let verb = if rows.iter().all(|c| c.role == Role::Upload) {
                "are copied into"
            } else if rows.iter().all(|c| c.role == Role::Readback) {
                "receive copies of"
            } else {
                "are copied to or from"
            };
            format!(
                "{} staging buffers created here {verb} device buffer{} {}: {} of {} in the profiled run moved from DRAM to the same DRAM on {device_words}",
                rows.len(),
                if devs.len() == 1 { "" } else { "s" },
                devs.join(", "),
                plural(copies, "copy", "copies"),
                human_bytes(bytes),
            )
        };
        // Each row's figures, decision and change; rows alike (same device buffer, direction,
        // decision and change: a staging buffer made afresh per call) share their notes.
        let mut pairs = Vec::new();
        let mut verdicts = Vec::new();
        for c in &rows {
            let gpu_ns = inp
                .view
                .filter(|_| one_device)
                .and_then(|v| pair_gpu_ns(v, c.staging.number, c.device.number));
            let (accepted, verdict, change) = match &c.decision {
                Decision::Accepted {
                    group, direction, ..
                } => {
                    let dmem = index
                        .get(&(c.device_index, c.device.number))
                        .and_then(|&i| bufs[i].memory_type);
                    (
                        true,
                        format!(
                            "echo removes these copies when the program runs under it (group {group}, {}); everywhere else the program still makes them",
                            echo_analyzer::plan::direction_words(*direction)
                        ),
                        accepted_change(c, dmem, dev.alias_type, &types),
                    )
                }
                Decision::Rejected {
                    message,
                    plain,
                    reason,
                    remedy,
                    ..
                } => (
                    false,
                    format!(
                        "echo keeps these copies ({}): {}",
                        echo_analyzer::report::decision(c),
                        if plain.is_empty() { message } else { plain }
                    ),
                    if remedy.is_empty() {
                        format!("to change ({reason}): see docs/rejections.md")
                    } else {
                        format!("to change ({reason}): {remedy}")
                    },
                ),
            };
            verdicts.push(verdict);
            pairs.push(PairFinding {
                device_index: c.device_index,
                staging: c.staging.number,
                device: c.device.number,
                staging_key: c.staging.key.to_string(),
                device_key: c.device.key.to_string(),
                role: echo_analyzer::plan::role_words(c.role).into(),
                copies: c.copies,
                bytes: c.bytes,
                iterations: c.iterations,
                copies_per_iter: c.copies_per_iter,
                bytes_per_iter: c.bytes_per_iter,
                gpu_ns,
                gpu_ns_per_iter: gpu_ns.map(|t| t / c.iterations.max(1) as f64),
                accepted,
                decision: echo_analyzer::report::decision(c),
                change,
            });
        }
        let mut clusters: Vec<Vec<usize>> = Vec::new();
        for i in 0..rows.len() {
            let alike = |j: usize| {
                let (a, b) = (rows[i], rows[j]);
                a.device_index == b.device_index
                    && a.device.number == b.device.number
                    && a.role == b.role
                    && verdicts[i] == verdicts[j]
                    && pairs[i].change == pairs[j].change
            };
            match clusters.iter_mut().find(|k| alike(k[0])) {
                Some(k) => k.push(i),
                None => clusters.push(vec![i]),
            }
        }
        let mut notes = Vec::new();
        let mut seen_devices = BTreeSet::new();
        let mut shown_chains = BTreeSet::new();
        for k in &clusters {
            let c = rows[k[0]];
            let gpu: Option<f64> = k.iter().map(|&i| pairs[i].gpu_ns).sum();
            let what = if let [i] = k.as_slice() {
                let p = &pairs[*i];
                let time = match (p.gpu_ns, p.gpu_ns_per_iter) {
                    (Some(t), Some(it)) if c.iterations > 1 => format!(
                        "; its copies took {} of GPU time in the profiled run ({} per iteration)",
                        human_ns(t),
                        human_ns(it)
                    ),
                    (Some(t), _) => format!(
                        "; its copies took {} of GPU time in the profiled run",
                        human_ns(t)
                    ),
                    _ => String::new(),
                };
                format!(
                    "staging buffer #{} ({}, {}) {} device buffer #{} ({}, {}): {} per iteration, {} per iteration ({} of {} in the profiled run){time}",
                    c.staging.number,
                    human_bytes(c.staging.size),
                    usage_names(c.staging.usage),
                    role_verb(c.role),
                    c.device.number,
                    human_bytes(c.device.size),
                    usage_names(c.device.usage),
                    per_iteration(c.copies_per_iter),
                    human_bytes(c.bytes_per_iter),
                    plural(c.copies, "copy", "copies"),
                    human_bytes(c.bytes),
                )
            } else {
                let nums: Vec<String> = k
                    .iter()
                    .map(|&i| format!("#{}", rows[i].staging.number))
                    .collect();
                let sizes: BTreeSet<u64> = k.iter().map(|&i| rows[i].staging.size).collect();
                let size = match (sizes.first(), sizes.last()) {
                    (Some(a), Some(b)) if a == b => format!("each {}", human_bytes(*a)),
                    (Some(a), Some(b)) => format!("{} to {}", human_bytes(*a), human_bytes(*b)),
                    _ => String::new(),
                };
                let n_copies: u64 = k.iter().map(|&i| rows[i].copies).sum();
                let n_bytes: u64 = k.iter().map(|&i| rows[i].bytes).sum();
                let per_sub = n_bytes / k.iter().map(|&i| rows[i].iterations).sum::<u64>().max(1);
                format!(
                    "staging buffers {} ({size}, {}) {} device buffer #{} ({}, {}): {} of {} in the profiled run, {} per submission that copies{}",
                    nums.join(", "),
                    usage_names(c.staging.usage),
                    role_verb(c.role).replace("is ", "are ").replace("receives", "receive"),
                    c.device.number,
                    human_bytes(c.device.size),
                    usage_names(c.device.usage),
                    plural(n_copies, "copy", "copies"),
                    human_bytes(n_bytes),
                    human_bytes(per_sub),
                    match gpu {
                        Some(t) => format!("; their copies took {} of GPU time in the profiled run", human_ns(t)),
                        None => String::new(),
                    }
                )
            };
            notes.push(Note {
                location: None,
                message: what,
            });
            if seen_devices.insert((c.device_index, c.device.number)) {
                if let Some(ds) = site_of(c, c.device.number) {
                    notes.push(Note {
                        location: Some(ds.place.clone()),
                        message: format!(
                            "device buffer #{} ({}, {}) is created here",
                            c.device.number,
                            human_bytes(c.device.size),
                            usage_names(c.device.usage)
                        ),
                    });
                }
            }
            if let Some(st) = site_of(c, c.staging.number) {
                if !st.helpers.is_empty() && shown_chains.insert(st.helpers.clone()) {
                    let chain: Vec<String> = st.helpers.iter().map(Place::describe).collect();
                    notes.push(Note {
                        location: None,
                        message: format!(
                            "staging buffer #{} is created through {}",
                            c.staging.number,
                            chain.join(" ← ")
                        ),
                    });
                }
            }
            notes.push(Note {
                location: None,
                message: verdicts[k[0]].clone(),
            });
            notes.push(Note {
                location: None,
                message: pairs[k[0]].change.clone(),
            });
            if pairs[k[0]].accepted && made_by_vma(site_of(c, c.device.number)) {
                notes.push(Note {
                    location: None,
                    message: vma_note(c.role),
                });
            }
        }
        // Library frames inside the program's call (of the first row's staging buffer; the
        // others at this site share the place).
        if let Some(s) = site_of(rows[0], rows[0].staging.number) {
            if let Some(lib) = s.library.last() {
                notes.push(Note {
                    location: Some(lib.clone()),
                    message: format!(
                        "the program's call reaches vkCreateBuffer through library code: {}{}",
                        if lib.has_line() {
                            lib.name()
                        } else {
                            lib.describe()
                        },
                        if s.library.len() > 1 {
                            format!(", which calls it in {}", s.library[0].describe())
                        } else {
                            String::new()
                        }
                    ),
                });
            }
            if s.no_own_frame {
                notes.push(Note {
                    location: None,
                    message: "no frame of its creation stack is in the program's own code (all are library code, see --library)".into(),
                });
            }
        }
        if !place.has_line() {
            notes.push(Note {
                location: None,
                message: no_lines_note(&place, &inp.debug_root),
            });
        }
        out.push(Diagnostic {
            rule: RULE.into(),
            level: "warning".into(),
            location: place,
            message,
            notes,
            pairs,
        });
    }
    (out, below)
}

/// The change for an accepted pair: allocate and map the device buffer from the device-local,
/// host-visible type echo shares it in, and drop the staging buffer and its copies.
fn accepted_change(
    c: &CandidateRow,
    device_mem: Option<u32>,
    alias: Option<u32>,
    types: &[u32],
) -> String {
    let dl_hv = flags::DEVICE_LOCAL | flags::HOST_VISIBLE;
    let flags_of = |t: u32| types.get(t as usize).copied();
    let access = match c.role {
        Role::Upload => "write its input there directly instead of into this staging buffer",
        Role::Readback => "read its result there directly instead of from this staging buffer",
        Role::Both => {
            "write and read its bytes there directly instead of through this staging buffer"
        }
    };
    let keep = "keep the staging path for devices without a DEVICE_LOCAL|HOST_VISIBLE memory type (discrete GPUs; where every memory type with flags is DEVICE_LOCAL and one is HOST_VISIBLE, the device is unified memory)";
    let already = device_mem.and_then(|t| flags_of(t).map(|f| (t, f)));
    if let Some((t, f)) = already.filter(|(_, f)| f & dl_hv == dl_hv) {
        return format!(
            "to change: device buffer #{} already lives in memory type {t} ({}), which the host can map on this device: map it, {access}, and drop the staging buffer and its copies; {keep}",
            c.device.number,
            memory_flag_names(f)
        );
    }
    let ty = match alias {
        Some(t) => match flags_of(t) {
            Some(f) => format!(
                "memory type {t} ({}, the type echo shares it in)",
                memory_flag_names(f)
            ),
            None => {
                format!("memory type {t} (DEVICE_LOCAL|HOST_VISIBLE, the type echo shares it in)")
            }
        },
        None => "a DEVICE_LOCAL|HOST_VISIBLE memory type".into(),
    };
    format!(
        "to change: on a unified-memory device allocate device buffer #{} from {ty} and map it, {access}, and drop the staging buffer and its copies; {keep}",
        c.device.number
    )
}

/// Whether a buffer was created by the Vulkan Memory Allocator (`vmaCreateBuffer` among the
/// library frames of its site).
fn made_by_vma(site: Option<&Site>) -> bool {
    site.is_some_and(|s| {
        s.library.iter().any(|p| {
            p.function
                .as_deref()
                .is_some_and(|f| f.starts_with("vmaCreateBuffer"))
        })
    })
}

/// The same change in VMA's terms (its documentation, "Advanced data uploading").
fn vma_note(role: Role) -> String {
    let access = match role {
        Role::Upload => "VMA_ALLOCATION_CREATE_HOST_ACCESS_SEQUENTIAL_WRITE_BIT",
        Role::Readback | Role::Both => "VMA_ALLOCATION_CREATE_HOST_ACCESS_RANDOM_BIT",
    };
    format!(
        "with VMA: create the device buffer with VMA_MEMORY_USAGE_AUTO and {access} | VMA_ALLOCATION_CREATE_HOST_ACCESS_ALLOW_TRANSFER_INSTEAD_BIT | VMA_ALLOCATION_CREATE_MAPPED_BIT; where vmaGetAllocationMemoryProperties says HOST_VISIBLE, use its mapping and skip the staging buffer (VMA's \"Advanced data uploading\")"
    )
}

/// How to get file and line for a place that has none.
fn no_lines_note(p: &Place, debug_root: &str) -> String {
    let module = p.module_base();
    let what = if p.function.is_some() {
        "has a symbol table but no line information"
    } else {
        "has neither line information nor a symbol table (it is stripped, or its file is not where the trace says)"
    };
    format!(
        "{module} {what}: to see the file and line, build it with `-g` (C, C++) or `debug = \"line-tables-only\"` (or `debug = 1`) in its Cargo profile (Rust), or keep its debug info in a split file (`objcopy --only-keep-debug`, Debian's -dbgsym packages) under {debug_root}/.build-id (`--debug-dir DIR`) or beside it through `.gnu_debuglink`, then run `vkecho lint` again"
    )
}

/// The diagnostics as compilers print them: `place: warning: … [rule]`, then `note:` lines
/// (`place: note:` where a note names a place).
pub fn text(diags: &[Diagnostic]) -> String {
    let mut s = String::new();
    for d in diags {
        s.push_str(&format!(
            "{}: {}: {} [{}]\n",
            d.location.prefix(),
            d.level,
            d.message,
            d.rule
        ));
        for n in &d.notes {
            match &n.location {
                Some(p) => s.push_str(&format!("{}: note: {}\n", p.prefix(), n.message)),
                None => s.push_str(&format!("note: {}\n", n.message)),
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(file: Option<&str>, line: Option<u32>, func: &str) -> Place {
        Place {
            file: file.map(str::to_string),
            line,
            column: line.map(|_| 9),
            function: Some(func.into()),
            module: "app".into(),
            module_path: Some("/home/me/app".into()),
            offset: 0x1234,
            symbol_offset: file.is_none().then_some(0x4f),
        }
    }

    /// The compiler form: `place: warning: … [rule]`, then `note:` lines, located ones with
    /// their place; without lines, `module(function+0xoff)` and how to get them.
    #[test]
    fn text_is_the_compiler_form() {
        let at = place(Some("src/main.c"), Some(42), "upload");
        let dev = place(Some("src/main.c"), Some(40), "upload");
        let d = Diagnostic {
            rule: RULE.into(),
            level: "warning".into(),
            location: at,
            message: "staging buffer #1 is copied into device buffer #2".into(),
            notes: vec![
                Note {
                    location: Some(dev),
                    message: "device buffer #2 is created here".into(),
                },
                Note {
                    location: None,
                    message: "to change: map it".into(),
                },
            ],
            pairs: Vec::new(),
        };
        assert_eq!(
            text(&[d]),
            "src/main.c:42:9: warning: staging buffer #1 is copied into device buffer #2 [uma-self-copy]\n\
             src/main.c:40:9: note: device buffer #2 is created here\n\
             note: to change: map it\n"
        );
        let bare = place(None, None, "upload_run");
        assert_eq!(bare.prefix(), "app(upload_run+0x4f)");
        let n = no_lines_note(&bare, "/usr/lib/debug");
        assert!(n.starts_with("app has a symbol table but no line information"));
        assert!(n.contains("`-g`") && n.contains("/usr/lib/debug/.build-id"));
    }

    #[test]
    fn memory_table_and_flags_read() {
        let t = "heaps 4156002304/0x1; types 0xf@0,0x7@0";
        assert_eq!(memory_types(t), vec![0xf, 0x7]);
        assert_eq!(memory_types(""), Vec::<u32>::new());
        assert_eq!(
            memory_flag_names(0xf),
            "DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT|HOST_CACHED"
        );
    }
}
