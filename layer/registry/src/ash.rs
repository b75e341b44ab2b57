//! The Rust types of a command's parameters, as `ash` (the layer's Vulkan bindings) names them.
//!
//! `ash` is generated from an older registry than `layer/registry/vk.xml` (0.38 from 1.3.281), so
//! a type may be missing from it, or present only under an older name (`VkMemoryMapInfo`,
//! promoted in 1.4, is `vk::MemoryMapInfoKHR` there). The names `ash` defines are read from its
//! own sources, the version `Cargo.lock` pins, in Cargo's registry: a type is written as the first
//! of its names (its own, then its aliases) that `ash` has, and a type `ash` lacks travels as its
//! ABI type (a handle as `u64`, an enumeration as `i32`, a structure only behind a pointer, as
//! `c_void`). Every intercept is then also checked against `ash`'s own function-pointer type
//! for the command where `ash` has one (`const _: vk::PFN_vkX = vkX;` in the generated file).

use crate::{Kind, Param, Registry};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// What `ash` defines.
#[derive(Default)]
pub struct Ash {
    /// `ash` version (`0.38.0+1.3.281`).
    pub version: String,
    /// Type name (without `Vk`) → whether it has a lifetime parameter (`<'a>`).
    types: HashMap<String, bool>,
    /// Commands `ash` has a `PFN_` type for, with its number of parameters.
    pfn: HashMap<String, usize>,
}

impl Ash {
    /// Reads `ash`'s sources (`src/vk/*.rs`) from Cargo's registry: the version the workspace's
    /// `Cargo.lock` (under `root`) pins.
    pub fn load(root: &Path) -> Result<Ash, String> {
        let lock = std::fs::read_to_string(root.join("Cargo.lock"))
            .map_err(|e| format!("Cargo.lock: {e}"))?;
        let version = lock
            .split("[[package]]")
            .find(|b| b.contains("\nname = \"ash\"\n"))
            .and_then(|b| {
                b.lines()
                    .find_map(|l| l.strip_prefix("version = "))
                    .map(|v| v.trim_matches('"').to_string())
            })
            .ok_or("Cargo.lock pins no version of ash")?;
        let dir = ash_dir(&version)?;
        let mut texts = Vec::new();
        for e in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let p = e.map_err(|e| e.to_string())?.path();
            if p.extension().is_some_and(|x| x == "rs") {
                texts.push(
                    std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?,
                );
            }
        }
        let mut a = Ash::parse(&texts.iter().map(String::as_str).collect::<Vec<_>>());
        a.version = version;
        Ok(a)
    }

    /// The names `ash`'s sources define: structures, unions, type aliases, handles, function
    /// pointer types.
    pub fn parse(texts: &[&str]) -> Ash {
        let mut a = Ash::default();
        for text in texts {
            let mut lines = text.lines().peekable();
            while let Some(l) = lines.next() {
                let l = l.trim_start();
                if let Some(rest) = l.strip_prefix("pub type PFN_") {
                    // `pub type PFN_vkX = unsafe extern "system" fn(a: A, b: B) -> R;`, over lines.
                    let cmd: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    let mut decl = l.to_string();
                    while !decl.trim_end().ends_with(';') {
                        match lines.next() {
                            Some(n) => decl.push_str(n),
                            None => break,
                        }
                    }
                    let inner = decl
                        .split_once("fn(")
                        .map(|(_, r)| r.rsplit_once(')').map_or(r, |(p, _)| p))
                        .unwrap_or("");
                    let n = inner.split(',').filter(|p| p.contains(':')).count();
                    a.pfn.insert(cmd, n);
                    continue;
                }
                for kw in ["pub struct ", "pub union ", "pub type "] {
                    let Some(rest) = l.strip_prefix(kw) else {
                        continue;
                    };
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        let lifetime = rest[name.len()..].starts_with("<'a>");
                        a.types.insert(name, lifetime);
                    }
                }
                // `define_handle!(` / `handle_nondispatchable ! (Name , …` (the name on this line
                // or the next).
                let squeezed: String = l.chars().filter(|c| !c.is_whitespace()).collect();
                for mac in ["define_handle!(", "handle_nondispatchable!("] {
                    if let Some(rest) = squeezed.strip_prefix(mac) {
                        let name = if rest.is_empty() {
                            lines
                                .peek()
                                .map(|n| n.trim().trim_end_matches(',').to_string())
                        } else {
                            rest.split(',').next().map(str::to_string)
                        };
                        if let Some(n) = name.filter(|n| !n.is_empty()) {
                            a.types.insert(n, false);
                        }
                    }
                }
            }
        }
        a
    }

    /// Whether `ash` has a function-pointer type for command `name` with `params` parameters
    /// (one with another count is of an older registry: a provisional extension changed since).
    pub fn has_pfn(&self, name: &str, params: usize) -> bool {
        self.pfn.get(name) == Some(&params)
    }

    /// `vk::Name` (with `<'_>` where it has a lifetime) for registry type `ty`, under the first
    /// of its names `ash` has.
    fn named(&self, reg: &Registry, ty: &str) -> Option<String> {
        reg.type_names(ty).into_iter().find_map(|n| {
            // ash has one type for a bitmask and its bits: `VkShaderStageFlagBits` →
            // `vk::ShaderStageFlags`.
            let n = n.replace("FlagBits", "Flags");
            let bare = n.strip_prefix("Vk")?;
            self.types.get(bare).map(|lifetime| {
                if *lifetime {
                    format!("vk::{bare}<'_>")
                } else {
                    format!("vk::{bare}")
                }
            })
        })
    }

    /// The Rust type of a value of C type `ty` (not behind a pointer), `None` when it can only
    /// travel behind one (`void`, a structure `ash` lacks).
    fn value(&self, reg: &Registry, ty: &str) -> Option<String> {
        let base = match ty {
            "void" => return None,
            "char" => "c_char",
            "uint8_t" => "u8",
            "int8_t" => "i8",
            "uint16_t" => "u16",
            "int16_t" => "i16",
            "uint32_t" => "u32",
            "int32_t" => "i32",
            "uint64_t" => "u64",
            "int64_t" => "i64",
            "size_t" => "usize",
            "int" => "i32",
            "float" => "f32",
            "double" => "f64",
            _ => "",
        };
        if !base.is_empty() {
            return Some(base.to_string());
        }
        if let Some(n) = self.named(reg, ty) {
            return Some(n);
        }
        // Not in ash: the ABI type.
        Some(
            match reg.kind(ty) {
                Kind::Dispatchable => "usize",
                Kind::Handle => "u64",
                Kind::Enum => "i32",
                Kind::Bitmask => "u32",
                Kind::Bitmask64 => "u64",
                Kind::Base(u) => return self.value(reg, &u),
                _ => return None,
            }
            .to_string(),
        )
    }

    /// The Rust type of a command parameter (or, with an empty name, a result), from its C
    /// declaration: `const VkBufferCopy* pRegions` → `*const vk::BufferCopy`, `const char* const*
    /// ppNames` → `*const *const c_char`, `const float blendConstants[4]` → `*const [f32; 4]`.
    pub fn param(&self, reg: &Registry, p: &Param) -> Result<String, String> {
        let decl = p.code.trim();
        // The declarator without the parameter's name (the last word) and an array suffix.
        let (decl, array) = match decl.find('[') {
            Some(i) => (&decl[..i], Some(decl[i + 1..].trim_end_matches(']').trim())),
            None => (decl, None),
        };
        let decl = decl.trim_end();
        let decl = decl
            .strip_suffix(p.name.as_str())
            .ok_or_else(|| format!("{}: cannot read `{}`", p.name, p.code))?;
        // `[const] T { * [const] }`: each pointer's pointee is const when `const` comes right
        // before its `*` (or, for the first, anywhere before it).
        let mut consts = Vec::new();
        let mut lead_const = false;
        let mut seen_type = false;
        let mut pending_const = false;
        for tok in decl.replace('*', " * ").split_whitespace() {
            match tok {
                "const" if !seen_type => lead_const = true,
                "const" => pending_const = true,
                "*" => {
                    consts.push(if consts.is_empty() {
                        lead_const || pending_const
                    } else {
                        pending_const
                    });
                    pending_const = false;
                }
                "struct" => {}
                _ => seen_type = true,
            }
        }
        let ptr_to = |inner: String, constant: bool| {
            format!("*{} {inner}", if constant { "const" } else { "mut" })
        };
        let mut t = match (self.value(reg, &p.ty), consts.is_empty() && array.is_none()) {
            (Some(v), _) => v,
            (None, false) => "c_void".to_string(),
            (None, true) => return Err(format!("{}: no Rust type for {}", p.name, p.ty)),
        };
        if let Some(n) = array {
            let n: usize = n
                .parse()
                .map_err(|_| format!("{}: array of {n} elements", p.name))?;
            // A C array parameter is a pointer to its first element; ash passes `*const [T; N]`.
            return Ok(ptr_to(format!("[{t}; {n}]"), lead_const));
        }
        for c in consts {
            t = ptr_to(t, c);
        }
        Ok(t)
    }
}

/// `$CARGO_HOME/registry/src/*/ash-VERSION/src/vk`.
fn ash_dir(version: &str) -> Result<PathBuf, String> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let src = home.join("registry/src");
    let dirs = std::fs::read_dir(&src).map_err(|e| format!("{}: {e}", src.display()))?;
    for d in dirs.flatten() {
        let p = d.path().join(format!("ash-{version}/src/vk"));
        if p.is_dir() {
            return Ok(p);
        }
    }
    Err(format!(
        "ash {version}'s sources are not under {} (build the layer once: cargo fetches them)",
        src.display()
    ))
}
