//! Links libVkLayer_echo.so the way a layer loaded into any process must be linked:
//!
//! - `--version-script`: only the loader entry points are exported.
//! - `-Bsymbolic`: every reference inside the library binds to the library's own definitions.
//!   Without it the pointers echo hands the loader (`vkGetInstanceProcAddr`, …) go through GOT
//!   entries against its own exported names, and in a program linked with `-lvulkan` (the
//!   loader's symbols of the same names are in the global scope) they resolve to the loader's
//!   trampolines: the loader re-enters itself and hangs (issue 11). `tests/tests/symbols.rs`
//!   reads the relocations of the built library and fails on any against an exported name.
//! - `-z nodelete`: the loader `dlclose`s layers at `vkDestroyInstance`; echo keeps process-wide
//!   state (the trace writer thread, auto mode's decisions, the exit-time path), so it stays
//!   mapped until the process ends.
fn main() {
    let map = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("exports.map");
    println!("cargo:rerun-if-changed={}", map.display());
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "android" {
        println!(
            "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
            map.display()
        );
        println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    }
}
