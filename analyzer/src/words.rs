//! Numbers and flags in words: `64 MiB`, `2 copies`, `SRC|STORAGE`. A leaf: it names nothing
//! of the crate, so every part of the analyzer (and the layer, the command line) can write with
//! it without an import circle through the report.

/// `67108864` → `64 MiB`, `1536` → `1.5 KiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else if (v - v.round()).abs() < 0.05 {
        format!("{:.0} {}", v, UNITS[u])
    } else {
        format!("{:.1} {}", v, UNITS[u])
    }
}

/// `1 copy`, `2 copies`.
pub fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The thresholds in words: `2 copies of ≥ 256 KiB`, `1 copy of ≥ 4 KiB`; a zero `min_bytes` is
/// left out (`2 copies`, never `≥ 0 B`).
pub fn copies_of(min_copies: u64, min_bytes: u64) -> String {
    let n = plural(min_copies, "copy", "copies");
    if min_bytes == 0 {
        n
    } else {
        format!("{n} of ≥ {}", human_bytes(min_bytes))
    }
}

/// `VkBufferUsageFlags` in short words: `SRC|STORAGE`.
pub fn usage_names(usage: u32) -> String {
    const NAMES: [(u32, &str); 10] = [
        (0x1, "SRC"),
        (0x2, "DST"),
        (0x4, "UTEXEL"),
        (0x8, "STEXEL"),
        (0x10, "UNIFORM"),
        (0x20, "STORAGE"),
        (0x40, "INDEX"),
        (0x80, "VERTEX"),
        (0x100, "INDIRECT"),
        (0x20000, "ADDRESS"),
    ];
    let mut parts: Vec<String> = Vec::new();
    let mut rest = usage;
    for (bit, name) in NAMES {
        if usage & bit != 0 {
            parts.push(name.into());
            rest &= !bit;
        }
    }
    if rest != 0 {
        parts.push(format!("{rest:#x}"));
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join("|")
    }
}
