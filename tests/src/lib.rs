//! Helpers shared by the integration tests.
pub mod callgrind;
pub mod drivers;
pub mod samples;
pub mod world;

/// One `#[test]` per positive sample (the seven samples echo has pairs to apply in), in module
/// `$module`, each calling `$check(name)`; `$check` is a path seen from inside the module
/// (`super::positive`). `threads` names its workers, so its buffers are keyed per thread
/// (stable across runs).
#[macro_export]
macro_rules! positive_sample_tests {
    ($module:ident, $check:path) => {
        mod $module {
            #[test]
            fn saxpy() {
                $check("saxpy")
            }
            #[test]
            fn sgemm() {
                $check("sgemm")
            }
            #[test]
            fn conv2d() {
                $check("conv2d")
            }
            #[test]
            fn pipeline() {
                $check("pipeline")
            }
            #[test]
            fn suballoc() {
                $check("suballoc")
            }
            #[test]
            fn multiqueue() {
                $check("multiqueue")
            }
            #[test]
            fn threads() {
                $check("threads")
            }
        }
    };
}
pub mod fuzzprog;
pub mod imports;
