//! The layer's logger: stderr, prefix `[VK_LAYER_echo]`, level from the `log` setting.

use echo_analyzer::settings::LogLevel;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

static LEVEL: AtomicU8 = AtomicU8::new(LogLevel::Warn as u8);

/// Sets the level (the last created instance's `log` setting wins).
pub fn set_level(level: LogLevel) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Whether a message at `level` is printed.
#[inline]
pub fn enabled(level: LogLevel) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// Warnings and errors of this process, for the cache's run record (`vkecho report`, issue 27):
/// the first [`RECENT_MAX`], each cut at [`RECENT_CHARS`] characters.
static RECENT: Mutex<Vec<String>> = Mutex::new(Vec::new());
const RECENT_MAX: usize = 32;
const RECENT_CHARS: usize = 1000;

/// The warnings and errors logged so far (printed or not).
pub fn recent_warnings() -> Vec<String> {
    match RECENT.lock() {
        Ok(g) => g.clone(),
        Err(p) => p.into_inner().clone(),
    }
}

/// Prints one line (use the `error!`/`warn!`/`info!`/`debug!` macros).
pub fn write(level: LogLevel, msg: std::fmt::Arguments<'_>) {
    if level as u8 <= LogLevel::Warn as u8 {
        // Not a hot path: warnings are rare. Never from the signal handler (it logs nothing).
        let mut g = match RECENT.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if g.len() < RECENT_MAX {
            let tag = if level == LogLevel::Error {
                "error"
            } else {
                "warn"
            };
            g.push(format!("{tag}: {msg}").chars().take(RECENT_CHARS).collect());
        }
    }
    if !enabled(level) {
        return;
    }
    let tag = match level {
        LogLevel::Error => "error",
        LogLevel::Warn => "warn",
        LogLevel::Info => "info",
        LogLevel::Debug => "debug",
    };
    // One write call per line, so lines of different threads do not interleave.
    let line = format!("[VK_LAYER_echo] {tag}: {msg}\n");
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

static ONCE: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Whether `key` is seen for the first time (for messages that must appear only once).
pub fn first_time(key: &str) -> bool {
    let mut g = match ONCE.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    g.get_or_insert_with(HashSet::new).insert(key.to_string())
}

/// A warning printed only the first time `key` is seen.
pub fn warn_once(key: &str, msg: std::fmt::Arguments<'_>) {
    if enabled(LogLevel::Warn) && first_time(key) {
        write(LogLevel::Warn, msg);
    }
}

macro_rules! log_error {
    ($($t:tt)*) => { $crate::log::write(echo_analyzer::settings::LogLevel::Error, format_args!($($t)*)) };
}
macro_rules! log_warn {
    ($($t:tt)*) => { $crate::log::write(echo_analyzer::settings::LogLevel::Warn, format_args!($($t)*)) };
}
macro_rules! log_info {
    ($($t:tt)*) => { $crate::log::write(echo_analyzer::settings::LogLevel::Info, format_args!($($t)*)) };
}
macro_rules! log_debug {
    ($($t:tt)*) => { $crate::log::write(echo_analyzer::settings::LogLevel::Debug, format_args!($($t)*)) };
}
pub(crate) use {log_debug as debug, log_error as error, log_info as info, log_warn as warn};
