//! Creation sites for people: stack frames (module + offset) to `function (file:line)` with
//! binutils' `addr2line` where it is installed and the module has debug info; otherwise
//! `module+0xoffset`. Never a hard dependency: any failure falls back to the plain form.

use crate::analysis::{app_frame, plain_site};
use crate::trace::{Frame, Trace};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `(module, offset)` → `(function, file:line)` when known.
type Cache = HashMap<(String, u64), Option<(String, String)>>;

pub struct Symbolizer {
    tool: Option<PathBuf>,
    exe_path: String,
    cwd: Option<PathBuf>,
    cache: RefCell<Cache>,
}

/// `name` on `$PATH`, if any.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Frames in library sources rather than the application's own code.
fn is_library_source(file: &str) -> bool {
    file.contains("/.cargo/registry/")
        || file.contains("/.cargo/git/")
        || file.starts_with("/rustc/")
        || file.contains("/library/std/")
        || file.contains("/library/core/")
}

impl Symbolizer {
    /// A symbolizer for a trace's modules; `addr2line` is looked up on `$PATH`.
    pub fn new(exe_path: &str) -> Symbolizer {
        Symbolizer {
            tool: which("addr2line"),
            exe_path: exe_path.to_string(),
            cwd: std::env::current_dir().ok(),
            cache: RefCell::new(HashMap::new()),
        }
    }

    /// A symbolizer that never runs anything (plain `module+0xoffset`).
    pub fn disabled() -> Symbolizer {
        Symbolizer {
            tool: None,
            exe_path: String::new(),
            cwd: None,
            cache: RefCell::new(HashMap::new()),
        }
    }

    pub fn available(&self) -> bool {
        self.tool.is_some()
    }

    /// The file to read debug info from for a frame's module.
    fn module_file(&self, module: &str) -> Option<PathBuf> {
        let p = Path::new(module);
        if p.is_absolute() && p.is_file() {
            return Some(p.to_path_buf());
        }
        let exe = Path::new(&self.exe_path);
        if !self.exe_path.is_empty()
            && exe.is_file()
            && (exe.file_name().and_then(|f| f.to_str()) == Some(module) || self.exe_path == module)
        {
            return Some(exe.to_path_buf());
        }
        None
    }

    /// Symbolize every creation stack of a trace with one `addr2line` run per module.
    pub fn prefetch(&self, trace: &Trace) {
        let Some(tool) = &self.tool else { return };
        let mut want: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
        for r in &trace.records {
            if let crate::trace::Event::BufferCreate { stack, .. } = &r.event {
                for f in stack {
                    want.entry(f.module.clone()).or_default().insert(f.offset);
                }
            }
        }
        for (module, offsets) in want {
            let offsets: Vec<u64> = offsets.into_iter().collect();
            let mut cache = self.cache.borrow_mut();
            let Some(file) = self.module_file(&module) else {
                for o in offsets {
                    cache.insert((module.clone(), o), None);
                }
                continue;
            };
            // A return address points after the call: look up the byte before it.
            let out = Command::new(tool)
                .arg("-f")
                .arg("-C")
                .arg("-e")
                .arg(&file)
                .args(
                    offsets
                        .iter()
                        .map(|o| format!("{:#x}", o.saturating_sub(1))),
                )
                .output();
            let lines: Vec<String> = match out {
                Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .map(str::to_string)
                    .collect(),
                _ => Vec::new(),
            };
            for (i, o) in offsets.iter().enumerate() {
                let func = lines.get(2 * i).cloned().unwrap_or_default();
                let loc = lines.get(2 * i + 1).cloned().unwrap_or_default();
                let loc = loc
                    .split(" (discriminator")
                    .next()
                    .unwrap_or("")
                    .to_string();
                let known = !loc.is_empty() && !loc.starts_with("??") && !loc.ends_with(":0");
                let v = known.then(|| (func, self.relative(&loc)));
                cache.insert((module.clone(), *o), v);
            }
        }
    }

    fn relative(&self, loc: &str) -> String {
        if let Some(cwd) = &self.cwd {
            let prefix = format!("{}/", cwd.display());
            if let Some(rest) = loc.strip_prefix(&prefix) {
                return rest.to_string();
            }
        }
        loc.to_string()
    }

    /// The creation site: the innermost application frame with a source location outside library
    /// sources, as `function (file:line)`; otherwise `module+0xoffset`.
    pub fn site(&self, stack: &[Frame]) -> String {
        let cache = self.cache.borrow();
        let start = app_frame(stack)
            .and_then(|f| stack.iter().position(|g| std::ptr::eq(f, g)))
            .unwrap_or(0);
        let mut first: Option<String> = None;
        for f in &stack[start.min(stack.len())..] {
            if let Some(Some((func, loc))) = cache.get(&(f.module.clone(), f.offset)) {
                let s = if func.is_empty() || func == "??" {
                    loc.clone()
                } else {
                    format!("{func} ({loc})")
                };
                if !is_library_source(loc) {
                    return s;
                }
                first.get_or_insert(s);
            }
        }
        first.unwrap_or_else(|| plain_site(stack))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_tool_or_module_it_is_plain() {
        let s = Symbolizer::disabled();
        let stack = vec![
            Frame {
                module: "libvulkan.so.1".into(),
                offset: 0x10,
            },
            Frame {
                module: "app".into(),
                offset: 0x1234,
            },
        ];
        assert_eq!(s.site(&stack), "app+0x1234");
        assert_eq!(s.site(&[]), "");
    }

    #[test]
    fn symbolizes_this_test_binary_when_addr2line_exists() {
        // Our own executable has debug info in test builds; find a function's offset in it.
        let s = Symbolizer::new(std::env::current_exe().unwrap().to_str().unwrap());
        if !s.available() {
            return;
        }
        // No portable way to get a module-relative address without parsing /proc/self/maps:
        // read the load base from it.
        let exe = std::env::current_exe().unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        let base = maps
            .lines()
            .find(|l| l.ends_with(exe.to_str().unwrap()))
            .and_then(|l| l.split('-').next())
            .and_then(|a| u64::from_str_radix(a, 16).ok());
        let Some(base) = base else { return };
        let addr = without_tool_or_module_it_is_plain as *const () as usize as u64;
        let frame = Frame {
            module: exe.to_str().unwrap().into(),
            offset: addr - base + 1,
        };
        let trace = Trace {
            header: crate::trace::Header {
                format: crate::trace::TRACE_FORMAT.into(),
                version: crate::trace::TRACE_VERSION,
                context: Default::default(),
                pid: 0,
                started_unix: 0,
                settings: Default::default(),
            },
            records: vec![crate::trace::Record {
                seq: 1,
                thread: 0,
                dev: 0,
                event: crate::trace::Event::BufferCreate {
                    buffer: 1,
                    key: crate::trace::ObjectKey {
                        site: String::new(),
                        size: 0,
                        usage: 0,
                        flags: 0,
                        ordinal: 0,
                    },
                    usage: 0,
                    flags: 0,
                    size: 0,
                    req: Default::default(),
                    stack: vec![frame.clone()],
                },
            }],
            truncated: false,
        };
        s.prefetch(&trace);
        let site = s.site(&[frame]);
        assert!(site.contains("symbolize.rs"), "{site}");
    }
}
