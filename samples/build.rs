//! Compiles every `shaders/*.comp` (GLSL) to SPIR-V in OUT_DIR with glslangValidator
//! (Debian package `glslang-tools`). Shaders that use GL_EXT_buffer_reference need SPIR-V 1.5
//! (Vulkan 1.2); the others target Vulkan 1.1.

use std::path::PathBuf;
use std::process::Command;
use std::{env, fs, io};

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"))
        .join("shaders");
    let tool = env::var("GLSLANG_VALIDATOR").unwrap_or_else(|_| "glslangValidator".into());
    println!("cargo:rerun-if-env-changed=GLSLANG_VALIDATOR");
    println!("cargo:rerun-if-changed={}", dir.display());

    let mut sources: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("read_dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "comp"))
        .collect();
    sources.sort();

    for src in sources {
        println!("cargo:rerun-if-changed={}", src.display());
        let text = fs::read_to_string(&src).expect("read shader");
        let target = if text.contains("GL_EXT_buffer_reference") {
            "vulkan1.2"
        } else {
            "vulkan1.1"
        };
        let spv = out.join(src.file_stem().unwrap()).with_extension("spv");
        let result = Command::new(&tool)
            .args(["-V", "--target-env", target, "-o"])
            .arg(&spv)
            .arg(&src)
            .output();
        match result {
            Err(e) if e.kind() == io::ErrorKind::NotFound => panic!(
                "`{tool}` not found: it compiles the sample shaders to SPIR-V. \
                 Install the Debian/Ubuntu package `glslang-tools` (apt-get install glslang-tools), \
                 or set GLSLANG_VALIDATOR to its path."
            ),
            Err(e) => panic!("cannot run `{tool}`: {e}"),
            Ok(o) if !o.status.success() => panic!(
                "{tool} failed on {}:\n{}{}",
                src.display(),
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
            Ok(_) => {}
        }
    }
}
