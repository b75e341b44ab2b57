//! Issue 11, defect 1: no pointer echo hands out may be interposed.
//!
//! In a program linked with `-lvulkan` the loader's `vkGetInstanceProcAddr` & co. are in the
//! global symbol scope. If the layer library refers to its *own* exported names through GOT
//! entries (`R_X86_64_GLOB_DAT` / `JUMP_SLOT`, or the aarch64 equivalents), the dynamic linker
//! resolves those references to the loader's functions, the pointers echo gives the loader point
//! back into the loader, and `vkCreateInstance` hangs. The test reads the built library's
//! dynamic relocations and fails on any against an exported name; a planted library shows that
//! the check finds such a relocation when one exists.

use echo_tests::world::artifact;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Names a shared library defines and exports (dynamic symbol table, not UND).
fn exported(lib: &Path) -> Vec<String> {
    let out = readelf(&["--dyn-syms", "-W"], lib);
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // Num: Value Size Type Bind Vis Ndx Name
            if f.len() >= 8 && f[0].ends_with(':') && f[6] != "UND" && f[4] == "GLOBAL" {
                Some(f[7].split('@').next().unwrap_or(f[7]).to_string())
            } else {
                None
            }
        })
        .collect()
}

/// Dynamic relocations that go through the symbol table against one of `names`.
fn interposable_relocations(lib: &Path, names: &[String]) -> Vec<String> {
    let out = readelf(&["-rW"], lib);
    out.lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() >= 5
                && (f[2].ends_with("GLOB_DAT")
                    || f[2].ends_with("JUMP_SLOT")
                    || f[2].ends_with("_64")
                    || f[2].ends_with("ABS64"))
                && names
                    .iter()
                    .any(|n| f[4].split('@').next() == Some(n.as_str()))
        })
        .map(str::to_string)
        .collect()
}

fn readelf(args: &[&str], lib: &Path) -> String {
    let out = Command::new("readelf")
        .args(args)
        .arg(lib)
        .output()
        .expect("readelf (binutils) must be installed: scripts/deps.sh installs it");
    assert!(
        out.status.success(),
        "readelf {args:?} {} failed",
        lib.display()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `lib` exports every name in `must_export`, and refers to none of its exported names through
/// an interposable relocation (it is linked `-Bsymbolic`). Returns its dynamic section.
fn assert_binds_its_exports_internally(lib: &Path, must_export: &[&str]) -> String {
    let names = exported(lib);
    for n in must_export {
        assert!(
            names.iter().any(|e| e == n),
            "{n} not exported by {}: {names:?}",
            lib.display()
        );
    }
    let bad = interposable_relocations(lib, &names);
    assert!(
        bad.is_empty(),
        "{} refers to its own exported names through interposable relocations (link with -Bsymbolic):\n{}",
        lib.display(),
        bad.join("\n")
    );
    readelf(&["-dW"], lib)
}

#[test]
fn layer_library_binds_its_own_exports_internally() {
    let dynamic = assert_binds_its_exports_internally(
        &artifact("libVkLayer_echo.so"),
        &[
            "vkGetInstanceProcAddr",
            "vkGetDeviceProcAddr",
            "vkNegotiateLoaderLayerInterfaceVersion",
        ],
    );
    assert!(
        dynamic.contains("SYMBOLIC"),
        "DT_FLAGS lacks SYMBOLIC:\n{dynamic}"
    );
    assert!(
        dynamic.contains("NODELETE"),
        "DT_FLAGS_1 lacks NODELETE:\n{dynamic}"
    );
}

/// The test layer below echo is loaded into the same `-lvulkan` programs (tests/c), so it must
/// bind its own exports internally too: without it `vkCreateInstance` under echo hung there.
#[test]
fn test_layer_binds_its_own_exports_internally() {
    assert_binds_its_exports_internally(
        &artifact("libVkLayer_echo_test_discrete.so"),
        &["vkGetInstanceProcAddr"],
    );
}

/// The detector has teeth: a library that hands out a pointer to its own exported function,
/// linked without `-Bsymbolic`, has exactly such a relocation; with `-Bsymbolic` it has none.
#[test]
fn planted_interposable_pointer_is_found() {
    let dir: PathBuf = std::env::temp_dir().join(format!("echo-symbols-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("planted.c");
    std::fs::write(
        &src,
        "typedef void (*fn)(void);\n\
         void vkGetInstanceProcAddr(void) {}\n\
         fn hand_out(void) { return vkGetInstanceProcAddr; }\n",
    )
    .unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let build = |name: &str, extra: &[&str]| -> PathBuf {
        let out = dir.join(name);
        let st = Command::new(&cc)
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(&out)
            .arg(&src)
            .args(extra)
            .status()
            .expect("a C compiler (cc)");
        assert!(st.success(), "cc failed for {name}");
        out
    };
    let plain = build("libplanted.so", &[]);
    let symbolic = build("libplanted-symbolic.so", &["-Wl,-Bsymbolic"]);
    let names = exported(&plain);
    assert!(
        !interposable_relocations(&plain, &names).is_empty(),
        "the check missed the planted relocation:\n{}",
        readelf(&["-rW"], &plain)
    );
    assert!(interposable_relocations(&symbolic, &exported(&symbolic)).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
