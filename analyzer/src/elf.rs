//! Function names from an ELF file's symbol table (`.symtab`, else `.dynsym`), for creation sites
//! in binaries without debug info (issue 16). Plain byte parsing: no Vulkan, no external tool,
//! never a panic on any input (a malformed file gives no symbols).

/// One function symbol: `[start, start + size)` in the file's virtual addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub start: u64,
    pub size: u64,
    pub name: String,
}

/// The function symbols of an ELF image, sorted by start, demangled where they are Rust's legacy
/// mangling. Empty for anything that is not ELF or has neither symbol table.
pub fn function_symbols(image: &[u8]) -> Vec<Symbol> {
    parse(image).unwrap_or_default()
}

/// The function containing virtual address `addr`, and the offset into it.
pub fn lookup(symbols: &[Symbol], addr: u64) -> Option<(&Symbol, u64)> {
    let i = symbols.partition_point(|s| s.start <= addr);
    // Symbols may nest or share a start; look back a little for one that covers the address.
    symbols[..i]
        .iter()
        .rev()
        .take(8)
        .find(|s| addr < s.start.saturating_add(s.size.max(1)))
        .map(|s| (s, addr - s.start))
}

struct Rd<'a> {
    b: &'a [u8],
    le: bool,
}

impl Rd<'_> {
    fn bytes<const N: usize>(&self, o: u64) -> Option<[u8; N]> {
        let o = usize::try_from(o).ok()?;
        self.b.get(o..o.checked_add(N)?)?.try_into().ok()
    }
    fn u16(&self, o: u64) -> Option<u16> {
        let b = self.bytes::<2>(o)?;
        Some(if self.le {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        })
    }
    fn u32(&self, o: u64) -> Option<u32> {
        let b = self.bytes::<4>(o)?;
        Some(if self.le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    }
    fn u64(&self, o: u64) -> Option<u64> {
        let b = self.bytes::<8>(o)?;
        Some(if self.le {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        })
    }
    fn cstr(&self, o: u64, end: u64) -> Option<&str> {
        let o = usize::try_from(o).ok()?;
        let end = usize::try_from(end).ok()?.min(self.b.len());
        let s = self.b.get(o..end)?;
        let n = s.iter().position(|&c| c == 0)?;
        std::str::from_utf8(&s[..n]).ok()
    }
}

struct Section {
    ty: u32,
    offset: u64,
    size: u64,
    link: u32,
    entsize: u64,
}

fn parse(image: &[u8]) -> Option<Vec<Symbol>> {
    if image.get(0..4)? != b"\x7fELF" {
        return None;
    }
    let is64 = *image.get(4)? == 2;
    let r = Rd {
        b: image,
        le: *image.get(5)? == 1,
    };
    let (shoff, shentsize, shnum) = if is64 {
        (r.u64(0x28)?, r.u16(0x3a)? as u64, r.u16(0x3c)? as u64)
    } else {
        (
            r.u32(0x20)? as u64,
            r.u16(0x2e)? as u64,
            r.u16(0x30)? as u64,
        )
    };
    let mut sections = Vec::new();
    for i in 0..shnum.min(4096) {
        let h = shoff.checked_add(i.checked_mul(shentsize)?)?;
        let s = if is64 {
            Section {
                ty: r.u32(h + 4)?,
                offset: r.u64(h + 24)?,
                size: r.u64(h + 32)?,
                link: r.u32(h + 40)?,
                entsize: r.u64(h + 56)?,
            }
        } else {
            Section {
                ty: r.u32(h + 4)?,
                offset: r.u32(h + 16)? as u64,
                size: r.u32(h + 20)? as u64,
                link: r.u32(h + 24)?,
                entsize: r.u32(h + 36)? as u64,
            }
        };
        sections.push(s);
    }
    const SHT_SYMTAB: u32 = 2;
    const SHT_DYNSYM: u32 = 11;
    let table = sections
        .iter()
        .find(|s| s.ty == SHT_SYMTAB)
        .or_else(|| sections.iter().find(|s| s.ty == SHT_DYNSYM))?;
    let strtab = sections.get(table.link as usize)?;
    let strtab_end = strtab.offset.checked_add(strtab.size)?;
    let entsize = if table.entsize == 0 {
        if is64 {
            24
        } else {
            16
        }
    } else {
        table.entsize
    };
    let mut out = Vec::new();
    let count = (table.size / entsize).min(4_000_000);
    for i in 0..count {
        let e = table.offset.checked_add(i.checked_mul(entsize)?)?;
        let (name, info, shndx, value, size) = if is64 {
            (
                r.u32(e)?,
                *image.get(usize::try_from(e + 4).ok()?)?,
                r.u16(e + 6)?,
                r.u64(e + 8)?,
                r.u64(e + 16)?,
            )
        } else {
            (
                r.u32(e)?,
                *image.get(usize::try_from(e + 12).ok()?)?,
                r.u16(e + 14)?,
                r.u32(e + 4)? as u64,
                r.u32(e + 8)? as u64,
            )
        };
        const STT_FUNC: u8 = 2;
        if info & 0xf != STT_FUNC || shndx == 0 || value == 0 {
            continue;
        }
        let Some(raw) = strtab
            .offset
            .checked_add(name as u64)
            .and_then(|o| r.cstr(o, strtab_end))
        else {
            continue;
        };
        if raw.is_empty() {
            continue;
        }
        out.push(Symbol {
            start: value,
            size,
            name: demangle(raw),
        });
    }
    out.sort_by(|a, b| a.start.cmp(&b.start).then(b.size.cmp(&a.size)));
    out.dedup_by(|a, b| a.start == b.start && a.size == b.size);
    Some(out)
}

/// Rust's legacy mangling (`_ZN3foo3bar17h0123456789abcdefE` → `foo::bar`); anything else is
/// returned as it is.
pub fn demangle(s: &str) -> String {
    legacy_rust(s).unwrap_or_else(|| s.to_string())
}

fn legacy_rust(s: &str) -> Option<String> {
    let body = s.strip_prefix("_ZN").or_else(|| s.strip_prefix("__ZN"))?;
    let mut rest = body;
    let mut parts: Vec<String> = Vec::new();
    loop {
        if let Some(after) = rest.strip_prefix('E') {
            // Only a suffix like `.llvm.123` may follow the end.
            if !(after.is_empty() || after.starts_with('.')) {
                return None;
            }
            break;
        }
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let n: usize = rest[..digits].parse().ok()?;
        let ident = rest.get(digits..digits.checked_add(n)?)?;
        rest = &rest[digits + n..];
        parts.push(unescape(ident));
    }
    if parts.last().is_some_and(|h| {
        h.len() == 17 && h.starts_with('h') && h[1..].bytes().all(|b| b.is_ascii_hexdigit())
    }) {
        parts.pop();
    }
    if parts.is_empty() {
        return None;
    }
    Some(parts.join("::"))
}

fn unescape(ident: &str) -> String {
    // A leading `_` only guards an identifier that starts with an escape (`_$LT$`).
    let ident = ident
        .strip_prefix('_')
        .filter(|r| r.starts_with('$'))
        .unwrap_or(ident);
    let mut out = String::new();
    let mut rest = ident;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("..") {
            out.push_str("::");
            rest = r;
        } else if rest.starts_with('$') {
            let Some(end) = rest[1..].find('$') else {
                out.push_str(rest);
                break;
            };
            let code = &rest[1..1 + end];
            let ch = match code {
                "SP" => Some('@'),
                "BP" => Some('*'),
                "RF" => Some('&'),
                "LT" => Some('<'),
                "GT" => Some('>'),
                "LP" => Some('('),
                "RP" => Some(')'),
                "C" => Some(','),
                _ => code
                    .strip_prefix('u')
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .and_then(char::from_u32),
            };
            match ch {
                Some(c) => out.push(c),
                None => out.push_str(&rest[..end + 2]),
            }
            rest = &rest[end + 2..];
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_legacy_rust() {
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
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_ZN3foo"), "_ZN3foo");
        assert_eq!(demangle("_ZN99E"), "_ZN99E");
    }

    #[test]
    fn reads_this_test_binarys_own_symbols() {
        let exe = std::env::current_exe().unwrap();
        let syms = function_symbols(&std::fs::read(exe).unwrap());
        assert!(syms.len() > 100, "{}", syms.len());
        let me = syms
            .iter()
            .find(|s| s.name.ends_with("reads_this_test_binarys_own_symbols"))
            .expect("this test function is in the symbol table");
        let (hit, off) = lookup(&syms, me.start + 3).unwrap();
        assert_eq!(hit.name, me.name);
        assert_eq!(off, 3);
        // Junk and every prefix of a real file: no panic, maybe no symbols.
        assert!(function_symbols(b"not an elf").is_empty());
        let bytes = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        for cut in [0, 4, 64, 1000] {
            let _ = function_symbols(&bytes[..cut.min(bytes.len())]);
        }
    }
}
