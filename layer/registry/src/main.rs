//! `cargo run -p echo-registry [-- --check]`: writes (or, with `--check`, compares) the tables
//! generated from layer/registry/vk.xml (see lib.rs).

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let check = std::env::args().any(|a| a == "--check");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let files = match echo_registry::render::generate(&root) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("gen-registry: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut stale = false;
    for (path, text) in files {
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        if old == text {
            continue;
        }
        if check {
            eprintln!("gen-registry: {} is not current", path.display());
            stale = true;
        } else if let Err(e) = std::fs::write(&path, text) {
            eprintln!("gen-registry: {}: {e}", path.display());
            return ExitCode::FAILURE;
        } else {
            eprintln!("gen-registry: wrote {}", path.display());
        }
    }
    if stale {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
