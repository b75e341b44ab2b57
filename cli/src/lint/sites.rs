//! Where a lint diagnostic points: which frames of a creation stack are the program's own code,
//! and which of those is *the* place a buffer was asked for.
//!
//! - **Library code** is code the program's authors did not write: the Rust standard library and
//!   crates from a registry or git checkout (by source path, as `vkecho analyze` decides), files
//!   under the system's include and library directories, sources generated or unpacked into a
//!   Cargo build directory (`target/…/build/…/out/`), modules without line information that live
//!   under `/usr`, `/lib`, `/opt` (the executable itself never is), and whatever `--library`
//!   names. A site inside library code is attributed to the first frame of the program's own
//!   code, with the library frames as notes.
//! - **Helpers**: a program usually creates its buffers through a function of its own
//!   (`create_buffer`, `Ctx::io`, `buffer_create`) that is reached from several places. A frame
//!   whose function the trace's creation stacks reach by more than one chain of callers is a
//!   helper; the site is the first frame outward that is not one — the line that asked for this
//!   buffer (saxpy's `let x = ctx.io(…)`), with the helper frames as a note.

use echo_symbols::SourceFrame;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// One frame as a diagnostic shows it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Place {
    /// Source file (relative to the working directory when under it), line and column, from
    /// debug info.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    /// The function (demangled), when a symbol or debug info names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// The module as the trace names it, its recorded path, and the return address's offset.
    pub module: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module_path: Option<String>,
    pub offset: u64,
    /// Offset into `function` when only a symbol table named it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol_offset: Option<u64>,
}

impl Place {
    pub fn of(f: &SourceFrame) -> Place {
        Place {
            file: f.file.clone(),
            line: f.line,
            column: f.column,
            function: f.function.clone(),
            module: f.module.clone(),
            module_path: f.module_path.clone(),
            offset: f.offset,
            symbol_offset: f.symbol_offset,
        }
    }

    /// Whether debug info gave a file and line.
    pub fn has_line(&self) -> bool {
        self.file.is_some() && self.line.is_some()
    }

    /// The module's base name.
    pub fn module_base(&self) -> &str {
        self.module.rsplit('/').next().unwrap_or(&self.module)
    }

    /// What compilers print before `warning:`: `file:line:col` (`file:line` without a column);
    /// without line information the module and symbol as linkers print them,
    /// `module(function+0x1f)`, else `module+0x1234`.
    pub fn prefix(&self) -> String {
        match (&self.file, self.line, self.column) {
            (Some(f), Some(l), Some(c)) => format!("{f}:{l}:{c}"),
            (Some(f), Some(l), None) => format!("{f}:{l}"),
            _ => match (&self.function, self.symbol_offset) {
                (Some(func), Some(off)) => format!("{}({func}+{off:#x})", self.module),
                (Some(func), None) => format!("{}({func})", self.module),
                _ => format!("{}+{:#x}", self.module, self.offset),
            },
        }
    }

    /// For prose: `function (file:line)`, `function+0x1f (module)`, `module+0x1234`.
    pub fn describe(&self) -> String {
        match (&self.file, self.line, &self.function) {
            (Some(f), Some(l), Some(func)) => format!("{func} ({f}:{l})"),
            (Some(f), Some(l), None) => format!("{f}:{l}"),
            _ => match (&self.function, self.symbol_offset) {
                (Some(func), Some(off)) => format!("{func}+{off:#x} ({})", self.module_base()),
                (Some(func), None) => format!("{func} ({})", self.module_base()),
                _ => format!("{}+{:#x}", self.module, self.offset),
            },
        }
    }

    /// The function, else `module+0x1234`: for a note whose place already gives file and line.
    pub fn name(&self) -> String {
        match &self.function {
            Some(f) => f.clone(),
            None => format!("{}+{:#x}", self.module, self.offset),
        }
    }

    /// What tells two places apart: the source position, else the return address.
    fn key(&self) -> String {
        match (&self.file, self.line) {
            (Some(f), Some(l)) => format!("{f}:{l}:{}", self.column.unwrap_or(0)),
            _ => format!("{}+{:#x}", self.module, self.offset),
        }
    }

    /// What names the function the place is in (its name, else its address).
    fn function_key(&self) -> String {
        match &self.function {
            Some(f) => format!("{}!{f}", self.module),
            None => self.key(),
        }
    }
}

/// Which frames are library code (module doc).
pub struct Classifier {
    /// The executable's file name (its frames are never library code by module).
    exe: String,
    /// `--library` patterns: a frame whose file, module or module path contains one is library.
    patterns: Vec<String>,
}

/// Source trees of code the program's authors did not write.
const SYSTEM_SOURCES: [&str; 6] = [
    "/usr/include/",
    "/usr/local/include/",
    "/usr/lib/",
    "/usr/src/",
    "/usr/share/",
    "/opt/",
];

/// Where installed libraries live.
const SYSTEM_MODULES: [&str; 6] = [
    "/usr/",
    "/lib/",
    "/lib64/",
    "/opt/",
    "/snap/",
    "/nix/store/",
];

/// A source a Cargo build script generated or unpacked (`target/<profile>/build/<pkg>/out/…`).
fn in_cargo_out_dir(file: &str) -> bool {
    file.find("/build/")
        .is_some_and(|i| file[i..].contains("/out/") && file[..i].contains("target"))
}

impl Classifier {
    pub fn new(exe_path: &str, patterns: &[String]) -> Classifier {
        Classifier {
            exe: exe_path.rsplit('/').next().unwrap_or(exe_path).to_string(),
            patterns: patterns.iter().filter(|p| !p.is_empty()).cloned().collect(),
        }
    }

    /// Whether a frame is library code.
    pub fn is_library(&self, f: &SourceFrame) -> bool {
        let texts = [
            f.file.as_deref(),
            Some(f.module.as_str()),
            f.module_path.as_deref(),
        ];
        if self
            .patterns
            .iter()
            .any(|p| texts.iter().flatten().any(|t| t.contains(p.as_str())))
        {
            return true;
        }
        if f.in_library_source() {
            return true;
        }
        if let Some(file) = &f.file {
            return SYSTEM_SOURCES.iter().any(|d| file.starts_with(d)) || in_cargo_out_dir(file);
        }
        let base = f.module.rsplit('/').next().unwrap_or(&f.module);
        if !self.exe.is_empty() && base == self.exe {
            return false;
        }
        let path = f.module_path.as_deref().unwrap_or(&f.module);
        SYSTEM_MODULES.iter().any(|d| path.starts_with(d))
    }
}

/// Where one buffer was created, for a diagnostic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// The place the diagnostic points at.
    pub place: Place,
    /// The program's own frames inside it (helpers), innermost first.
    pub helpers: Vec<Place>,
    /// Library frames inside the first own frame, innermost first.
    pub library: Vec<Place>,
    /// No frame of the stack is the program's own code: `place` is the innermost frame.
    pub no_own_frame: bool,
}

/// Sites of a trace's creation stacks (module doc): `stacks[i]` is buffer `i`'s frames as
/// [`echo_symbols::Symbolizer::source_frames`] gives them.
pub fn locate(stacks: &[Vec<SourceFrame>], cls: &Classifier) -> Vec<Option<Site>> {
    // Per stack: (own frame?, place), innermost first.
    let split: Vec<Vec<(bool, Place)>> = stacks
        .iter()
        .map(|s| {
            s.iter()
                .map(|f| (!cls.is_library(f), Place::of(f)))
                .collect()
        })
        .collect();
    // Every function of the program's own code, and the chains of callers that reach it.
    let mut chains: BTreeMap<String, BTreeSet<Vec<String>>> = BTreeMap::new();
    for s in &split {
        let own: Vec<&Place> = s.iter().filter(|f| f.0).map(|f| &f.1).collect();
        for (i, p) in own.iter().enumerate() {
            let outer: Vec<String> = own[i + 1..].iter().map(|q| q.key()).collect();
            chains.entry(p.function_key()).or_default().insert(outer);
        }
    }
    let helper = |p: &Place| chains.get(&p.function_key()).is_some_and(|c| c.len() > 1);
    split
        .iter()
        .map(|s| {
            let first = s.first()?;
            let Some(start) = s.iter().position(|f| f.0) else {
                return Some(Site {
                    place: first.1.clone(),
                    helpers: Vec::new(),
                    library: Vec::new(),
                    no_own_frame: true,
                });
            };
            let library: Vec<Place> = s[..start].iter().map(|f| f.1.clone()).collect();
            let own: Vec<&Place> = s[start..].iter().filter(|f| f.0).map(|f| &f.1).collect();
            let mut i = 0;
            while i + 1 < own.len() && helper(own[i]) {
                i += 1;
            }
            Some(Site {
                place: own[i].clone(),
                helpers: own[..i].iter().map(|p| (*p).clone()).collect(),
                library,
                no_own_frame: false,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(func: &str, file: &str, line: u32) -> SourceFrame {
        SourceFrame {
            module: "app".into(),
            offset: line as u64,
            function: Some(func.into()),
            file: Some(file.into()),
            line: Some(line),
            column: Some(5),
            symbol_offset: None,
            module_path: Some("/home/me/app".into()),
        }
    }

    fn symbol(module: &str, path: &str, func: &str, off: u64) -> SourceFrame {
        SourceFrame {
            module: module.into(),
            offset: 0x1000 + off,
            function: Some(func.into()),
            file: None,
            line: None,
            column: None,
            symbol_offset: Some(off),
            module_path: Some(path.into()),
        }
    }

    /// saxpy's shape: `run` asks `io` twice (lines 13 and 14), `io` makes a device buffer and
    /// staging buffers through `create_buffer`: every staging buffer's site is `run`'s line.
    #[test]
    fn helpers_are_walked_out_of() {
        let stack = |io_line: u32, run_line: u32| {
            vec![
                line("create_buffer", "src/vk.rs", 439),
                line("io", "src/vk.rs", io_line),
                line("run", "src/saxpy.rs", run_line),
                line("main", "src/main.rs", 7),
                line("std::rt::lang_start", "/rustc/abc/library/std/src/rt.rs", 1),
            ]
        };
        let stacks = vec![
            stack(500, 13), // x's device buffer
            stack(520, 13), // x's staging
            stack(500, 14), // y's device buffer
            stack(520, 14), // y's upload staging
            stack(539, 14), // y's readback staging
        ];
        let cls = Classifier::new("/home/me/app", &[]);
        let sites = locate(&stacks, &cls);
        let lines: Vec<(String, u32)> = sites
            .iter()
            .map(|s| {
                let p = &s.as_ref().unwrap().place;
                (p.file.clone().unwrap(), p.line.unwrap())
            })
            .collect();
        assert_eq!(
            lines,
            [13, 13, 14, 14, 14].map(|l| ("src/saxpy.rs".to_string(), l))
        );
        let s = sites[4].as_ref().unwrap();
        assert_eq!(s.place.prefix(), "src/saxpy.rs:14:5");
        assert_eq!(s.helpers.len(), 2);
        assert_eq!(s.helpers[1].describe(), "io (src/vk.rs:539)");
        assert!(s.library.is_empty() && !s.no_own_frame);
    }

    /// A site in a registry crate or a system library is the program's first frame, with the
    /// library frames as notes; `--library` marks vendored code.
    #[test]
    fn library_frames_go_to_the_first_own_frame() {
        let vma = line(
            "VmaAllocator_T::CreateBuffer",
            "/root/.cargo/registry/src/index.crates.io-x/vk-mem-0.4/vk_mem_alloc.h",
            100,
        );
        let so = symbol(
            "libfoo.so.1",
            "/usr/lib/x86_64-linux-gnu/libfoo.so.1",
            "foo_new",
            0x2f,
        );
        let own = line("upload", "src/gpu.rs", 42);
        let vendored = line("helper", "third_party/lib/helper.c", 9);
        let stacks = vec![
            vec![vma.clone(), so.clone(), own.clone()],
            vec![vendored.clone(), own.clone()],
        ];
        let cls = Classifier::new("app", &["third_party/".into()]);
        let sites = locate(&stacks, &cls);
        let s0 = sites[0].as_ref().unwrap();
        assert_eq!(s0.place, Place::of(&own));
        assert_eq!(s0.library, vec![Place::of(&vma), Place::of(&so)]);
        assert_eq!(s0.library[1].prefix(), "libfoo.so.1(foo_new+0x2f)");
        assert_eq!(
            sites[1].as_ref().unwrap().library,
            vec![Place::of(&vendored)]
        );
        // A generated source in a Cargo build directory is library code.
        assert!(in_cargo_out_dir(
            "/w/target/debug/build/echo-tests-1/out/vkfft/vkFFT.h"
        ));
        assert!(!in_cargo_out_dir("/w/src/build/out.c"));
        // Without line information: the executable is the program's, /usr/lib is not.
        let exe = symbol("app", "/home/me/app", "work_create", 0x4f);
        assert!(!cls.is_library(&exe));
        assert!(cls.is_library(&so));
        // Nothing of the program's own: the innermost frame, said so.
        let only = locate(&[vec![so.clone()]], &cls);
        let o = only[0].as_ref().unwrap();
        assert!(o.no_own_frame);
        assert_eq!(o.place, Place::of(&so));
        assert_eq!(Place::of(&exe).describe(), "work_create+0x4f (app)");
    }
}
