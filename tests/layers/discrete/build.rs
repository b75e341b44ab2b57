//! The test layer is loaded into the same programs as echo, the C corpus linked with `-lvulkan`
//! among them, so it is linked like echo (`layer/build.rs`): `-Bsymbolic` binds its own exported
//! names (`vkGetInstanceProcAddr`, `vkCreateInstance`, …) to its own definitions. Without it the
//! pointers it hands the layer above resolve to the loader's trampolines of the same names, and
//! the loader re-enters itself and hangs in `vkCreateInstance` (seen: `c_calls where` under echo
//! with this layer below it). `tests/tests/symbols.rs` checks both libraries.
fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "android" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
    }
}
