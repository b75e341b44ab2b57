//! The conformant drivers the tests run on (issue 44, DESIGN §8 "more than one"): Mesa lavapipe
//! 22.3 (the host's default ICD), SwiftShader (Debian's `chromium` package, installed by
//! `scripts/deps.sh`), and Mesa 25 lavapipe in the Debian 13 root (`scripts/modern-check.sh`).
//! A test picks a host driver by setting `VK_DRIVER_FILES` in its world.

use std::path::PathBuf;

/// SwiftShader's ICD manifest as Debian's `chromium` package installs it.
pub const SWIFTSHADER_ICD: &str = "/usr/lib/chromium/vk_swiftshader_icd.json";

/// A driver of the host: its name and the `VK_DRIVER_FILES` that selects it (`None`: the
/// loader's default, lavapipe).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    Lavapipe,
    SwiftShader,
}

impl Driver {
    pub const ALL: [Driver; 2] = [Driver::Lavapipe, Driver::SwiftShader];

    pub fn name(self) -> &'static str {
        match self {
            Driver::Lavapipe => "lavapipe",
            Driver::SwiftShader => "swiftshader",
        }
    }

    /// The value of `VK_DRIVER_FILES` for this driver. SwiftShader's manifest must exist
    /// (`scripts/deps.sh` installs chromium): a missing driver fails the test, it is never
    /// skipped in silence.
    pub fn driver_files(self) -> Option<String> {
        match self {
            Driver::Lavapipe => None,
            Driver::SwiftShader => {
                let p = PathBuf::from(SWIFTSHADER_ICD);
                assert!(
                    p.is_file(),
                    "{SWIFTSHADER_ICD} is missing: install Debian's chromium package (scripts/deps.sh does)"
                );
                Some(SWIFTSHADER_ICD.into())
            }
        }
    }

    /// The world `w` with this driver selected.
    pub fn select(self, w: crate::world::World) -> crate::world::World {
        match self.driver_files() {
            Some(f) => w.set("VK_DRIVER_FILES", f),
            None => w,
        }
    }
}
