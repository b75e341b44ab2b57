//! Compiles `shaders/*.comp` (GLSL) to SPIR-V in OUT_DIR with glslangValidator (Debian package
//! `glslang-tools`, as for the samples), for the test programs in src/bin and tests/c, and the
//! graphics shaders `shaders/*.vert|frag` into C headers the corpus includes; and the C
//! corpus `c/*.c` (issue 11) with the system C compiler into OUT_DIR, each linked with plain
//! `-lvulkan` (not dlopen: the loader's symbols in the global scope is the point of the corpus),
//! plus the `cc-args:` / `link-args:` a source names; c_vkfft (issue 26) against a patched copy
//! of Debian's VkFFT header (see `vkfft_header`).

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
        .filter(|p| {
            let fz = p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("fz_"));
            p.extension()
                .is_some_and(|x| x == "comp" || (fz && (x == "vert" || x == "frag")))
        })
        .collect();
    sources.sort();
    for src in sources {
        println!("cargo:rerun-if-changed={}", src.display());
        // echo-fuzzprog's draws (issue 53): fz_*.vert → fz_*_vert.spv, fz_*.frag → fz_*_frag.spv.
        let ext = src.extension().unwrap().to_string_lossy().into_owned();
        let spv = if ext == "comp" {
            out.join(src.file_stem().unwrap()).with_extension("spv")
        } else {
            out.join(format!(
                "{}_{ext}.spv",
                src.file_stem().unwrap().to_string_lossy()
            ))
        };
        // The C corpus's shaders (c_*.comp) target Vulkan 1.0: c_api10 runs on a 1.0 instance.
        // echo-fuzzprog's (fz_*.comp, issue 45) use device addresses: Vulkan 1.2.
        let stem = src.file_stem().unwrap().to_string_lossy().into_owned();
        let target = if stem.starts_with("c_") {
            "vulkan1.0"
        } else if stem.starts_with("fz_") {
            "vulkan1.2"
        } else {
            "vulkan1.1"
        };
        let o = Command::new(&tool)
            .args(["-V", "--target-env", target, "-o"])
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
    build_shader_headers(&tool, &dir, &out.join("spv"));
    build_c(&out);
    build_c_layers(&out);
}

/// The C corpus's graphics shaders, `shaders/*.vert` and `shaders/*.frag`, compiled into C
/// headers `OUT_DIR/spv/<stem>_<ext>.h` that define `const uint32_t <stem>_<ext>[]`
/// (`glslangValidator --vn`): c_draw.vert → `c_draw_vert.h` with `c_draw_vert[]`. The programs
/// include them (`build_c` adds `-I OUT_DIR/spv`), so a graphics program needs no SPIR-V path.
fn build_shader_headers(tool: &str, dir: &std::path::Path, spv_dir: &std::path::Path) {
    std::fs::create_dir_all(spv_dir).expect("create OUT_DIR/spv");
    let mut sources: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("read_dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "vert" || x == "frag"))
        .collect();
    sources.sort();
    for src in sources {
        println!("cargo:rerun-if-changed={}", src.display());
        let stem = src.file_stem().unwrap().to_string_lossy();
        let ext = src.extension().unwrap().to_string_lossy();
        let var = format!("{stem}_{ext}");
        let header = spv_dir.join(format!("{var}.h"));
        let o = Command::new(tool)
            .args(["-V", "--target-env", "vulkan1.0", "--vn", &var, "-o"])
            .arg(&header)
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

/// `c/layers/*.c` → `OUT_DIR/libVkLayer_echo_<stem>.so`: test-only layers written in C (issue 23:
/// `test_above`, placed above echo, makes the lookups capture layers make).
fn build_c_layers(out: &std::path::Path) {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"))
        .join("c/layers");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    println!("cargo:rerun-if-changed={}", dir.display());
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut sources: Vec<PathBuf> = rd
        .map(|e| e.expect("read_dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    sources.sort();
    for src in sources {
        println!("cargo:rerun-if-changed={}", src.display());
        let stem = src.file_stem().unwrap().to_string_lossy().into_owned();
        let lib = out.join(format!("libVkLayer_echo_{stem}.so"));
        let o = Command::new(&cc)
            .args([
                "-O1",
                "-Wall",
                "-Werror",
                "-std=c11",
                "-shared",
                "-fPIC",
                "-fvisibility=hidden",
                "-Wl,-Bsymbolic",
                "-o",
            ])
            .arg(&lib)
            .arg(&src)
            .output()
            .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
        assert!(
            o.status.success(),
            "`{cc}` failed to build the test layer {}:\n{}{}",
            src.display(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// `c/*.c` → `OUT_DIR/<stem>`: `$CC` (or `cc`) `-O1 -Wall -Werror -std=c11 … -lvulkan`.
fn build_c(out: &std::path::Path) {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"))
        .join("c");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-changed={}", dir.display());
    println!("cargo:rerun-if-changed={}", dir.join("common.h").display());
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("read_dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    sources.sort();
    for src in sources {
        println!("cargo:rerun-if-changed={}", src.display());
        let exe = out.join(src.file_stem().unwrap());
        let text = std::fs::read_to_string(&src).unwrap_or_default();
        // A program may add compiler and linker arguments with `cc-args:` / `link-args:` lines
        // in its source (c_vkfft links glslang and SPIRV-Tools).
        let extra = |key: &str| -> Vec<String> {
            text.lines()
                .filter_map(|l| l.split_once(key).map(|(_, rest)| rest))
                .flat_map(|rest| rest.split_whitespace().map(str::to_string))
                .collect()
        };
        let mut cc_args = extra("cc-args:");
        // The graphics shaders' headers (`build_shader_headers`).
        cc_args.push("-I".into());
        cc_args.push(out.join("spv").display().to_string());
        if text.contains("#include <vkFFT.h>") {
            match vkfft_header(out) {
                Some(dir) => {
                    cc_args.push("-isystem".into());
                    cc_args.push(dir.display().to_string());
                }
                None => {
                    println!(
                        "cargo:warning={} not built: /usr/include/vkFFT.h or glslang's headers \
                         are missing (Debian: apt-get install libvkfft-dev glslang-dev, or \
                         scripts/deps.sh)",
                        src.display()
                    );
                    continue;
                }
            }
        }
        let o = Command::new(&cc)
            .args(["-O1", "-Wall", "-Werror", "-std=c11"])
            .args(&cc_args)
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .arg("-lvulkan")
            .args(extra("link-args:"))
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run the C compiler `{cc}` (install gcc, or set CC): {e}")
            });
        assert!(
            o.status.success(),
            "`{cc}` failed to build {} with -lvulkan (the Vulkan headers and libvulkan.so come \
             from the Debian package libvulkan-dev: `apt-get install libvulkan-dev`):\n{}{}",
            src.display(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// VkFFT 1.2.26 as Debian ships it (libvkfft-dev), patched into `OUT_DIR/vkfft/vkFFT.h` in two
/// places so that its Vulkan backend builds as C against Debian bookworm's glslang 12 (`None` when
/// the header or glslang's is missing):
/// - `VkCommandBuffer commandBuffer = {};` (three times) is an empty scalar initializer, an error
///   in C before C23 (gcc 12): `= VK_NULL_HANDLE`;
/// - its own `glslang_resource_t` literal predates glslang 12's struct (new fields before
///   `limits`), so the limits land zeroed and glslang rejects every VkFFT shader
///   ("'limitations' : Non-constant-index-expression"): glslang's own
///   `glslang_default_resource()` (libglslang-default-resource-limits) instead.
fn vkfft_header(out: &std::path::Path) -> Option<PathBuf> {
    let src = std::path::Path::new("/usr/include/vkFFT.h");
    println!("cargo:rerun-if-changed={}", src.display());
    if !std::path::Path::new("/usr/include/glslang/Public/resource_limits_c.h").exists() {
        return None;
    }
    let text = std::fs::read_to_string(src).ok()?;
    let patched = text
        .replace(
            "VkCommandBuffer commandBuffer = {};",
            "VkCommandBuffer commandBuffer = VK_NULL_HANDLE;",
        )
        .replace("&default_resource,", "glslang_default_resource(),");
    let dir = out.join("vkfft");
    std::fs::create_dir_all(&dir).ok()?;
    std::fs::write(dir.join("vkFFT.h"), patched).ok()?;
    Some(dir)
}
