//! Creation sites for people: stack frames (module + offset) to `function (file:line)` with
//! binutils' `addr2line` where it is installed and the module has debug info; else
//! `function+0xoff (module)` from the module's ELF symbol table (`crate::elf`, issue 16); else
//! `module+0xoffset`, and [`Symbolizer::hint`] says how to get names. Never a hard dependency:
//! any failure falls back to the plain form.
//!
//! A site is the innermost frame of the application's own code. When that frame is shared by
//! buffers created from different places (a helper such as `create_buffer`), the caller that
//! tells them apart follows: `create_buffer (vk.rs:435) ← … ← upload_inputs (saxpy.rs:52)`.

use crate::analysis::{app_frame, plain_site};
use crate::elf;
use crate::trace::{Frame, Trace};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What one frame resolved to.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Resolved {
    /// Debug info: function and `file:line`.
    Line { func: String, loc: String },
    /// Symbol table only: function and the offset into it.
    Symbol { func: String, off: u64 },
}

/// `(module, offset)` → what it resolved to, when anything did.
type Cache = HashMap<(String, u64), Option<Resolved>>;

pub struct Symbolizer {
    tool: Option<PathBuf>,
    exe_path: String,
    cwd: Option<PathBuf>,
    /// Read symbol tables (false: the plain form only).
    symbols: bool,
    cache: RefCell<Cache>,
    /// Every creation stack's labelled application frames (for the distinguishing caller).
    stacks: RefCell<Vec<Vec<String>>>,
    /// Modules a frame could not be resolved in.
    unresolved: RefCell<BTreeSet<String>>,
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

/// Functions of the Rust standard library and runtime, known by name only.
fn is_library_function(func: &str) -> bool {
    [
        "std::", "core::", "alloc::", "<std::", "<core::", "<alloc::", "__libc_", "_start",
    ]
    .iter()
    .any(|p| func.starts_with(p))
}

impl Symbolizer {
    /// A symbolizer for a trace's modules; `addr2line` is looked up on `$PATH`.
    pub fn new(exe_path: &str) -> Symbolizer {
        Symbolizer {
            tool: which("addr2line"),
            exe_path: exe_path.to_string(),
            cwd: std::env::current_dir().ok(),
            symbols: true,
            cache: RefCell::new(HashMap::new()),
            stacks: RefCell::new(Vec::new()),
            unresolved: RefCell::new(BTreeSet::new()),
        }
    }

    /// A symbolizer that never runs or reads anything (plain `module+0xoffset`).
    pub fn disabled() -> Symbolizer {
        Symbolizer {
            tool: None,
            exe_path: String::new(),
            cwd: None,
            symbols: false,
            cache: RefCell::new(HashMap::new()),
            stacks: RefCell::new(Vec::new()),
            unresolved: RefCell::new(BTreeSet::new()),
        }
    }

    /// As [`Symbolizer::new`] without `addr2line`: names from symbol tables only (what a
    /// machine without binutils gets).
    pub fn symbols_only(exe_path: &str) -> Symbolizer {
        Symbolizer {
            tool: None,
            ..Symbolizer::new(exe_path)
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

    /// `addr2line` over `offsets` of `file`: per offset, function and `file:line` when known.
    fn addr2line(&self, file: &Path, offsets: &[u64]) -> Vec<Option<(String, String)>> {
        let Some(tool) = &self.tool else {
            return vec![None; offsets.len()];
        };
        // A return address points after the call: look up the byte before it.
        let out = Command::new(tool)
            .arg("-f")
            .arg("-C")
            .arg("-e")
            .arg(file)
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
        (0..offsets.len())
            .map(|i| {
                let func = lines.get(2 * i).cloned().unwrap_or_default();
                let loc = lines.get(2 * i + 1).cloned().unwrap_or_default();
                let loc = loc
                    .split(" (discriminator")
                    .next()
                    .unwrap_or("")
                    .to_string();
                let known = !loc.is_empty() && !loc.starts_with("??") && !loc.ends_with(":0");
                known.then(|| (func, self.relative(&loc)))
            })
            .collect()
    }

    /// Symbolize every creation stack of a trace: one `addr2line` run per module, the symbol
    /// table for what it cannot name.
    pub fn prefetch(&self, trace: &Trace) {
        let mut want: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
        let mut stacks: Vec<&[Frame]> = Vec::new();
        for r in &trace.records {
            if let crate::trace::Event::BufferCreate { stack, .. } = &r.event {
                for f in stack {
                    want.entry(f.module.clone()).or_default().insert(f.offset);
                }
                stacks.push(stack);
            }
        }
        {
            let mut cache = self.cache.borrow_mut();
            for (module, offsets) in want {
                let offsets: Vec<u64> = offsets.into_iter().collect();
                let file = if self.symbols {
                    self.module_file(&module)
                } else {
                    None
                };
                let Some(file) = file else {
                    for o in offsets {
                        cache.insert((module.clone(), o), None);
                    }
                    continue;
                };
                let lines = self.addr2line(&file, &offsets);
                let syms = if lines.iter().any(Option::is_none) {
                    std::fs::read(&file)
                        .map(|b| elf::function_symbols(&b))
                        .unwrap_or_default()
                } else {
                    Vec::new()
                };
                for (o, line) in offsets.iter().zip(lines) {
                    let v = match line {
                        Some((func, loc)) => Some(Resolved::Line { func, loc }),
                        None => elf::lookup(&syms, o.saturating_sub(1)).map(|(s, off)| {
                            Resolved::Symbol {
                                func: s.name.clone(),
                                off: off + 1,
                            }
                        }),
                    };
                    cache.insert((module.clone(), *o), v);
                }
            }
        }
        let labelled: Vec<Vec<String>> = stacks
            .iter()
            .map(|s| self.app_frames(s).into_iter().map(|f| f.0).collect())
            .collect();
        *self.stacks.borrow_mut() = labelled;
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

    /// The application's frames of a stack, innermost first, as people read them (with the
    /// module when nothing named the frame); frames in library code are left out when a name
    /// says so.
    fn app_frames(&self, stack: &[Frame]) -> Vec<(String, Option<String>)> {
        let cache = self.cache.borrow();
        let start = app_frame(stack)
            .and_then(|f| stack.iter().position(|g| std::ptr::eq(f, g)))
            .unwrap_or(0);
        let mut out = Vec::new();
        for f in &stack[start.min(stack.len())..] {
            let base = f.module.rsplit('/').next().unwrap_or(&f.module);
            match cache.get(&(f.module.clone(), f.offset)) {
                Some(Some(Resolved::Line { func, loc })) => {
                    if is_library_source(loc) {
                        continue;
                    }
                    let s = if func.is_empty() || func == "??" {
                        loc.clone()
                    } else {
                        format!("{func} ({loc})")
                    };
                    out.push((s, None));
                }
                Some(Some(Resolved::Symbol { func, off })) => {
                    if is_library_function(func) {
                        continue;
                    }
                    out.push((format!("{func}+{off:#x} ({base})"), None));
                }
                _ => out.push((
                    format!("{}+{:#x}", f.module, f.offset),
                    Some(base.to_string()),
                )),
            }
        }
        out
    }

    /// The creation site: the innermost application frame, and when other creation stacks of
    /// the trace share it, the first caller that tells this one apart (`A ← B`, `A ← … ← C`);
    /// `module+0xoffset` for what nothing resolves.
    pub fn site(&self, stack: &[Frame]) -> String {
        let resolved = self.app_frames(stack);
        let Some((first, _)) = resolved.first() else {
            return plain_site(stack);
        };
        let frames: Vec<String> = resolved.iter().map(|f| f.0.clone()).collect();
        let stacks = self.stacks.borrow();
        let others: Vec<&Vec<String>> = stacks.iter().filter(|s| **s != frames).collect();
        let mut k = 1;
        while k < frames.len() && others.iter().any(|o| o.len() >= k && o[..k] == frames[..k]) {
            k += 1;
        }
        // Modules of the frames shown that nothing named: the hint names them.
        for i in [0, k - 1] {
            if let Some(m) = &resolved[i].1 {
                self.unresolved.borrow_mut().insert(m.clone());
            }
        }
        match k {
            1 => first.clone(),
            2 => format!("{first} ← {}", frames[1]),
            _ => format!("{first} ← … ← {}", frames[k - 1]),
        }
    }

    /// How to get names for the modules nothing could name (after [`Symbolizer::site`]), or
    /// `None` when every frame had one.
    pub fn hint(&self) -> Option<String> {
        let u = self.unresolved.borrow();
        if u.is_empty() {
            return None;
        }
        let mods: Vec<&str> = u.iter().map(String::as_str).take(4).collect();
        Some(format!(
            "creation sites in {} are shown as module+offset: {}. To get names, keep a symbol table or debug info in the program (Rust: `debug = 1` or `strip = false` in the release profile; C/C++: `-g`, do not `strip`) and run `vkecho analyze` where the binary and binutils' `addr2line` are; `addr2line -f -C -e MODULE 0xOFFSET` names one by hand",
            mods.join(", "),
            if self.symbols {
                "they have neither debug info nor a symbol table here, or the file is not where the trace says"
            } else {
                "symbolization is off (--no-symbolize)"
            }
        ))
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

    fn trace_of(stacks: Vec<Vec<Frame>>) -> Trace {
        let records = stacks
            .into_iter()
            .enumerate()
            .map(|(i, stack)| crate::trace::Record {
                seq: i as u64 + 1,
                thread: 0,
                dev: 0,
                event: crate::trace::Event::BufferCreate {
                    buffer: i as u64 + 1,
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
                    stack,
                },
            })
            .collect();
        Trace {
            header: crate::trace::Header {
                format: crate::trace::TRACE_FORMAT.into(),
                version: crate::trace::TRACE_VERSION,
                context: Default::default(),
                pid: 0,
                started_unix: 0,
                settings: Default::default(),
            },
            records,
            truncated: false,
        }
    }

    /// Without debug info (no addr2line here), the symbol table names the function: issue 16.
    /// Two stacks that share their innermost frame show the caller that tells them apart.
    #[test]
    fn symbol_table_names_frames_and_the_distinguishing_caller() {
        let exe = std::env::current_exe().unwrap();
        let syms = crate::elf::function_symbols(&std::fs::read(&exe).unwrap());
        let find = |suffix: &str| {
            syms.iter()
                .find(|s| s.name.ends_with(suffix) && s.size > 4)
                .unwrap_or_else(|| panic!("no symbol ending in {suffix}"))
                .clone()
        };
        let inner = find("symbolize::tests::trace_of");
        let a = find("symbolize::tests::without_tool_or_module_it_is_plain");
        let b = find("symbolize::tests::symbolizes_this_test_binary_when_addr2line_exists");
        let module = exe.to_str().unwrap().to_string();
        let frame = |s: &crate::elf::Symbol| Frame {
            module: module.clone(),
            offset: s.start + 3,
        };
        let one = vec![frame(&inner), frame(&a)];
        let two = vec![frame(&inner), frame(&b)];
        let s = Symbolizer::symbols_only(&module);
        s.prefetch(&trace_of(vec![one.clone(), two.clone()]));
        let site = s.site(&one);
        assert!(site.starts_with(&format!("{}+0x3 (", inner.name)), "{site}");
        assert!(site.contains(&format!(" ← {}+0x3 (", a.name)), "{site}");
        assert_ne!(site, s.site(&two));
        assert_eq!(s.hint(), None, "every frame shown had a name");
    }

    /// What nothing can name stays `module+0xoffset`, and the hint says how to get names.
    #[test]
    fn unnamed_modules_get_the_hint() {
        let stack = vec![Frame {
            module: "/nonexistent/app".into(),
            offset: 0x1234,
        }];
        let s = Symbolizer::new("/nonexistent/app");
        s.prefetch(&trace_of(vec![stack.clone()]));
        assert_eq!(s.site(&stack), "/nonexistent/app+0x1234");
        let hint = s.hint().expect("a hint");
        assert!(hint.contains("app") && hint.contains("addr2line"), "{hint}");
        assert!(hint.contains("debug"), "{hint}");
    }
}
