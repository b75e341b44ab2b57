//! The context a trace was recorded in and a plan applies to (DESIGN §5), and the rule that
//! decides whether a plan may be enforced in the current process.
//!
//! Pure functions over bytes and strings: the layer gathers the facts (its own executable, its
//! arguments, the device properties) and asks here.

use crate::settings::ContextMode;
use crate::trace::{fnv1a64, Context};
use std::path::{Path, PathBuf};

/// The GNU build-id of an ELF image (hex), if it has one. Never panics on any input.
pub fn elf_build_id(image: &[u8]) -> Option<String> {
    build_id_from(|off, len| {
        let end = usize::try_from(off).ok()?.checked_add(len)?;
        image
            .get(usize::try_from(off).ok()?..end)
            .map(<[u8]>::to_vec)
    })
}

/// The GNU build-id of the ELF file at `path`, reading only its header, its program headers and
/// its note segments (an executable is tens or hundreds of MiB; its identity is a few bytes).
pub fn elf_file_build_id(path: &Path) -> Option<String> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path).ok()?;
    build_id_from(|off, len| {
        // Notes are small; a header that claims more is not an ELF file echo should believe.
        if len > 1 << 20 {
            return None;
        }
        let mut buf = vec![0u8; len];
        f.read_exact_at(&mut buf, off).ok()?;
        Some(buf)
    })
}

/// The build-id through `at(offset, len)`, which gives exactly `len` bytes at `offset` or None.
fn build_id_from(at: impl Fn(u64, usize) -> Option<Vec<u8>>) -> Option<String> {
    let rd = |b: &[u8], o: usize, n: usize, le: bool| -> Option<u64> {
        let s = b.get(o..o.checked_add(n)?)?;
        let mut v = 0u64;
        for i in 0..n {
            let byte = if le { s[n - 1 - i] } else { s[i] };
            v = (v << 8) | u64::from(byte);
        }
        Some(v)
    };
    let ident = at(0, 6)?;
    if ident.get(0..4)? != b"\x7fELF" {
        return None;
    }
    let is64 = ident[4] == 2;
    let le = ident[5] == 1;
    let header = at(0, if is64 { 0x40 } else { 0x34 })?;
    // Program headers: PT_NOTE segments hold the build-id note.
    let (phoff, phentsize, phnum) = if is64 {
        (
            rd(&header, 0x20, 8, le)?,
            rd(&header, 0x36, 2, le)? as usize,
            rd(&header, 0x38, 2, le)? as usize,
        )
    } else {
        (
            rd(&header, 0x1c, 4, le)?,
            rd(&header, 0x2a, 2, le)? as usize,
            rd(&header, 0x2c, 2, le)? as usize,
        )
    };
    let need = if is64 { 0x38 } else { 0x20 };
    if phnum == 0 || phentsize < need {
        return None;
    }
    let phdrs = at(phoff, phnum.min(256).checked_mul(phentsize)?)?;
    for i in 0..phnum.min(256) {
        let ph = i * phentsize;
        if rd(&phdrs, ph, 4, le)? != 4 {
            continue; // not PT_NOTE
        }
        let (off, size) = if is64 {
            (rd(&phdrs, ph + 8, 8, le)?, rd(&phdrs, ph + 32, 8, le)?)
        } else {
            (rd(&phdrs, ph + 4, 4, le)?, rd(&phdrs, ph + 16, 4, le)?)
        };
        let Some(notes) = at(off, usize::try_from(size).ok()?) else {
            continue;
        };
        let mut p = 0usize;
        while p.checked_add(12).is_some_and(|end| end <= notes.len()) {
            let namesz = rd(&notes, p, 4, le)? as usize;
            let descsz = rd(&notes, p + 4, 4, le)? as usize;
            let ntype = rd(&notes, p + 8, 4, le)?;
            let name_at = p + 12;
            let desc_at = name_at.checked_add(namesz.checked_add(3)? & !3)?;
            let next = desc_at.checked_add(descsz.checked_add(3)? & !3)?;
            let name = notes.get(name_at..name_at.checked_add(namesz)?)?;
            if ntype == 3 && name == b"GNU\0" {
                let desc = notes.get(desc_at..desc_at.checked_add(descsz)?)?;
                return Some(desc.iter().map(|b| format!("{b:02x}")).collect());
            }
            p = next;
        }
    }
    None
}

/// Identity of an executable file: `build-id:<hex>` when it has one (read from its note
/// segments alone), else `fnv64:<hex>` of its contents, else `unknown`.
pub fn exe_identity(path: &Path) -> String {
    if let Some(id) = elf_file_build_id(path) {
        return format!("build-id:{id}");
    }
    match std::fs::read(path) {
        Ok(bytes) => format!("fnv64:{:016x}", fnv1a64(&bytes)),
        Err(_) => "unknown".into(),
    }
}

/// FNV-1a 64 over the arguments after the program name, NUL-separated, as hex.
pub fn args_hash<S: AsRef<[u8]>>(args: &[S]) -> String {
    let mut bytes = Vec::new();
    for a in args {
        bytes.extend_from_slice(a.as_ref());
        bytes.push(0);
    }
    format!("{:016x}", fnv1a64(&bytes))
}

/// The memory table of a device as one line, the form [`Context::memory_table`] records:
/// `heaps SIZE/0xFLAGS,...; types 0xFLAGS@HEAP,...` (heaps as `(size, flags)`, types as
/// `(heapIndex, propertyFlags)`, in the device's order). Two devices with the same text present
/// the same table.
pub fn memory_table_text(
    heaps: impl IntoIterator<Item = (u64, u32)>,
    types: impl IntoIterator<Item = (u32, u32)>,
) -> String {
    let heaps: Vec<String> = heaps
        .into_iter()
        .map(|(size, flags)| format!("{size}/0x{flags:x}"))
        .collect();
    let types: Vec<String> = types
        .into_iter()
        .map(|(heap, flags)| format!("0x{flags:x}@{heap}"))
        .collect();
    format!("heaps {}; types {}", heaps.join(","), types.join(","))
}

/// Whether a plan made in `plan` may be enforced in `now`. The error says which field differs.
/// The executable path may differ (a program may be moved); its identity may not.
pub fn plan_applies(plan: &Context, now: &Context) -> Result<(), String> {
    plan_applies_in(plan, now, ContextMode::Arguments)
}

/// Whether a plan's context names the device by its model (issue 27: name, vendor and device id,
/// driver version, memory table, pipeline cache UUID) rather than by one board's UUID. Plans
/// written before issue 27 have no memory table and stay keyed by the UUID.
pub fn keyed_by_model(plan: &Context) -> bool {
    !plan.memory_table.is_empty()
}

/// [`plan_applies`] under a `context` setting: with [`ContextMode::Program`] the arguments may
/// differ (the plan's buffers are matched by identity at creation, `crate::program`).
///
/// A plan that records the device model ([`keyed_by_model`]) applies on every device of the same
/// model, driver and memory table — another board of a fleet, a replaced board — whatever its
/// `device_uuid`; an older plan only on the device whose UUID it names.
pub fn plan_applies_in(plan: &Context, now: &Context, mode: ContextMode) -> Result<(), String> {
    type Field<'a> = (&'a str, &'a dyn Fn(&Context) -> String);
    let by_model = keyed_by_model(plan);
    let mut fields: Vec<Field> = vec![
        ("executable", &|c| c.exe_id.clone()),
        ("arguments", &|c| c.args_hash.clone()),
        ("device", &|c| c.device_name.clone()),
    ];
    if by_model {
        fields.extend([
            (
                "device model (vendor:device id)",
                &(|c: &Context| format!("0x{:04x}:0x{:04x}", c.vendor_id, c.device_id))
                    as &dyn Fn(&Context) -> String,
            ),
            ("driver version", &|c: &Context| {
                c.driver_version.to_string()
            }),
            ("memory table", &|c: &Context| c.memory_table.clone()),
        ]);
        if !plan.pipeline_cache_uuid.is_empty() {
            fields.push(("driver build (pipeline cache UUID)", &|c: &Context| {
                c.pipeline_cache_uuid.clone()
            }));
        }
    } else {
        fields.extend([
            (
                "device UUID",
                &(|c: &Context| c.device_uuid.clone()) as &dyn Fn(&Context) -> String,
            ),
            ("driver version", &|c: &Context| {
                c.driver_version.to_string()
            }),
        ]);
    }
    for (what, get) in fields {
        if what == "arguments" && mode == ContextMode::Program {
            continue;
        }
        let (a, b) = (get(plan), get(now));
        if a != b {
            let hint = match what {
                "executable" | "arguments" => "",
                _ if by_model => {
                    "; a plan travels only between devices of the same model, driver and memory table"
                }
                _ => "; this plan predates model keys and applies only to the device it was made on",
            };
            return Err(format!(
                "the plan was made for another {what} ('{a}', this run has '{b}'){hint}"
            ));
        }
    }
    Ok(())
}

/// Where auto mode keeps the trace and plan of a context (DESIGN §6): one directory per
/// (executable, arguments, device model, driver, memory table), so a plan is only ever found by
/// the run it fits — on this board or on any other of the same model ([`plan_applies_in`]).
pub fn cache_paths(cache_dir: &Path, c: &Context) -> (PathBuf, PathBuf) {
    cache_paths_for(cache_dir, c, ContextMode::Arguments)
}

/// The entry's directory name: `<program>-<16 hex>` of `key`.
fn entry_dir(cache_dir: &Path, c: &Context, key: &str) -> (PathBuf, PathBuf) {
    let exe = Path::new(&c.exe_path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "app".into());
    let safe: String = exe
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || ch == '-' || ch == '_' {
                ch
            } else {
                '_'
            }
        })
        .collect();
    let id = fnv1a64(key.as_bytes());
    let dir = cache_dir.join(format!("{safe}-{id:016x}"));
    (dir.join("trace.jsonl"), dir.join("plan.json"))
}

/// [`cache_paths`] under a `context` setting: with [`ContextMode::Program`] one directory per
/// (executable, device model, driver, table), whatever the arguments. The board's UUID is no part
/// of the key (issue 27): an entry copied to another board of the same model is found there.
pub fn cache_paths_for(cache_dir: &Path, c: &Context, mode: ContextMode) -> (PathBuf, PathBuf) {
    let device = format!(
        "model\0{}\0{:04x}:{:04x}\0{}\0{}\0{}",
        c.device_name,
        c.vendor_id,
        c.device_id,
        c.driver_version,
        c.memory_table,
        c.pipeline_cache_uuid
    );
    let key = match mode {
        ContextMode::Arguments => format!("{}\0{}\0{device}", c.exe_id, c.args_hash),
        ContextMode::Program => format!("program\0{}\0{device}", c.exe_id),
    };
    entry_dir(cache_dir, c, &key)
}

/// Where a layer before issue 27 kept the entry of a context (keyed by the device UUID): enforce
/// still finds a plan there when the current entry has none, so a cache survives the upgrade.
pub fn legacy_cache_paths_for(
    cache_dir: &Path,
    c: &Context,
    mode: ContextMode,
) -> (PathBuf, PathBuf) {
    let key = match mode {
        ContextMode::Arguments => format!(
            "{}\0{}\0{}\0{}\0{}",
            c.exe_id, c.args_hash, c.device_name, c.device_uuid, c.driver_version
        ),
        ContextMode::Program => format!(
            "program\0{}\0{}\0{}\0{}",
            c.exe_id, c.device_name, c.device_uuid, c.driver_version
        ),
    };
    entry_dir(cache_dir, c, &key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_build_id_of_this_test_binary_or_none_but_never_panics() {
        let exe = std::env::current_exe().unwrap();
        let bytes = std::fs::read(&exe).unwrap();
        // Debian's gcc passes --build-id to the linker, so Rust binaries carry one.
        let id = elf_build_id(&bytes).expect("test binary has a GNU build-id");
        assert!(id.len() >= 16 && id.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(exe_identity(&exe), format!("build-id:{id}"));
        // Every prefix of a real ELF file, and junk, is handled without a panic.
        for cut in [0, 3, 4, 16, 64, 100, 1000, 4096] {
            let _ = elf_build_id(&bytes[..cut.min(bytes.len())]);
        }
        assert_eq!(elf_build_id(b"not an elf"), None);
        let mut bad = bytes.clone();
        bad[0x20..0x28].copy_from_slice(&u64::MAX.to_le_bytes()); // absurd phoff
        assert_eq!(elf_build_id(&bad), None);
    }

    /// The file form reads only headers and notes, and agrees with the whole-image form on the
    /// real binary, on prefixes of it, on junk and on an ELF file without a build-id note.
    #[test]
    fn the_file_build_id_agrees_with_the_image_and_falls_back_to_a_hash() {
        let exe = std::env::current_exe().unwrap();
        let bytes = std::fs::read(&exe).unwrap();
        assert_eq!(elf_file_build_id(&exe), elf_build_id(&bytes));
        assert!(elf_file_build_id(&exe).is_some());
        let dir = std::env::temp_dir().join(format!("echo-buildid-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("f");
        for cut in [0, 3, 4, 16, 64, 100, 1000, 4096, bytes.len() / 2] {
            std::fs::write(&f, &bytes[..cut.min(bytes.len())]).unwrap();
            assert_eq!(
                elf_file_build_id(&f),
                elf_build_id(&bytes[..cut]),
                "cut {cut}"
            );
        }
        // The note's type changed: an ELF file with no build-id is known by its contents' hash.
        let id = elf_build_id(&bytes).unwrap();
        let raw: Vec<u8> = (0..id.len() / 2)
            .map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        let at = bytes
            .windows(raw.len())
            .position(|w| w == raw.as_slice())
            .unwrap();
        let mut no_id = bytes.clone();
        no_id[at - 8..at - 4].copy_from_slice(&99u32.to_le_bytes()); // n_type
        std::fs::write(&f, &no_id).unwrap();
        assert_eq!(elf_file_build_id(&f), None);
        assert_eq!(exe_identity(&f), format!("fnv64:{:016x}", fnv1a64(&no_id)));
        assert_eq!(exe_identity(&dir.join("absent")), "unknown");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn context_mismatch_names_the_field() {
        let a = Context {
            exe_id: "build-id:aa".into(),
            device_name: "llvmpipe".into(),
            ..Default::default()
        };
        assert!(plan_applies(&a, &a.clone()).is_ok());
        let mut b = a.clone();
        b.exe_path = "/elsewhere".into();
        assert!(
            plan_applies(&a, &b).is_ok(),
            "a moved program keeps its plan"
        );
        b.driver_version = 7;
        let e = plan_applies(&a, &b).unwrap_err();
        assert!(e.contains("driver version"), "{e}");
        let mut c = a.clone();
        c.args_hash = args_hash(&["--iters", "3"]);
        assert!(plan_applies(&a, &c).unwrap_err().contains("arguments"));
    }

    /// A board of a fleet: the Jetson Nano's model, driver and table, and its own UUID.
    fn board(uuid: &str) -> Context {
        Context {
            exe_path: "/opt/app/infer".into(),
            exe_id: "build-id:aa".into(),
            device_name: "NVIDIA Tegra X1 (nvgpu)".into(),
            device_uuid: uuid.into(),
            driver_version: 0x7c_c0_00_00,
            vendor_id: 0x10de,
            device_id: 0x92ba_03d7,
            memory_table: memory_table_text([(4_156_002_304, 1)], [(0, 0), (0, 1), (0, 7)]),
            pipeline_cache_uuid: "c0ffee".into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_plan_travels_to_another_board_of_the_same_model_but_not_to_another_driver() {
        let a = board("0000000000000000000000000000000a");
        let b = board("0000000000000000000000000000000b");
        assert!(keyed_by_model(&a));
        assert_eq!(plan_applies(&a, &b), Ok(()), "another UUID, same model");
        assert_eq!(
            cache_paths(Path::new("/c"), &a),
            cache_paths(Path::new("/c"), &b),
            "the cache entry is the model's, not the board's"
        );
        for mode in [ContextMode::Arguments, ContextMode::Program] {
            assert_ne!(
                legacy_cache_paths_for(Path::new("/c"), &a, mode),
                legacy_cache_paths_for(Path::new("/c"), &b, mode)
            );
        }
        let mut newer = b.clone();
        newer.driver_version += 1;
        let e = plan_applies(&a, &newer).unwrap_err();
        assert!(e.contains("another driver version"), "{e}");
        assert!(e.contains("same model, driver and memory table"), "{e}");
        assert_ne!(
            cache_paths(Path::new("/c"), &a),
            cache_paths(Path::new("/c"), &newer)
        );
        let mut table = b.clone();
        table.memory_table = memory_table_text([(4_156_002_304, 1)], [(0, 1), (0, 7)]);
        assert!(plan_applies(&a, &table)
            .unwrap_err()
            .contains("another memory table"));
        let mut ids = b.clone();
        ids.device_id = 1;
        assert!(plan_applies(&a, &ids)
            .unwrap_err()
            .contains("vendor:device id"));
        let mut build = b.clone();
        build.pipeline_cache_uuid = "decaf".into();
        assert!(plan_applies(&a, &build)
            .unwrap_err()
            .contains("pipeline cache UUID"));
    }

    #[test]
    fn an_old_plan_without_a_model_stays_keyed_by_its_uuid() {
        // As a plan written before issue 27 reads: no ids, table or pipeline cache UUID.
        let json = r#"{"exe_path":"/opt/app/infer","exe_id":"build-id:aa","args_hash":"",
            "layer_version":"0.1.0","device_name":"NVIDIA Tegra X1 (nvgpu)",
            "device_uuid":"0000000000000000000000000000000a","driver_version":2092957696}"#;
        let old: Context = serde_json::from_str(json).unwrap();
        assert!(!keyed_by_model(&old));
        let same = board("0000000000000000000000000000000a");
        assert_eq!(plan_applies(&old, &same), Ok(()));
        let e = plan_applies(&old, &board("0000000000000000000000000000000b")).unwrap_err();
        assert!(
            e.contains("another device UUID") && e.contains("predates"),
            "{e}"
        );
        // Its cache entry was found under the UUID key, and still is.
        assert_ne!(
            legacy_cache_paths_for(Path::new("/c"), &same, ContextMode::Arguments),
            cache_paths(Path::new("/c"), &same)
        );
    }

    #[test]
    fn args_hash_separates_arguments() {
        assert_ne!(args_hash(&["ab", "c"]), args_hash(&["a", "bc"]));
        assert_eq!(args_hash(&["x"]), args_hash(&[b"x".to_vec()]));
    }

    #[test]
    fn cache_paths_differ_per_context() {
        let a = Context {
            exe_path: "/bin/my app".into(),
            exe_id: "1".into(),
            ..Default::default()
        };
        let b = Context {
            exe_id: "2".into(),
            ..a.clone()
        };
        let (ta, pa) = cache_paths(Path::new("/c"), &a);
        let (_, pb) = cache_paths(Path::new("/c"), &b);
        assert_ne!(pa, pb);
        assert!(ta.to_string_lossy().starts_with("/c/my_app-"), "{ta:?}");
        assert_eq!(ta.parent(), pa.parent());
    }
}
