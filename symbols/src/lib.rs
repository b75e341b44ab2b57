//! `echo_symbols`: creation sites for people (`vkecho analyze`). Stack frames (module + offset)
//! become `function (file:line)` from the module's DWARF debug info; else `function+0xoff
//! (module)` from its ELF symbol table (`.symtab`, else `.dynsym`); else `module+0xoffset`, and
//! [`Symbolizer::hint`] says how to get
//! names. All in process (the `object`, `gimli`/`addr2line`, `cpp_demangle` and `rustc-demangle`
//! crates: issue 34), no tool is run; never a hard dependency: any failure falls back to the
//! plain form. C++ names are demangled, Rust's legacy and v0 manglings too. A crate of its own so
//! that the layer, which links echo-analyzer, never links these crates (docs/third-party.md).
//!
//! A module's file is found by the full path its trace records ([`echo_analyzer::trace::Module`]), then
//! beside the executable; its split debug info (Debian's `-dbgsym` packages) by build-id under
//! `/usr/lib/debug/.build-id/xx/yyyy.debug` ([`Symbolizer::with_debug_root`] moves that root),
//! else by its `.gnu_debuglink`.
//! A file whose build-id differs from the recorded one (rebuilt since the trace) is not used.
//!
//! A site is the innermost frame of the application's own code. When that frame is shared by
//! buffers created from different places (a helper such as `create_buffer`), the caller that
//! tells them apart follows: `create_buffer (vk.rs:435) ← … ← upload_inputs (saxpy.rs:52)`.
//!
//! [`Symbolizer::source_frames`] gives a stack's every frame instead, inlined calls expanded, with
//! file, line and column, library frames included: what `vkecho lint` chooses its sites from.

use echo_analyzer::analysis::{app_frame, plain_site};
use echo_analyzer::trace::{Frame, Module, Trace};
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Where split debug info is looked for by build-id: `DEBUG_ROOT/.build-id/xx/yyyy.debug`.
pub const DEBUG_ROOT: &str = "/usr/lib/debug";

/// What one frame resolved to.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Resolved {
    /// Debug info: function, file (relative to the working directory when under it), line and
    /// column (0: none).
    Line {
        func: String,
        file: String,
        line: u32,
        col: u32,
    },
    /// Symbol table only: function and the offset into it.
    Symbol { func: String, off: u64 },
}

impl Resolved {
    /// `file:line`, the form sites are shown in.
    fn loc(&self) -> Option<String> {
        match self {
            Resolved::Line { file, line, .. } => Some(format!("{file}:{line}")),
            Resolved::Symbol { .. } => None,
        }
    }
}

/// `(module, offset)` → what it resolved to: with debug info the chain of inlined frames there,
/// innermost first; else the symbol; empty when nothing did.
type Cache = HashMap<(String, u64), Vec<Resolved>>;

/// One frame of a creation stack as the module's files tell it (`vkecho lint`, issue 57):
/// a physical frame with inlined calls is several of these, innermost first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFrame {
    /// The module as the trace names it, and the return address's offset in it.
    pub module: String,
    pub offset: u64,
    /// The function (demangled), when a symbol or debug info names it.
    pub function: Option<String>,
    /// Source file (relative to the working directory when under it), line and column, when
    /// debug info has them (column: `None` where the compiler wrote none).
    pub file: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// Offset into `function` when only a symbol table named it.
    pub symbol_offset: Option<u64>,
    /// The module's file as the trace recorded it (full path), when it did.
    pub module_path: Option<String>,
}

impl SourceFrame {
    /// Whether the source is the Rust standard library or a crate from a registry or git
    /// checkout (code the program's authors did not write), by its file or, without one, its
    /// function's name.
    pub fn in_library_source(&self) -> bool {
        match (&self.file, &self.function) {
            (Some(f), _) => is_library_source(f),
            (None, Some(func)) => is_library_function(func),
            (None, None) => false,
        }
    }
}

type Slice = gimli::EndianRcSlice<gimli::RunTimeEndian>;

/// One function symbol: `[start, start + size)` in the file's virtual addresses; the name as
/// the file has it (demangled when shown).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Symbol {
    start: u64,
    size: u64,
    name: String,
}

/// What a module's files give: function symbols (sorted by start) and DWARF.
struct Loaded {
    symbols: Vec<Symbol>,
    dwarf: Option<addr2line::Context<Slice>>,
}

pub struct Symbolizer {
    exe_path: String,
    cwd: Option<PathBuf>,
    /// Root of the build-id tree of split debug files.
    debug_root: PathBuf,
    /// Read symbol tables (false: the plain form only).
    symbols: bool,
    /// Read DWARF (false only in tests of the symbol-table path).
    dwarf: bool,
    /// The trace's module records, by frame name.
    modules: RefCell<BTreeMap<String, Module>>,
    cache: RefCell<Cache>,
    /// Every creation stack's labelled application frames (for the distinguishing caller).
    stacks: RefCell<Vec<Vec<String>>>,
    /// Modules a frame could not be resolved in.
    unresolved: RefCell<BTreeSet<String>>,
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

/// A symbol name for people: Rust (legacy and v0, without the hash) and C++ (Itanium ABI)
/// manglings are demangled, anything else is returned as it is.
pub fn demangle(raw: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(raw) {
        return format!("{d:#}");
    }
    if raw.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(raw) {
            if let Ok(s) = sym.demangle(&cpp_demangle::DemangleOptions::default()) {
                return s;
            }
        }
    }
    raw.to_string()
}

/// The function symbols of a parsed file, sorted by start: `.symtab`, else `.dynsym`.
fn function_symbols(file: &object::File) -> Vec<Symbol> {
    fn collect<'d, S: ObjectSymbol<'d>>(it: impl Iterator<Item = S>) -> Vec<Symbol> {
        it.filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.address() != 0)
            .filter_map(|s| {
                let name = s.name().ok().filter(|n| !n.is_empty())?;
                Some(Symbol {
                    start: s.address(),
                    size: s.size(),
                    name: name.to_string(),
                })
            })
            .collect()
    }
    let mut out = collect(file.symbols());
    if out.is_empty() {
        out = collect(file.dynamic_symbols());
    }
    out.sort_by(|a, b| a.start.cmp(&b.start).then(b.size.cmp(&a.size)));
    out.dedup_by(|a, b| a.start == b.start && a.size == b.size);
    out
}

/// The function containing virtual address `addr`, and the offset into it.
fn lookup(symbols: &[Symbol], addr: u64) -> Option<(&Symbol, u64)> {
    let i = symbols.partition_point(|s| s.start <= addr);
    // Symbols may nest or share a start; look back a little for one that covers the address.
    symbols[..i]
        .iter()
        .rev()
        .take(8)
        .find(|s| addr < s.start.saturating_add(s.size.max(1)))
        .map(|s| (s, addr - s.start))
}

/// The file's DWARF, when it has any (compressed sections are inflated).
fn dwarf_of(file: &object::File) -> Option<addr2line::Context<Slice>> {
    file.section_by_name(".debug_info")?;
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let dwarf = gimli::Dwarf::load(|id| -> Result<Slice, gimli::Error> {
        let data = file
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok());
        let bytes: Rc<[u8]> = match data {
            Some(d) => Rc::from(&*d),
            None => Rc::from(&[][..]),
        };
        Ok(gimli::EndianRcSlice::new(bytes, endian))
    })
    .ok()?;
    addr2line::Context::from_dwarf(dwarf).ok()
}

/// The GNU build-id of a parsed file, hex.
fn build_id_of(file: &object::File) -> Option<String> {
    let id = file.build_id().ok()??;
    Some(id.iter().map(|b| format!("{b:02x}")).collect())
}

impl Symbolizer {
    /// A symbolizer for a trace's modules (the trace's module records are read by
    /// [`Symbolizer::prefetch`]); `exe_path` is the executable's path, for traces without them.
    pub fn new(exe_path: &str) -> Symbolizer {
        Symbolizer {
            exe_path: exe_path.to_string(),
            cwd: std::env::current_dir().ok(),
            debug_root: PathBuf::from(DEBUG_ROOT),
            symbols: true,
            dwarf: true,
            modules: RefCell::new(BTreeMap::new()),
            cache: RefCell::new(HashMap::new()),
            stacks: RefCell::new(Vec::new()),
            unresolved: RefCell::new(BTreeSet::new()),
        }
    }

    /// A symbolizer that never reads anything (plain `module+0xoffset`).
    pub fn disabled() -> Symbolizer {
        Symbolizer {
            exe_path: String::new(),
            cwd: None,
            symbols: false,
            ..Symbolizer::new("")
        }
    }

    /// As [`Symbolizer::new`] without reading DWARF: names from symbol tables only.
    #[cfg(test)]
    fn symbols_only(exe_path: &str) -> Symbolizer {
        Symbolizer {
            dwarf: false,
            ..Symbolizer::new(exe_path)
        }
    }

    /// Look split debug files up under `root/.build-id/` instead of [`DEBUG_ROOT`]'s.
    pub fn with_debug_root(mut self, root: impl Into<PathBuf>) -> Symbolizer {
        self.debug_root = root.into();
        self
    }

    /// The split debug file of a build-id under the debug root, if there is one.
    fn debug_file(&self, build_id: &str) -> Option<PathBuf> {
        if build_id.len() < 3 || !build_id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let p = self
            .debug_root
            .join(".build-id")
            .join(&build_id[..2])
            .join(format!("{}.debug", &build_id[2..]));
        p.is_file().then_some(p)
    }

    /// The split debug file a binary's `.gnu_debuglink` names (Fedora's and Yocto's layout, and
    /// `objcopy --add-gnu-debuglink`): beside the binary, in `.debug/` beside it, or under the
    /// debug root at the binary's directory. One whose build-id differs is not used.
    fn debuglink_file(
        &self,
        file: &object::File,
        path: &Path,
        build_id: Option<&str>,
    ) -> Option<Vec<u8>> {
        let (name, _crc) = file.gnu_debuglink().ok()??;
        let name = std::str::from_utf8(name).ok()?;
        if name.is_empty() || name.contains('/') {
            return None;
        }
        let dir = path.parent()?;
        let rooted = self
            .debug_root
            .join(dir.strip_prefix("/").unwrap_or(dir))
            .join(name);
        for p in [dir.join(name), dir.join(".debug").join(name), rooted] {
            if p == path {
                continue;
            }
            let Ok(bytes) = std::fs::read(&p) else {
                continue;
            };
            let Ok(f) = object::File::parse(&*bytes) else {
                continue;
            };
            let id = build_id_of(&f);
            if build_id.is_some() && id.is_some() && build_id != id.as_deref() {
                continue;
            }
            return Some(bytes);
        }
        None
    }

    /// Where a frame's module may be, best first: the path the trace recorded, beside the
    /// executable, the frame's own name when it is a path, the executable itself.
    fn candidates(&self, module: &str, recorded: Option<&Module>) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if let Some(m) = recorded {
            if Path::new(&m.path).is_absolute() {
                out.push(PathBuf::from(&m.path));
            }
        }
        let exe = Path::new(&self.exe_path);
        let base = module.rsplit('/').next().unwrap_or(module);
        if !self.exe_path.is_empty() {
            if let Some(dir) = exe.parent().filter(|d| !d.as_os_str().is_empty()) {
                out.push(dir.join(base));
            }
        }
        if Path::new(module).is_absolute() {
            out.push(PathBuf::from(module));
        }
        if !self.exe_path.is_empty()
            && (exe.file_name().and_then(|f| f.to_str()) == Some(module) || self.exe_path == module)
        {
            out.push(exe.to_path_buf());
        }
        out.dedup();
        out
    }

    /// Read what a module's files give: the first candidate file whose build-id is the recorded
    /// one (or either is unknown), and its split debug file by build-id.
    fn load(&self, module: &str) -> Option<Loaded> {
        let recorded = self.modules.borrow().get(module).cloned();
        let want = recorded
            .as_ref()
            .map(|m| m.build_id.clone())
            .filter(|id| !id.is_empty());
        let mut binary: Option<(Vec<u8>, Option<String>, PathBuf)> = None;
        for path in self.candidates(module, recorded.as_ref()) {
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            let Ok(file) = object::File::parse(&*bytes) else {
                continue;
            };
            let id = build_id_of(&file);
            if want.is_some() && id.is_some() && want != id {
                continue; // another build of the module: its names would be wrong
            }
            binary = Some((bytes, id, path));
            break;
        }
        let id = want.or_else(|| binary.as_ref().and_then(|b| b.1.clone()));
        let bin_file = binary
            .as_ref()
            .and_then(|b| object::File::parse(&*b.0).ok());
        let debug = id
            .as_deref()
            .and_then(|id| self.debug_file(id))
            .and_then(|p| std::fs::read(p).ok())
            .or_else(|| {
                let (file, path) = (bin_file.as_ref()?, &binary.as_ref()?.2);
                self.debuglink_file(file, path, id.as_deref())
            });
        let dbg_file = debug.as_ref().and_then(|d| object::File::parse(&**d).ok());
        if bin_file.is_none() && dbg_file.is_none() {
            return None;
        }
        // The debug file's full symbol table beats a stripped binary's `.dynsym`.
        let mut symbols = dbg_file.as_ref().map(function_symbols).unwrap_or_default();
        if symbols.is_empty() {
            symbols = bin_file.as_ref().map(function_symbols).unwrap_or_default();
        }
        let dwarf = if self.dwarf {
            dbg_file
                .as_ref()
                .and_then(dwarf_of)
                .or_else(|| bin_file.as_ref().and_then(dwarf_of))
        } else {
            None
        };
        Some(Loaded { symbols, dwarf })
    }

    /// A return address (module-relative `offset`) in a loaded module. The byte before it is
    /// looked up (the call instruction). With debug info, the innermost frame (of the inlined
    /// chain there) that is not in library sources, else the innermost one.
    fn resolve(&self, loaded: &Loaded, offset: u64) -> Vec<Resolved> {
        let probe = offset.saturating_sub(1);
        let sym = lookup(&loaded.symbols, probe);
        let mut chain = Vec::new();
        if let Some(ctx) = &loaded.dwarf {
            if let Ok(mut frames) = ctx.find_frames(probe).skip_all_loads() {
                while let Ok(Some(f)) = frames.next() {
                    let Some((file, line, col)) = f.location.as_ref().and_then(|l| {
                        let line = l.line.filter(|&n| n > 0)?;
                        Some((l.file?, line, l.column.unwrap_or(0)))
                    }) else {
                        continue;
                    };
                    let func = f
                        .function
                        .as_ref()
                        .and_then(|n| n.raw_name().ok())
                        .map(|n| demangle(&n))
                        .or_else(|| sym.map(|(s, _)| demangle(&s.name)))
                        .unwrap_or_default();
                    chain.push(Resolved::Line {
                        func,
                        file: self.relative(file),
                        line,
                        col,
                    });
                }
            }
        }
        if chain.is_empty() {
            chain.extend(sym.map(|(s, off)| Resolved::Symbol {
                func: demangle(&s.name),
                off: off + 1,
            }));
        }
        chain
    }

    /// What a site shows of a frame's inline chain: the innermost frame there that is not in
    /// library sources, else the innermost one.
    fn pick(chain: &[Resolved]) -> Option<&Resolved> {
        chain
            .iter()
            .find(|r| r.loc().is_some_and(|l| !is_library_source(&l)))
            .or_else(|| chain.first())
    }

    /// Symbolize every creation stack of a trace: each module's files are read once.
    pub fn prefetch(&self, trace: &Trace) {
        if self.symbols {
            *self.modules.borrow_mut() = trace.modules();
        }
        let mut want: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
        let mut stacks: Vec<&[Frame]> = Vec::new();
        for r in &trace.records {
            if let echo_analyzer::trace::Event::BufferCreate { stack, .. } = &r.event {
                for f in stack {
                    want.entry(f.module.clone()).or_default().insert(f.offset);
                }
                stacks.push(stack);
            }
        }
        {
            let mut cache = self.cache.borrow_mut();
            for (module, offsets) in want {
                let loaded = if self.symbols {
                    self.load(&module)
                } else {
                    None
                };
                for o in offsets {
                    let v = loaded
                        .as_ref()
                        .map(|l| self.resolve(l, o))
                        .unwrap_or_default();
                    cache.insert((module.clone(), o), v);
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
            let picked = cache
                .get(&(f.module.clone(), f.offset))
                .and_then(|c| Self::pick(c));
            match picked {
                Some(r @ Resolved::Line { func, .. }) => {
                    let loc = r.loc().unwrap_or_default();
                    if is_library_source(&loc) {
                        continue;
                    }
                    let s = if func.is_empty() || func == "??" {
                        loc
                    } else {
                        format!("{func} ({loc})")
                    };
                    out.push((s, None));
                }
                Some(Resolved::Symbol { func, off }) => {
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

    /// Every frame of a creation stack past the Vulkan loader and layers, as the module's files
    /// tell it: inlined calls expanded (innermost first), library frames included
    /// (`SourceFrame::in_library_source`), unresolved frames with their module and offset only.
    pub fn source_frames(&self, stack: &[Frame]) -> Vec<SourceFrame> {
        let cache = self.cache.borrow();
        let modules = self.modules.borrow();
        let start = app_frame(stack)
            .and_then(|f| stack.iter().position(|g| std::ptr::eq(f, g)))
            .unwrap_or(0);
        let mut out = Vec::new();
        for f in &stack[start.min(stack.len())..] {
            let plain = SourceFrame {
                module: f.module.clone(),
                offset: f.offset,
                function: None,
                file: None,
                line: None,
                column: None,
                symbol_offset: None,
                module_path: modules
                    .get(&f.module)
                    .map(|m| m.path.clone())
                    .filter(|p| !p.is_empty()),
            };
            let chain = cache
                .get(&(f.module.clone(), f.offset))
                .map(Vec::as_slice)
                .unwrap_or_default();
            if chain.is_empty() {
                out.push(plain);
                continue;
            }
            for r in chain {
                out.push(match r {
                    Resolved::Line {
                        func,
                        file,
                        line,
                        col,
                    } => SourceFrame {
                        function: Some(func.clone()).filter(|f| !f.is_empty() && f != "??"),
                        file: Some(file.clone()),
                        line: Some(*line),
                        column: Some(*col).filter(|&c| c > 0),
                        ..plain.clone()
                    },
                    Resolved::Symbol { func, off } => SourceFrame {
                        function: Some(func.clone()),
                        symbol_offset: Some(*off),
                        ..plain.clone()
                    },
                });
            }
        }
        out
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
            "creation sites in {} are shown as module+offset: {}. To get names, keep a symbol table or debug info in the program and its libraries (Rust: `debug = 1` or `strip = false` in the release profile; C/C++: do not `strip`, `-g` for file:line, or install the library's debug symbols, e.g. Debian's -dbgsym package, under {}/.build-id) and run `vkecho analyze` where the files the trace names are",
            mods.join(", "),
            if self.symbols {
                "they have neither a symbol table nor debug info here, or their files are neither where the trace says, nor beside the executable, nor under the debug directory by build-id"
            } else {
                "symbolization is off (--no-symbolize)"
            },
            self.debug_root.display()
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

    /// The module-relative offset of one of this test binary's functions (+1: a return address).
    fn own_offset(f: *const ()) -> Option<u64> {
        let exe = std::env::current_exe().unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        // The lowest mapping of the executable is its load base (PIE: p_vaddr 0).
        let base = maps
            .lines()
            .filter(|l| l.ends_with(exe.to_str().unwrap()))
            .filter_map(|l| l.split('-').next())
            .filter_map(|a| u64::from_str_radix(a, 16).ok())
            .min()?;
        Some(f as usize as u64 - base + 1)
    }

    fn exe_symbols() -> Vec<Symbol> {
        let bytes = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        function_symbols(&object::File::parse(&*bytes).unwrap())
    }

    #[test]
    fn symbolizes_this_test_binary_with_its_dwarf() {
        // Our own executable has debug info in test builds: read in process, no tool.
        let exe = std::env::current_exe().unwrap();
        let offset = own_offset(without_tool_or_module_it_is_plain as *const ()).unwrap();
        let frame = Frame {
            module: exe.to_str().unwrap().into(),
            offset,
        };
        let s = Symbolizer::new(exe.to_str().unwrap());
        s.prefetch(&trace_of(vec![vec![frame.clone()]]));
        let site = s.site(&[frame]);
        assert!(site.contains("src/lib.rs:"), "{site}");
        assert!(
            site.starts_with("echo_symbols::tests::without_tool_or_module_it_is_plain ("),
            "{site}"
        );
    }

    fn trace_of(stacks: Vec<Vec<Frame>>) -> Trace {
        trace_with(stacks, vec![])
    }

    fn trace_with(stacks: Vec<Vec<Frame>>, modules: Vec<Module>) -> Trace {
        let records = stacks
            .into_iter()
            .enumerate()
            .map(|(i, stack)| echo_analyzer::trace::Record {
                seq: i as u64 + 1,
                thread: 0,
                dev: 0,
                t: None,
                dur: None,
                event: echo_analyzer::trace::Event::BufferCreate {
                    buffer: i as u64 + 1,
                    key: echo_analyzer::trace::ObjectKey {
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
                    modules: if i == 0 { modules.clone() } else { vec![] },
                },
            })
            .collect();
        Trace {
            header: echo_analyzer::trace::Header {
                format: echo_analyzer::trace::TRACE_FORMAT.into(),
                version: echo_analyzer::trace::TRACE_VERSION,
                context: Default::default(),
                pid: 0,
                started_unix: 0,
                settings: Default::default(),
                clock_origin_ns: None,
            },
            records,
            truncated: false,
        }
    }

    /// Without debug info, the symbol table names the function: issue 16.
    /// Two stacks that share their innermost frame show the caller that tells them apart.
    #[test]
    fn symbol_table_names_frames_and_the_distinguishing_caller() {
        let exe = std::env::current_exe().unwrap();
        let syms = exe_symbols();
        let find = |suffix: &str| {
            syms.iter()
                .find(|s| demangle(&s.name).ends_with(suffix) && s.size > 4)
                .unwrap_or_else(|| panic!("no symbol ending in {suffix}"))
                .clone()
        };
        let inner = find("echo_symbols::tests::trace_with");
        let a = find("echo_symbols::tests::without_tool_or_module_it_is_plain");
        let b = find("echo_symbols::tests::symbolizes_this_test_binary_with_its_dwarf");
        let module = exe.to_str().unwrap().to_string();
        let frame = |s: &Symbol| Frame {
            module: module.clone(),
            offset: s.start + 3,
        };
        let one = vec![frame(&inner), frame(&a)];
        let two = vec![frame(&inner), frame(&b)];
        let s = Symbolizer::symbols_only(&module);
        s.prefetch(&trace_of(vec![one.clone(), two.clone()]));
        let site = s.site(&one);
        let (inner, a) = (demangle(&inner.name), demangle(&a.name));
        assert!(site.starts_with(&format!("{inner}+0x3 (")), "{site}");
        assert!(site.contains(&format!(" ← {a}+0x3 (")), "{site}");
        assert_ne!(site, s.site(&two));
        assert_eq!(s.hint(), None, "every frame shown had a name");
    }

    /// A frame names its module by basename; the trace's module record says where the file is
    /// (from any working directory), and a file of another build (build-id) is not used.
    #[test]
    fn module_records_find_the_file_by_path_and_build_id() {
        let exe = std::env::current_exe().unwrap();
        let bytes = std::fs::read(&exe).unwrap();
        let id = build_id_of(&object::File::parse(&*bytes).unwrap()).expect("a build-id");
        let offset = own_offset(without_tool_or_module_it_is_plain as *const ()).unwrap();
        let stack = vec![Frame {
            module: "renamed-module".into(),
            offset,
        }];
        let record = |build_id: &str| Module {
            name: "renamed-module".into(),
            path: exe.to_str().unwrap().into(),
            build_id: build_id.into(),
        };
        // No executable path to fall back on: only the record can find the file.
        for (build_id, named) in [(id.as_str(), true), ("", true), ("00ff00ff", false)] {
            let s = Symbolizer::new("");
            s.prefetch(&trace_with(vec![stack.clone()], vec![record(build_id)]));
            let site = s.site(&stack);
            assert_eq!(
                site.contains("without_tool_or_module_it_is_plain"),
                named,
                "build-id {build_id:?}: {site}"
            );
        }
        // Without a record, a basename alone finds nothing.
        let s = Symbolizer::new("");
        s.prefetch(&trace_of(vec![stack.clone()]));
        assert_eq!(s.site(&stack), format!("renamed-module+{offset:#x}"));
    }

    /// What nothing can name stays `module+0xoffset`, and the hint says how to get names.
    #[test]
    fn unnamed_modules_get_the_hint() {
        let stack = vec![Frame {
            module: "/nonexistent/app".into(),
            offset: 0x1234,
        }];
        let s = Symbolizer::new("/nonexistent/app").with_debug_root("/nonexistent/debug");
        s.prefetch(&trace_of(vec![stack.clone()]));
        assert_eq!(s.site(&stack), "/nonexistent/app+0x1234");
        let hint = s.hint().expect("a hint");
        assert!(
            hint.contains("app") && hint.contains("symbol table"),
            "{hint}"
        );
        assert!(hint.contains("/nonexistent/debug/.build-id"), "{hint}");
        assert!(!hint.contains("addr2line"), "{hint}");
    }

    #[test]
    fn demangles_rust_and_cpp() {
        assert_eq!(
            demangle("_ZN12echo_samples2vk3Ctx13create_buffer17h0123456789abcdefE"),
            "echo_samples::vk::Ctx::create_buffer"
        );
        assert_eq!(
            demangle(
                "_ZN4core3ptr46drop_in_place$LT$alloc..vec..Vec$LT$u8$GT$$GT$17h0123456789abcdefE"
            ),
            "core::ptr::drop_in_place<alloc::vec::Vec<u8>>"
        );
        // Rust v0.
        assert_eq!(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
        // C++ (Itanium ABI).
        assert_eq!(
            demangle("_ZN4demo8Uploader12make_stagingEv"),
            "demo::Uploader::make_staging()"
        );
        assert_eq!(demangle("_Z6createim"), "create(int, unsigned long)");
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_ZN3foo"), "_ZN3foo");
    }

    /// The symbol table of this test binary, read with `object`; junk and every prefix of a
    /// real file parse to nothing without a panic.
    #[test]
    fn reads_this_test_binarys_own_symbols() {
        let syms = exe_symbols();
        assert!(syms.len() > 100, "{}", syms.len());
        let me = syms
            .iter()
            .find(|s| demangle(&s.name).ends_with("reads_this_test_binarys_own_symbols"))
            .expect("this test function is in the symbol table");
        let (hit, off) = lookup(&syms, me.start + 3).unwrap();
        assert_eq!(hit.name, me.name);
        assert_eq!(off, 3);
        assert!(object::File::parse(&b"not an elf"[..]).is_err());
        let bytes = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        for cut in [0, 4, 64, 1000, 100_000] {
            if let Ok(f) = object::File::parse(&bytes[..cut.min(bytes.len())]) {
                let _ = function_symbols(&f);
                let _ = build_id_of(&f);
            }
        }
    }

    /// Symbols come from the file in process: nothing in this module runs a program.
    #[test]
    fn no_tool_is_spawned() {
        let src = include_str!("lib.rs");
        let spawn = ["Command", "::new"].concat();
        assert!(
            !src.contains(&spawn),
            "the symbolizer must not run a process"
        );
    }
}
