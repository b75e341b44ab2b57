//! The analyzer's rule (DESIGN, docs/architecture.md): it makes no Vulkan calls. Nothing in the
//! crate may depend on a Vulkan binding or the loader; the CLI that does (`vkecho doctor`) lives
//! in `cli/`.

use std::path::Path;

#[test]
fn analyzer_depends_on_no_vulkan_binding() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .expect("analyzer/Cargo.toml has a [dependencies] table");
    for banned in ["ash", "vulkano", "erupt", "libloading", "vk-sys", "libc"] {
        assert!(
            !deps
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{banned} "))
                    || l.trim_start().starts_with(&format!("{banned}="))),
            "analyzer/Cargo.toml depends on `{banned}`: the analyzer makes no Vulkan calls"
        );
    }
    assert!(
        !root.join("src/bin").exists(),
        "analyzer/src/bin exists: binaries belong in cli/"
    );
}

#[test]
fn analyzer_sources_name_no_vulkan_entry_point() {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    assert!(files.len() > 5, "found the analyzer's sources");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        // Names of modules (e.g. "libvulkan.so.1") are data the analyzer reads; a binding is not.
        for needle in ["ash::", "use ash", "extern \"system\""] {
            assert!(
                !names(&text, needle),
                "{} mentions `{needle}`: the analyzer makes no Vulkan calls",
                f.display()
            );
        }
    }
}

/// Whether `text` holds `needle` as a word of its own: `ash::` in `use ash::vk` but not in
/// `crate::fasthash::FastMap`.
fn names(text: &str, needle: &str) -> bool {
    text.match_indices(needle).any(|(at, _)| {
        !text[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

#[test]
fn the_word_check_catches_a_binding_and_not_a_longer_name() {
    assert!(names("use ash::vk;", "ash::"));
    assert!(names("let f = ash::vk::Buffer::null();", "ash::"));
    assert!(names(
        "x\n    extern \"system\" fn f()",
        "extern \"system\""
    ));
    assert!(!names("use crate::fasthash::FastMap;", "ash::"));
    assert!(!names("let splash::x = 1;", "ash::"));
}
