//! The layer's settings (DESIGN §3) and how they are resolved, as pure functions.
//!
//! Sources, first match wins: environment `VK_ECHO_<NAME>`, then `echo.<name>` in
//! `vk_layer_settings.txt`, then `VkLayerSettingsCreateInfoEXT` from the application. The layer
//! gathers the raw text of each source (`layer/src/settings.rs`) and calls [`resolve`]; `vkecho`
//! uses the same function. An invalid value gives a warning naming the setting and the accepted
//! values, and the default is used.

use crate::topology::TopologyPolicy;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Passthrough everywhere.
    Off,
    /// Record a trace and validate host access.
    Profile,
    /// Apply a plan.
    Enforce,
    /// Profile when no plan exists for this context, enforce when one does.
    #[default]
    Auto,
}

/// What a plan is keyed by (DESIGN §5, issue 16).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ContextMode {
    /// Program, arguments, device and driver: a plan applies only to the argument list it was
    /// profiled with.
    #[default]
    Arguments,
    /// Program (an interpreter's script included), device and driver: a plan applies under other
    /// arguments to the buffers recreated with the same identities; auto mode profiles new
    /// argument lists until two profiles agree, and keeps only groups no profile refused.
    Program,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum LogLevel {
    Error,
    #[default]
    Warn,
    Info,
    Debug,
}

/// Every setting, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub mode: Mode,
    /// Plan file for enforce (default: the plan cache entry for this context under `cache_dir`).
    pub plan: Option<PathBuf>,
    /// Trace file for profile (default: a new file under `cache_dir`).
    pub trace: Option<PathBuf>,
    /// Where auto mode keeps traces and plans.
    pub cache_dir: PathBuf,
    /// Largest size of `cache_dir` after a run (least-recently-used entries are evicted); 0: no
    /// limit.
    pub cache_max_bytes: u64,
    /// Keep auto mode's traces in the cache after their plans are made.
    pub keep_traces: bool,
    /// What a plan is keyed by.
    pub context: ContextMode,
    /// Write statistics as JSON to this file at `vkDestroyDevice` (or at exit).
    pub stats: Option<PathBuf>,
    pub log: LogLevel,
    pub topology: TopologyPolicy,
    /// Smallest copy (bytes) that makes a candidate pair.
    pub min_bytes: u64,
    /// Fewest copies that make a candidate pair.
    pub min_copies: u64,
    /// `host_writes=whole`: the user vouches that the program rewrites every byte of a staging
    /// buffer whenever it writes it (echo cannot see how much of it the host writes). Default
    /// `any`: a host write may have left any byte as it was (issue 45).
    pub whole_host_writes: bool,
    /// Return addresses hashed into a call-site identity.
    pub stack_depth: u32,
    /// Largest trace, in bytes, before it is cut with a truncation marker.
    pub trace_max_bytes: u64,
    /// Profile mode: validate host access to candidate staging buffers with page protection.
    pub validate: bool,
    /// Enforce mode: write-protect aliased staging views while the GPU may use their group, and
    /// split host writes made in that window copy-on-write (`layer/src/enforce/guard.rs`).
    /// `None` (`auto`, the default): on exactly when `context=program`, whose plans apply under
    /// argument lists no profile saw; see [`Settings::guard_on`].
    pub guard: Option<bool>,
    /// Sampled validation: a candidate staging buffer is protected in every window until the
    /// host was seen touching it in this many windows (K); then validation samples.
    pub validate_full_windows: u64,
    /// Sampled validation: after the first K windows, a buffer is protected in one window in N
    /// (picked by a hash of the window number); 1 (the default) protects every window. The
    /// analyzer refuses the pairs of a buffer with a window that was not watched.
    pub validate_sample_every: u64,
}

/// One setting's description, for docs, the manifest and `vkecho doctor`.
pub struct SettingInfo {
    pub name: &'static str,
    pub kind: &'static str,
    pub default: &'static str,
    pub accepted: &'static str,
    pub description: &'static str,
}

pub const SETTINGS: &[SettingInfo] = &[
    SettingInfo { name: "mode", kind: "enum", default: "auto", accepted: "off|profile|enforce|auto", description: "What the layer does: nothing, record a trace, apply a plan, or profile the first run of a program and enforce later ones." },
    SettingInfo { name: "plan", kind: "path", default: "", accepted: "a file path", description: "Plan file for enforce mode (default: the plan cached for this program and device)." },
    SettingInfo { name: "trace", kind: "path", default: "", accepted: "a file path", description: "Trace file for profile mode (default: a new file in cache_dir)." },
    SettingInfo { name: "cache_dir", kind: "path", default: "$XDG_CACHE_HOME/vk-echo", accepted: "a directory path", description: "Where auto mode keeps traces and plans." },
    SettingInfo { name: "cache_max_bytes", kind: "int", default: "268435456", accepted: "a byte count (0: no limit)", description: "Largest size of cache_dir: after a run that wrote into it, the least-recently-used traces and plans are deleted until it fits." },
    SettingInfo { name: "keep_traces", kind: "bool", default: "false", accepted: "true|false", description: "Keep auto mode's traces in cache_dir after their plans are made (false: delete each trace once its plan is written)." },
    SettingInfo { name: "context", kind: "enum", default: "arguments", accepted: "arguments|program", description: "What a plan is keyed by: the program with its exact arguments, or the program alone (a plan then applies under other arguments to buffers recreated with the same call site, size and usage; auto mode profiles new arguments until two profiles agree)." },
    SettingInfo { name: "stats", kind: "path", default: "", accepted: "a file path", description: "Write enforce statistics as JSON to this file when the device is destroyed." },
    SettingInfo { name: "log", kind: "enum", default: "warn", accepted: "error|warn|info|debug", description: "How much the layer writes to stderr." },
    SettingInfo { name: "topology", kind: "enum", default: "strict", accepted: "strict|integrated", description: "Act on uma-strict devices only, or also on integrated devices with a separate host heap (AMD APUs)." },
    SettingInfo { name: "min_bytes", kind: "int", default: "262144", accepted: "a byte count", description: "Smallest copy that makes a candidate pair." },
    SettingInfo { name: "min_copies", kind: "int", default: "2", accepted: "a count >= 1", description: "Fewest copies between two buffers that make a candidate pair." },
    SettingInfo { name: "host_writes", kind: "enum", default: "any", accepted: "any|whole", description: "What a host write to a staging buffer may be: what profile saw (the exact bytes of every store where it records them, x86_64 Linux, for an upload member whose partner the GPU may change; else any part of it), so a member whose device buffer the GPU changed since it was last in step is accepted only when every write covered every byte the GPU changed; or always the whole buffer (you vouch for it; then such members are accepted)." },
    SettingInfo { name: "stack_depth", kind: "int", default: "16", accepted: "1..64", description: "Return addresses hashed into a buffer's call-site identity." },
    SettingInfo { name: "trace_max_bytes", kind: "int", default: "1073741824", accepted: "a byte count", description: "Largest trace before it is cut with a truncation marker." },
    SettingInfo { name: "validate", kind: "bool", default: "true", accepted: "true|false", description: "Profile mode: validate host access to candidate staging buffers with page protection (false: record the trace only)." },
    SettingInfo { name: "guard", kind: "enum", default: "auto", accepted: "auto|on|off", description: "Enforce mode (auto: on exactly when context=program): write-protect aliased staging memory while the GPU may still use it; a host write in that window goes to a private copy the GPU does not see, merged at the next elided copy (needs VK_EXT_external_memory_host; without it guarded groups are refused)." },
    SettingInfo { name: "validate_full_windows", kind: "int", default: "4", accepted: "a count", description: "Profile mode, with validate_sample_every > 1: protect each candidate staging buffer in every window until the host has been seen touching it in this many windows; then validation samples." },
    SettingInfo { name: "validate_sample_every", kind: "int", default: "1", accepted: "a count >= 1", description: "Profile mode: 1 (the default) protects every candidate staging buffer in every window; N > 1 samples (one window in N after the first ones), cheaper, but the analyzer refuses every pair whose buffers were not watched in some window: a window that was not watched never accepts a pair." },
];

impl Settings {
    /// Whether enforce runs guarded: the `guard` setting, or under `auto` exactly when
    /// `context=program` (a plan then applies under argument lists no profile saw, and the guard
    /// keeps a host write inside a GPU window from reaching the bytes the GPU reads).
    pub fn guard_on(&self) -> bool {
        self.guard.unwrap_or(self.context == ContextMode::Program)
    }

    /// The defaults, with `cache_dir` derived from `env` (`XDG_CACHE_HOME`, else `HOME/.cache`).
    pub fn defaults(env: &dyn Fn(&str) -> Option<String>) -> Settings {
        let cache_root = env("XDG_CACHE_HOME")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                env("HOME")
                    .filter(|s| !s.is_empty())
                    .map(|h| PathBuf::from(h).join(".cache"))
            })
            .unwrap_or_else(|| PathBuf::from("/tmp"));
        Settings {
            mode: Mode::Auto,
            plan: None,
            trace: None,
            cache_dir: cache_root.join("vk-echo"),
            cache_max_bytes: 256 << 20,
            keep_traces: false,
            context: ContextMode::Arguments,
            stats: None,
            log: LogLevel::Warn,
            topology: TopologyPolicy::Strict,
            min_bytes: 256 * 1024,
            min_copies: 2,
            whole_host_writes: false,
            stack_depth: 16,
            trace_max_bytes: 1 << 30,
            validate: true,
            guard: None,
            validate_full_windows: 4,
            validate_sample_every: 1,
        }
    }

    /// Name → value, as text, for trace headers and doctor.
    pub fn to_pairs(&self) -> Vec<(String, String)> {
        let p = |o: &Option<PathBuf>| {
            o.as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        };
        vec![
            ("mode".into(), format!("{:?}", self.mode).to_lowercase()),
            ("plan".into(), p(&self.plan)),
            ("trace".into(), p(&self.trace)),
            ("cache_dir".into(), self.cache_dir.display().to_string()),
            ("cache_max_bytes".into(), self.cache_max_bytes.to_string()),
            ("keep_traces".into(), self.keep_traces.to_string()),
            (
                "context".into(),
                format!("{:?}", self.context).to_lowercase(),
            ),
            ("stats".into(), p(&self.stats)),
            ("log".into(), format!("{:?}", self.log).to_lowercase()),
            (
                "topology".into(),
                format!("{:?}", self.topology).to_lowercase(),
            ),
            ("min_bytes".into(), self.min_bytes.to_string()),
            ("min_copies".into(), self.min_copies.to_string()),
            (
                "host_writes".into(),
                if self.whole_host_writes {
                    "whole"
                } else {
                    "any"
                }
                .into(),
            ),
            ("stack_depth".into(), self.stack_depth.to_string()),
            ("trace_max_bytes".into(), self.trace_max_bytes.to_string()),
            ("validate".into(), self.validate.to_string()),
            (
                "guard".into(),
                match self.guard {
                    None => "auto".into(),
                    Some(true) => "on".into(),
                    Some(false) => "off".into(),
                },
            ),
            (
                "validate_full_windows".into(),
                self.validate_full_windows.to_string(),
            ),
            (
                "validate_sample_every".into(),
                self.validate_sample_every.to_string(),
            ),
        ]
    }
}

/// Parse the text of a `vk_layer_settings.txt` file: `key = value` lines, `#` comments.
/// Returns the `echo.<name>` entries as `(name, value)`, in file order; other layers' keys are
/// ignored. Never fails: a malformed line gives a warning.
pub fn parse_settings_file(text: &str, warnings: &mut Vec<String>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            warnings.push(format!(
                "vk_layer_settings.txt line {}: expected 'key = value', ignored",
                i + 1
            ));
            continue;
        };
        if let Some(name) = k.trim().strip_prefix("echo.") {
            out.push((name.trim().to_string(), v.trim().to_string()));
        }
    }
    out
}

/// Where a value came from, for warnings.
#[derive(Clone, Copy, Debug)]
pub enum Source {
    Env,
    File,
    App,
}

impl Source {
    fn describe(self, name: &str) -> String {
        match self {
            Source::Env => format!("VK_ECHO_{}", name.to_uppercase()),
            Source::File => format!("echo.{name} in vk_layer_settings.txt"),
            Source::App => format!("'{name}' in VkLayerSettingsCreateInfoEXT"),
        }
    }
}

/// Resolve every setting. `env` looks up environment variables (the layer passes a lookup that
/// returns nothing for `VK_ECHO_*` in secure-execution processes); `file` holds the `echo.*`
/// entries of the settings file; `app` the application's `VkLayerSettingsCreateInfoEXT` entries
/// for this layer, as text. Returns the settings and the warnings to print.
pub fn resolve(
    env: &dyn Fn(&str) -> Option<String>,
    file: &[(String, String)],
    app: &[(String, String)],
) -> (Settings, Vec<String>) {
    let mut s = Settings::defaults(env);
    let mut warnings = Vec::new();
    for known in file.iter().chain(app.iter()).map(|(n, _)| n) {
        if !SETTINGS.iter().any(|i| i.name == known) {
            warnings.push(format!(
                "unknown setting '{known}' ignored (known: {})",
                names()
            ));
        }
    }
    for info in SETTINGS {
        let name = info.name;
        let found = env(&format!("VK_ECHO_{}", name.to_uppercase()))
            .map(|v| (Source::Env, v))
            .or_else(|| {
                file.iter()
                    .rev()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| (Source::File, v.clone()))
            })
            .or_else(|| {
                app.iter()
                    .rev()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| (Source::App, v.clone()))
            });
        let Some((src, raw)) = found else { continue };
        let v = raw.trim();
        let bad = |w: &mut Vec<String>| {
            w.push(format!(
                "invalid value '{v}' for {} (accepted: {}); using the default '{}'",
                src.describe(name),
                info.accepted,
                info.default
            ))
        };
        let path = |v: &str| {
            if v.is_empty() {
                None
            } else {
                Some(PathBuf::from(expand_path(v, env)))
            }
        };
        match name {
            "mode" => match v.to_ascii_lowercase().as_str() {
                "off" => s.mode = Mode::Off,
                "profile" => s.mode = Mode::Profile,
                "enforce" => s.mode = Mode::Enforce,
                "auto" => s.mode = Mode::Auto,
                _ => bad(&mut warnings),
            },
            "log" => match v.to_ascii_lowercase().as_str() {
                "error" => s.log = LogLevel::Error,
                "warn" | "warning" => s.log = LogLevel::Warn,
                "info" => s.log = LogLevel::Info,
                "debug" => s.log = LogLevel::Debug,
                _ => bad(&mut warnings),
            },
            "context" => match v.to_ascii_lowercase().as_str() {
                "arguments" => s.context = ContextMode::Arguments,
                "program" => s.context = ContextMode::Program,
                _ => bad(&mut warnings),
            },
            "host_writes" => match v.to_ascii_lowercase().as_str() {
                "any" => s.whole_host_writes = false,
                "whole" => s.whole_host_writes = true,
                _ => bad(&mut warnings),
            },
            "topology" => match v.to_ascii_lowercase().as_str() {
                "strict" => s.topology = TopologyPolicy::Strict,
                "integrated" => s.topology = TopologyPolicy::Integrated,
                _ => bad(&mut warnings),
            },
            "plan" => s.plan = path(v),
            "trace" => s.trace = path(v),
            "stats" => s.stats = path(v),
            "cache_dir" => match path(v) {
                Some(p) => s.cache_dir = p,
                None => bad(&mut warnings),
            },
            "cache_max_bytes" => match parse_u64(v) {
                Some(n) => s.cache_max_bytes = n,
                None => bad(&mut warnings),
            },
            "keep_traces" => match parse_bool(v) {
                Some(b) => s.keep_traces = b,
                None => bad(&mut warnings),
            },
            "min_bytes" => match parse_u64(v) {
                Some(n) => s.min_bytes = n,
                None => bad(&mut warnings),
            },
            "min_copies" => match parse_u64(v) {
                Some(n) if n >= 1 => s.min_copies = n,
                _ => bad(&mut warnings),
            },
            "stack_depth" => match parse_u64(v) {
                Some(n) if (1..=64).contains(&n) => s.stack_depth = n as u32,
                _ => bad(&mut warnings),
            },
            "trace_max_bytes" => match parse_u64(v) {
                Some(n) if n >= 4096 => s.trace_max_bytes = n,
                _ => bad(&mut warnings),
            },
            "validate" => match parse_bool(v) {
                Some(b) => s.validate = b,
                None => bad(&mut warnings),
            },
            "guard" => match v.to_ascii_lowercase().as_str() {
                "auto" => s.guard = None,
                _ => match parse_bool(v) {
                    Some(b) => s.guard = Some(b),
                    None => bad(&mut warnings),
                },
            },
            "validate_full_windows" => match parse_u64(v) {
                Some(n) => s.validate_full_windows = n,
                None => bad(&mut warnings),
            },
            "validate_sample_every" => match parse_u64(v) {
                Some(n) if n >= 1 => s.validate_sample_every = n,
                _ => bad(&mut warnings),
            },
            _ => unreachable!("every SETTINGS entry is handled"),
        }
    }
    (s, warnings)
}

/// `true`/`false`, `1`/`0`, `on`/`off`, `yes`/`no`, in any case.
fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" | "on" | "yes" => Some(true),
        "false" | "0" | "off" | "no" => Some(false),
        _ => None,
    }
}

/// Expand a leading `~` and `$VAR` / `${VAR}` in a path setting (Vulkan Configurator writes the
/// manifest default `$XDG_CACHE_HOME/vk-echo` literally). An unset `XDG_CACHE_HOME` or
/// `XDG_DATA_HOME` falls back to its XDG default; any other unset variable expands to nothing.
pub fn expand_path(v: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    let lookup = |name: &str| -> String {
        let home = || env("HOME").unwrap_or_default();
        match env(name).filter(|s| !s.is_empty()) {
            Some(x) => x,
            None if name == "XDG_CACHE_HOME" => format!("{}/.cache", home()),
            None if name == "XDG_DATA_HOME" => format!("{}/.local/share", home()),
            None => String::new(),
        }
    };
    let mut out = String::new();
    let mut rest = v;
    if rest == "~" || rest.starts_with("~/") {
        out.push_str(&lookup("HOME"));
        rest = &rest[1..];
    }
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, tail) = if let Some(inner) = after.strip_prefix('{') {
            match inner.find('}') {
                Some(j) => (&inner[..j], &inner[j + 1..]),
                None => ("", after),
            }
        } else {
            let j = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..j], &after[j..])
        };
        if name.is_empty() {
            out.push('$');
            rest = after;
        } else {
            out.push_str(&lookup(name));
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

fn names() -> String {
    SETTINGS
        .iter()
        .map(|i| i.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A count with an optional binary suffix: `262144`, `256K`, `64M`, `1G` (also `KiB`, `MiB`, `GiB`).
pub fn parse_u64(v: &str) -> Option<u64> {
    let v = v.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, suffix) = v.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| m.get(k).cloned()
    }

    #[test]
    fn guard_follows_the_context_unless_set() {
        let env = |pairs: &[(&str, &str)]| {
            let (s, w) = resolve(&env_of(pairs), &[], &[]);
            assert!(w.is_empty(), "{w:?}");
            s
        };
        assert!(!env(&[]).guard_on(), "arguments: unguarded by default");
        assert!(env(&[("VK_ECHO_CONTEXT", "program")]).guard_on());
        assert!(!env(&[("VK_ECHO_CONTEXT", "program"), ("VK_ECHO_GUARD", "off")]).guard_on());
        assert!(env(&[("VK_ECHO_GUARD", "1")]).guard_on());
        assert!(env(&[("VK_ECHO_GUARD", "auto"), ("VK_ECHO_CONTEXT", "program")]).guard_on());
    }

    #[test]
    fn defaults_follow_xdg_cache_home() {
        let (s, w) = resolve(&env_of(&[("XDG_CACHE_HOME", "/c")]), &[], &[]);
        assert!(w.is_empty());
        assert_eq!(s.mode, Mode::Auto);
        assert_eq!(s.cache_dir, PathBuf::from("/c/vk-echo"));
        let (s, _) = resolve(&env_of(&[("HOME", "/h")]), &[], &[]);
        assert_eq!(s.cache_dir, PathBuf::from("/h/.cache/vk-echo"));
    }

    #[test]
    fn env_beats_file_beats_app() {
        let file = vec![
            ("mode".to_string(), "enforce".to_string()),
            ("log".to_string(), "debug".to_string()),
        ];
        let app = vec![
            ("mode".to_string(), "off".to_string()),
            ("log".to_string(), "error".to_string()),
            ("min_copies".to_string(), "5".to_string()),
        ];
        let (s, w) = resolve(&env_of(&[("VK_ECHO_MODE", "profile")]), &file, &app);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(s.mode, Mode::Profile);
        assert_eq!(s.log, LogLevel::Debug);
        assert_eq!(s.min_copies, 5);
    }

    #[test]
    fn invalid_value_warns_names_setting_and_accepted_values_and_keeps_default() {
        let (s, w) = resolve(
            &env_of(&[("VK_ECHO_MODE", "fast"), ("VK_ECHO_MIN_BYTES", "12Q")]),
            &[],
            &[],
        );
        assert_eq!(s.mode, Mode::Auto);
        assert_eq!(s.min_bytes, 256 * 1024);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains("VK_ECHO_MODE") && w[0].contains("off|profile|enforce|auto"),
            "{}",
            w[0]
        );
        assert!(w[1].contains("VK_ECHO_MIN_BYTES"), "{}", w[1]);
    }

    #[test]
    fn settings_file_parsing_skips_other_layers_and_comments() {
        let mut w = Vec::new();
        let text = "# comment\nkhronos_validation.enables = X\necho.mode = enforce # trailing\nnonsense line\necho.min_bytes=1M\n";
        let got = parse_settings_file(text, &mut w);
        assert_eq!(
            got,
            vec![
                ("mode".into(), "enforce".into()),
                ("min_bytes".into(), "1M".into())
            ]
        );
        assert_eq!(w.len(), 1);
        let (s, _) = resolve(&env_of(&[]), &got, &[]);
        assert_eq!(s.min_bytes, 1 << 20);
        assert_eq!(s.mode, Mode::Enforce);
    }

    #[test]
    fn path_settings_expand_variables_and_home() {
        let env = env_of(&[("HOME", "/h"), ("X", "/x")]);
        // The manifest default, as Vulkan Configurator writes it, with XDG_CACHE_HOME unset.
        let (s, w) = resolve(
            &env,
            &[("cache_dir".into(), "$XDG_CACHE_HOME/vk-echo".into())],
            &[],
        );
        assert!(w.is_empty());
        assert_eq!(s.cache_dir, PathBuf::from("/h/.cache/vk-echo"));
        assert_eq!(expand_path("~/p", &env), "/h/p");
        assert_eq!(expand_path("${X}/a$X", &env), "/x/a/x");
        assert_eq!(expand_path("a$/b${", &env), "a$/b${");
        assert_eq!(expand_path("$NOPE/t", &env), "/t");
    }

    #[test]
    fn unknown_names_warn() {
        let (_, w) = resolve(&env_of(&[]), &[("mdoe".into(), "x".into())], &[]);
        assert!(w[0].contains("unknown setting 'mdoe'"));
    }

    #[test]
    fn sizes_parse_with_suffixes_and_reject_overflow() {
        assert_eq!(parse_u64("64M"), Some(64 << 20));
        assert_eq!(parse_u64("256KiB"), Some(256 << 10));
        assert_eq!(parse_u64("x"), None);
        assert_eq!(parse_u64("99999999999999999999G"), None);
        assert_eq!(parse_u64("18446744073709551615G"), None);
    }
}
