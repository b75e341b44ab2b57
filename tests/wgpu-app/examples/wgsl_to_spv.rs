//! `cargo run -p echo-wgpu-app --example wgsl_to_spv -- IN.wgsl OUT.spv [MAJOR.MINOR]`: WGSL →
//! SPIR-V the way wgpu 30's Vulkan backend writes it (wgpu-hal `vulkan/adapter.rs`: index and
//! buffer bounds checks `Restrict` where robustBufferAccess2 is missing, loops bounded, no debug
//! info; SPIR-V 1.3 on a Vulkan 1.1 device, 1.6 on 1.3). Makes layer/testdata/naga/*.spv
//! (layer/testdata/naga/make.sh).

use naga::back::spv;
use naga::proc::{BoundsCheckPolicies, BoundsCheckPolicy};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (input, output) = (&args[1], &args[2]);
    let version = args.get(3).map(String::as_str).unwrap_or("1.3");
    let (major, minor) = version.split_once('.').expect("MAJOR.MINOR");
    let src = std::fs::read_to_string(input).expect("read WGSL");
    let module = naga::front::wgsl::parse_str(&src).unwrap_or_else(|e| {
        panic!("{}", e.emit_to_string(&src));
    });
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .expect("valid module");
    let options = spv::Options {
        lang_version: (major.parse().unwrap(), minor.parse().unwrap()),
        flags: spv::WriterFlags::empty(),
        bounds_check_policies: BoundsCheckPolicies {
            index: BoundsCheckPolicy::Restrict,
            buffer: BoundsCheckPolicy::Restrict,
            image_load: BoundsCheckPolicy::Restrict,
            binding_array: BoundsCheckPolicy::Unchecked,
        },
        force_loop_bounding: true,
        ..spv::Options::default()
    };
    let words = spv::write_vec(&module, &info, &options, None).expect("SPIR-V");
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(output, bytes).expect("write SPIR-V");
}
