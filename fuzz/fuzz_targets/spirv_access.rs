//! The layer's SPIR-V access analysis (layer/src/spirv_access.rs: rspirv's parser, then ours)
//! never panics on any words: malformed modules are `None`, never a crash. The file is compiled
//! here as it is in the layer (the layer is a cdylib, so it is included by path).
//!
//! Input: the module's bytes (little-endian words, a trailing partial word dropped). Inputs that
//! do not start with the SPIR-V magic number get a valid header in front, so the mutations
//! reach the instructions instead of stopping at the header.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "../../layer/src/spirv_access.rs"]
#[allow(dead_code)]
mod spirv_access;

fuzz_target!(|data: &[u8]| {
    let mut words: Vec<u32> = data
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if words.first() != Some(&rspirv::spirv::MAGIC_NUMBER) {
        // SPIR-V 1.6, generator 0, bound 4096, reserved 0.
        let header = [rspirv::spirv::MAGIC_NUMBER, 0x0001_0600, 0, 4096, 0];
        words.splice(0..0, header);
    }
    if let Some(entries) = spirv_access::analyze(&words) {
        for bindings in entries.values() {
            std::hint::black_box(bindings.len());
        }
    }
});
