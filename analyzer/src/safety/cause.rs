//! One cause, one name (issue 24): why a candidate pair was refused, or why copies made no pair.
//!
//! Every refusal carries a [`Cause`]; the pair's [`Condition`], the key of the by-reason copy
//! summary (`vkecho analyze`'s "copies:" lines), the summary's explanation and the remedy all come
//! from it, so they cannot disagree. The pair's sentences (`message`, `plain`) are written where
//! the evidence is, with the cause's condition as the message's tag. docs/rejections.md shows
//! [`markdown_table`] (a test keeps the two the same).

use crate::plan::{Condition, Thresholds};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// Too few copies, or too small ones, for the thresholds.
    Threshold,
    /// A single transfer through a staging buffer that cannot be bound into the device
    /// buffer's memory (sub-allocated, or exchanging data with other buffers too).
    OneTime,
    Reuse,
    Offset,
    /// The GPU would read other bytes than in the original program.
    S1GpuRead,
    /// The host would read other bytes than in the original program.
    S1HostRead,
    S2,
    /// A device address was taken.
    S3Address,
    /// Sparse, protected, capture-replay or external buffer or memory.
    S3Special,
    /// Host memory the application imported from its own pointer.
    HostImport,
    /// The shared range would not stay valid while both buffers live.
    S4,
    /// A use of a buffer the layer cannot follow.
    CompatUntracked,
    /// A command echo steps aside from (the registry's classification) reaches a buffer of the
    /// pair, its memory, or everything.
    Aside,
    /// Another buffer or an image is bound over a buffer's bytes (memory aliasing).
    SharedBytes,
    /// A buffer a later run could not recognise (created on several threads alike).
    CompatIdentity,
    /// A buffer too small to have been followed while profiling.
    CompatAnonymous,
    /// Memory type, alignment, size, binding or map layout do not allow the sharing.
    CompatMemory,
    /// The device buffer already shares its memory with other staging buffers.
    CompatTaken,
    /// The application holds a map of the staging allocation, made before the device buffer was
    /// bound, when the two would be bound together (issue 36).
    CompatMapped,
    /// The trace cannot vouch that it holds every host access (validation off or lost, cut).
    Evidence,
    /// Host-access validation watched only some windows.
    EvidenceSampled,
    /// Copies between two buffers the host never maps.
    GpuOnly,
    HostBoth,
    HostNeither,
    NoEvidence,
    SmallUnwatched,
    SameBuffer,
    UnknownBuffer,
}

impl Cause {
    pub const ALL: [Cause; 28] = [
        Cause::Threshold,
        Cause::OneTime,
        Cause::Reuse,
        Cause::Offset,
        Cause::S1GpuRead,
        Cause::S1HostRead,
        Cause::S2,
        Cause::S3Address,
        Cause::S3Special,
        Cause::HostImport,
        Cause::S4,
        Cause::CompatUntracked,
        Cause::Aside,
        Cause::SharedBytes,
        Cause::CompatIdentity,
        Cause::CompatAnonymous,
        Cause::CompatMemory,
        Cause::CompatTaken,
        Cause::CompatMapped,
        Cause::Evidence,
        Cause::EvidenceSampled,
        Cause::GpuOnly,
        Cause::HostBoth,
        Cause::HostNeither,
        Cause::NoEvidence,
        Cause::SmallUnwatched,
        Cause::SameBuffer,
        Cause::UnknownBuffer,
    ];

    /// The condition of a refused pair; `None` for copies that made no pair.
    pub fn condition(self) -> Option<Condition> {
        use Cause::*;
        Some(match self {
            Threshold | OneTime => Condition::Threshold,
            Reuse => Condition::Reuse,
            Offset => Condition::Offset,
            S1GpuRead | S1HostRead => Condition::S1,
            S2 => Condition::S2,
            S3Address | S3Special | HostImport => Condition::S3,
            S4 => Condition::S4,
            CompatUntracked | Aside | SharedBytes | CompatIdentity | CompatAnonymous
            | CompatMemory | CompatTaken | CompatMapped => Condition::Compat,
            Evidence | EvidenceSampled => Condition::Evidence,
            GpuOnly | HostBoth | HostNeither | NoEvidence | SmallUnwatched | SameBuffer
            | UnknownBuffer => return None,
        })
    }

    /// The key of the by-reason copy summary (`ReasonSummary::reason`).
    pub fn key(self) -> &'static str {
        use Cause::*;
        match self {
            Threshold => "threshold",
            OneTime => "one_time",
            Reuse => "reuse",
            Offset => "offset",
            S1GpuRead => "S1",
            S1HostRead => "S1_host_read",
            S2 => "S2",
            S3Address => "S3",
            S3Special => "S3_special",
            HostImport => "host_import",
            S4 => "S4",
            CompatUntracked => "compat_untracked",
            Aside => "aside",
            SharedBytes => "shared_bytes",
            CompatIdentity => "compat_identity",
            CompatAnonymous => "compat_anonymous",
            CompatMemory => "compat",
            CompatTaken => "compat_taken",
            CompatMapped => "compat_mapped",
            Evidence => "evidence",
            EvidenceSampled => "evidence_sampled",
            GpuOnly => "gpu_only",
            HostBoth => "host_both",
            HostNeither => "host_neither",
            NoEvidence => "no_evidence",
            SmallUnwatched => "small_unwatched",
            SameBuffer => "same_buffer",
            UnknownBuffer => "unknown_buffer",
        }
    }

    /// What every pair (or copy) of this cause has in common, for people.
    pub fn explanation(self, t: Thresholds) -> String {
        use Cause::*;
        match self {
            Threshold => format!(
                "{} between the pair, and not one upload or download of at least that size after which the staging buffer is destroyed",
                need(t)
            ),
            OneTime => "single transfers (one upload or download, then the staging buffer is destroyed) through a staging buffer that is sub-allocated or exchanges data with other buffers, so it cannot be bound into the device buffer's memory".into(),
            Reuse => "a shared staging buffer feeds several destinations through the same bytes (a staging ring): its bytes are needed by more than one partner".into(),
            Offset => "the copies between a pair move the bytes at a different offset from one copy to the next (a ring of staging slots)".into(),
            S1GpuRead => "sharing memory, a GPU command would read other bytes of the device buffer than it reads in the original program".into(),
            S1HostRead => "sharing memory, the host would read other bytes of a staging buffer than it reads in the original program: it expects the buffers to hold different data at once".into(),
            S2 => "the host touches the staging buffer while GPU work using the pair may still be running".into(),
            S3Address => "the application took the device address of a buffer of the pair: code holding it can tell the two buffers apart".into(),
            S3Special => "a buffer of the pair is sparse, protected or capture-replay, or lives in external memory another process or API may see".into(),
            HostImport => "a buffer lives in host memory the application imported from its own pointer (VK_EXT_external_memory_host); the host reads and writes it through that pointer, which echo does not see".into(),
            S4 => "the memory range both buffers would share does not stay valid while both live (freed early, or re-bound by a sub-allocator)".into(),
            CompatUntracked => "a buffer of the pair is used in a way the layer cannot follow (descriptor buffer, acceleration structure, …)".into(),
            Aside => "the program uses a buffer of the pair, or its memory, through a command echo does not follow (the Vulkan registry says it can reach memory; echo steps aside from what it names, or from every buffer when it runs work over bound state)".into(),
            SharedBytes => "another buffer or an image is bound over the bytes of a buffer of the pair (memory aliasing): it reads or writes them where echo does not look".into(),
            CompatIdentity => "buffers like one of the pair (same call site, size and usage) are created on several threads, so a later run cannot tell which one is which".into(),
            CompatAnonymous => "a buffer of the pair was smaller than min_bytes while profiling, so it has no identity a later run could recognise".into(),
            CompatMemory => "the two buffers' memory does not allow the sharing: memory type, alignment, size, the map layout, or the order in which they are bound".into(),
            CompatTaken => "the device buffer already shares its memory with other staging buffers, and this one cannot join them".into(),
            CompatMapped => format!("the application maps the staging buffer's allocation before the device buffer is bound and still holds that mapping when the two would share memory: {}; the group's other members are not affected", crate::apply::MAPPED_BY_APPLICATION),
            Evidence => "the trace cannot vouch that it holds every host access to the pair (host-access validation off or lost, or the trace cut short), so S1/S2 cannot be checked (fail closed)".into(),
            EvidenceSampled => "host-access validation watched the staging buffer only in some windows (validate_sample_every > 1); a window that was not watched cannot accept a pair".into(),
            GpuOnly => "neither side is ever mapped: GPU-to-GPU copies, with no staging buffer to share memory with".into(),
            HostBoth => "both sides are mapped and the host touches both, so neither is only the partner the GPU uses".into(),
            HostNeither => "both sides are mapped and the trace shows no host access to either: no staging behaviour was seen".into(),
            NoEvidence => "both sides are mapped, but the host's accesses to some of their buffers were not observed (not armed while profiling: smaller than the profile's min_bytes, or a trace from a layer that watched only staging buffers copied to or from unmapped ones), so which side is the staging buffer is not known (fail closed)".into(),
            SmallUnwatched => format!(
                "copies smaller than min_bytes={} between mapped buffers whose host accesses were not watched (too small to be armed while profiling): below the thresholds, and which side is the staging buffer is not known",
                t.min_bytes
            ),
            SameBuffer => "copies from a buffer into itself".into(),
            UnknownBuffer => "recorded copies name a buffer the trace does not know (created before tracing began, imported, or made by a layer below); each is explained once in the warnings".into(),
        }
    }

    /// The setting or code change that would change the decision (or why none should). The
    /// summary may add what the trace's numbers suggest after it.
    pub fn remedy(self, t: Thresholds) -> String {
        use Cause::*;
        match self {
            Threshold => "lower min_bytes or min_copies, if transfers that small or that rare are worth sharing memory for — set at analysis (vkecho analyze --min-bytes/--min-copies) and when profiling, so the buffers get identities".into(),
            OneTime => format!(
                "give each such staging buffer its own allocation (code change); or min_copies=1, which tries the device buffer bound into the staging range instead (then the staging range must stay valid while the device buffer is used, S4, and its allocation stays alive) (min_copies is {} now)",
                t.min_copies
            ),
            Reuse => "none as a setting — refusing is correct; a code change that gives each destination its own staging buffer or its own stable sub-range makes each a pair".into(),
            Offset => "a code change that keeps one offset per destination".into(),
            S1GpuRead => "a code change, if the program does not need the device buffer's earlier bytes: copy before every GPU read that expects the host's new bytes; a shader binding that is never read is not a read (echo reflects SPIR-V by instruction), so if the detail names a command that only writes the buffer, say so in an issue".into(),
            S1HostRead => "a code change: the program relies on the two buffers holding different bytes at once; read the staging buffer only after the copy that fills it".into(),
            S2 => "a code change: wait for the submission's fence before the host touches the staging buffer".into(),
            S3Address => "a code change: no device address of a buffer in a pair (vkGetBufferDeviceAddress)".into(),
            S3Special => "none: sparse, protected, capture-replay and external buffers keep their own memory".into(),
            HostImport => "none needed from echo's side: the program already shares that memory with the device".into(),
            S4 => "a code change: keep both buffers' memory alive and the range unshared while both live".into(),
            CompatUntracked => "none while the buffer is used that way: its memory must stay as it is".into(),
            Aside => "none as a setting while the program uses that command; if programs commonly use it, ask for echo to follow it (docs/architecture.md, \"Complete by construction\")".into(),
            SharedBytes => "none as a setting: bytes that two resources share must stay where they are; a code change that gives each resource its own range".into(),
            CompatIdentity => "a code change: create such buffers on one thread, or from different call sites or with different sizes".into(),
            CompatAnonymous => "profile again with min_bytes at most the buffer's size".into(),
            CompatMemory => "none as a setting; the detail names the requirement that fails (a code change: allocate the two buffers compatibly, or bind the staging buffer before the device buffer is first used)".into(),
            CompatTaken => "none as a setting: one device buffer shares its memory with the staging buffers that pass together; give the others their own device buffer".into(),
            CompatMapped => "a code change: bind the device buffer before mapping the staging allocation, or unmap it before the device buffer is bound and map it again after (echo then serves the map from the shared memory and carries what was written before)".into(),
            Evidence => "profile again with validate=true (the default) and a trace_max_bytes large enough for the whole run".into(),
            EvidenceSampled => "profile with validate_sample_every=1 (the default), so every window is watched".into(),
            GpuOnly => "none: these are not staging traffic".into(),
            HostBoth => "a code change in which the host reads and writes only one side of each copy".into(),
            HostNeither => "none if these are GPU-side copies; if the host writes one side, profile a run in which it does (the first writes before a buffer is bound and mapped are not seen)".into(),
            NoEvidence => "profile again with this layer and min_bytes at most the smallest such buffer's size".into(),
            SmallUnwatched => "lower min_bytes when profiling and analyzing, if copies that small are worth sharing memory for".into(),
            SameBuffer => "none: there is no second buffer to share memory with".into(),
            UnknownBuffer => "profile from the program's start, with echo as the layer nearest the application".into(),
        }
    }
}

/// "fewer than min_copies=2 copies of at least min_bytes=262144 (256 KiB)"; a zero `min_bytes`
/// is left out (no "at least 0 B").
fn need(t: Thresholds) -> String {
    let copies = if t.min_copies == 1 { "copy" } else { "copies" };
    if t.min_bytes == 0 {
        format!("fewer than min_copies={} {copies}", t.min_copies)
    } else {
        format!(
            "fewer than min_copies={} {copies} of at least min_bytes={} ({})",
            t.min_copies,
            t.min_bytes,
            crate::words::human_bytes(t.min_bytes)
        )
    }
}

/// docs/rejections.md's table of causes, made from [`Cause`] with the default thresholds.
pub fn markdown_table() -> String {
    let t = Thresholds::default();
    let mut s = String::from(
        "| summary key | pair condition | what the pairs or copies have in common | to change |\n|---|---|---|---|\n",
    );
    for c in Cause::ALL {
        s.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            c.key(),
            c.condition()
                .map_or("(no pair)".to_string(), |x| format!("`{}`", x.as_str())),
            c.explanation(t).replace('|', "\\|"),
            c.remedy(t).replace('|', "\\|")
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_distinct_and_all_is_complete() {
        let mut keys: Vec<&str> = Cause::ALL.iter().map(|c| c.key()).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), Cause::ALL.len());
    }
}
