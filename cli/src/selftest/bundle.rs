//! The report bundle, `selftest-<device>-<date>.tar.gz`: every file of the selftest's work
//! directory (its own traces, plans, statistics, pages, logs, results), with no home-directory
//! path in any of them, as one gzip-compressed tar (`crate::report::archive`).

use std::path::Path;

/// The bundle's file name: `selftest-<device>-<YYYYMMDD-HHMMSS>.tar.gz` (UTC).
pub fn file_name(device: &str, unix: u64) -> String {
    format!("selftest-{}-{}.tar.gz", slug(device), date(unix))
}

/// A device name as a file-name part: lower-case letters, digits and single dashes, at most 40
/// characters ("llvmpipe (LLVM 15.0.6, 256 bits)" → "llvmpipe-llvm-15-0-6-256-bits").
pub fn slug(name: &str) -> String {
    let mut s = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.ends_with('-') && !s.is_empty() {
            s.push('-');
        }
    }
    let mut s: String = s.trim_end_matches('-').chars().take(40).collect();
    while s.ends_with('-') {
        s.pop();
    }
    if s.is_empty() {
        "device".into()
    } else {
        s
    }
}

/// `YYYYMMDD-HHMMSS` of a Unix time, UTC (days to a civil date: H. Hinnant's algorithm).
pub fn date(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// What a path in the bundle's text becomes.
pub struct Redact {
    /// (text to find, replacement), longest first.
    pairs: Vec<(String, String)>,
}

impl Redact {
    /// The selftest's work directory reads `<selftest>`, the user's home `~`; any other
    /// `/home/<name>` or `/root` path reads `~<name>` or `~root`.
    pub fn new(work: &Path, home: Option<&str>) -> Redact {
        let mut pairs = vec![(work.display().to_string(), "<selftest>".to_string())];
        if let Ok(c) = std::fs::canonicalize(work) {
            pairs.push((c.display().to_string(), "<selftest>".into()));
        }
        if let Some(h) = home
            .map(|h| h.trim_end_matches('/'))
            .filter(|h| h.len() > 1)
        {
            pairs.push((h.to_string(), "~".into()));
            if let Ok(c) = std::fs::canonicalize(h) {
                pairs.push((c.display().to_string(), "~".into()));
            }
        }
        pairs.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
        pairs.dedup();
        Redact { pairs }
    }

    pub fn text(&self, s: &str) -> String {
        let mut s = s.to_string();
        for (from, to) in &self.pairs {
            if !from.is_empty() && s.contains(from.as_str()) {
                s = s.replace(from.as_str(), to);
            }
        }
        other_homes(&s)
    }

    /// A file's bytes: text is redacted, anything else is left out (`None`).
    pub fn bytes(&self, b: &[u8]) -> Option<Vec<u8>> {
        std::str::from_utf8(b)
            .ok()
            .map(|t| self.text(t).into_bytes())
    }
}

/// `/home/<name>…` → `~<name>…` and `/root/…` → `~root/…` where a path starts (at the start of
/// the text or after a character that cannot be part of a path name).
fn other_homes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let b = s.as_bytes();
    while i < s.len() {
        let starts = i == 0 || !is_name_byte(b[i - 1]);
        if starts && s[i..].starts_with("/home/") {
            out.push('~');
            i += "/home/".len();
            continue;
        }
        if starts
            && s[i..].starts_with("/root")
            && s[i + 5..]
                .chars()
                .next()
                .is_none_or(|c| c == '/' || !is_name_byte(c as u8))
        {
            out.push_str("~root");
            i += "/root".len();
            continue;
        }
        let c = s[i..].chars().next().expect("in bounds");
        out.push(c);
        i += c.len_utf8();
    }
    out
}

fn is_name_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"._-~/".contains(&c)
}

/// Every regular file under `dir`, as (path relative to it, bytes), sorted; outputs (`*.out`)
/// are left out.
pub fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() && p.extension().is_none_or(|x| x != "out") {
                if let (Ok(rel), Ok(bytes)) = (p.strip_prefix(dir), std::fs::read(&p)) {
                    out.push((rel.display().to_string(), bytes));
                }
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_dates() {
        assert_eq!(
            slug("llvmpipe (LLVM 15.0.6, 256 bits)"),
            "llvmpipe-llvm-15-0-6-256-bits"
        );
        assert_eq!(
            slug("NVIDIA Jetson Nano (Tegra X1, L4T 32.7)"),
            "nvidia-jetson-nano-tegra-x1-l4t-32-7"
        );
        assert_eq!(slug("  ()"), "device");
        assert_eq!(date(0), "19700101-000000");
        assert_eq!(date(951_782_400 + 3661), "20000229-010101");
        assert_eq!(date(1_796_515_200), "20261206-000000");
        assert_eq!(
            file_name("SwiftShader Device (LLVM 10.0.0)", 1_796_515_200),
            "selftest-swiftshader-device-llvm-10-0-0-20261206-000000.tar.gz"
        );
    }

    #[test]
    fn home_directories_do_not_reach_the_bundle() {
        let r = Redact::new(Path::new("/tmp/vkecho-selftest-1"), Some("/home/ada/"));
        assert_eq!(
            r.text("exe /home/ada/bin/vkecho, trace /tmp/vkecho-selftest-1/device-0/t.jsonl"),
            "exe ~/bin/vkecho, trace <selftest>/device-0/t.jsonl"
        );
        assert_eq!(
            r.text("\"/home/bob/.cargo/x.rs\" and /root/.cargo/y.rs and /rooted and a/home/x"),
            "\"~bob/.cargo/x.rs\" and ~root/.cargo/y.rs and /rooted and a/home/x"
        );
        assert_eq!(r.bytes(&[0xff, 0xfe]), None, "not text: left out");
    }
}
