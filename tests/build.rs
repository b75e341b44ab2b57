//! Compiles `shaders/*.comp` (GLSL) to SPIR-V in OUT_DIR with glslangValidator (Debian package
//! `glslang-tools`, as for the samples), for the test programs in src/bin.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"))
        .join("shaders");
    let tool = std::env::var("GLSLANG_VALIDATOR").unwrap_or_else(|_| "glslangValidator".into());
    println!("cargo:rerun-if-env-changed=GLSLANG_VALIDATOR");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("read_dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "comp"))
        .collect();
    sources.sort();
    for src in sources {
        println!("cargo:rerun-if-changed={}", src.display());
        let spv = out.join(src.file_stem().unwrap()).with_extension("spv");
        let o = Command::new(&tool)
            .args(["-V", "--target-env", "vulkan1.1", "-o"])
            .arg(&spv)
            .arg(&src)
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run `{tool}` (install glslang-tools or set GLSLANG_VALIDATOR): {e}")
            });
        assert!(
            o.status.success(),
            "{tool} failed on {}:\n{}{}",
            src.display(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
