//! The conformant drivers the tests run on (issue 44, DESIGN §8 "more than one"): Mesa lavapipe
//! 22.3 (the host's default ICD), SwiftShader (Debian's `chromium` package, installed by
//! `scripts/deps.sh`), and Mesa 25 lavapipe in the Debian 13 root (`scripts/modern-check.sh`).
//! A test picks a host driver by setting `VK_DRIVER_FILES` in its world.
//!
//! Tests written for one driver take it from `ECHO_TEST_DRIVER` ([`Driver::from_env`]):
//! `lavapipe` (or unset: the loader's default) or `swiftshader`; anything else fails the test
//! (a typo must not quietly test the default driver again). [`Driver::check_device`] fails a
//! test whose program ran on another device than the one chosen.

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

    /// The driver `ECHO_TEST_DRIVER` names: `lavapipe` (also when unset or empty) or
    /// `swiftshader`; panics on anything else.
    pub fn from_env() -> Driver {
        let v = std::env::var("ECHO_TEST_DRIVER").unwrap_or_default();
        Driver::named(v.trim())
    }

    /// [`Driver::from_env`] for the value `name`.
    pub fn named(name: &str) -> Driver {
        match name {
            "" | "lavapipe" => Driver::Lavapipe,
            "swiftshader" => Driver::SwiftShader,
            other => {
                panic!("ECHO_TEST_DRIVER={other:?}: want `lavapipe` (the default) or `swiftshader`")
            }
        }
    }

    /// The part of `VkPhysicalDeviceProperties::deviceName` that shows the driver: `llvmpipe`
    /// (lavapipe, 22.3 on the host and 25 in the Debian 13 root), `SwiftShader`.
    pub fn device_marker(self) -> &'static str {
        match self {
            Driver::Lavapipe => "llvmpipe",
            Driver::SwiftShader => "SwiftShader",
        }
    }

    /// Panics unless `device_name` (a trace's or plan's `context.device_name`) is this driver's
    /// device: the selection reached the program.
    pub fn check_device(self, what: &str, device_name: &str) {
        assert!(
            device_name.contains(self.device_marker()),
            "{what}: ran on device {device_name:?}, but the test chose {} (a device named like \
             {:?})",
            self.name(),
            self.device_marker()
        );
    }

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

    /// The world `w` with this driver selected (for SwiftShader the older `VK_ICD_FILENAMES`,
    /// which `VK_DRIVER_FILES` overrides, is dropped too: no reader sees two answers).
    pub fn select(self, w: crate::world::World) -> crate::world::World {
        match self.driver_files() {
            Some(f) => w.unset("VK_ICD_FILENAMES").set("VK_DRIVER_FILES", f),
            None => w,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_test_driver_values() {
        assert_eq!(Driver::named(""), Driver::Lavapipe);
        assert_eq!(Driver::named("lavapipe"), Driver::Lavapipe);
        assert_eq!(Driver::named("swiftshader"), Driver::SwiftShader);
        let typo = std::panic::catch_unwind(|| Driver::named("swiftshadr"));
        assert!(
            typo.is_err(),
            "a misspelt driver must fail, not test the default"
        );
    }

    #[test]
    fn the_device_name_tells_the_driver() {
        Driver::SwiftShader.check_device("test", "SwiftShader Device (Subzero)");
        Driver::Lavapipe.check_device("test", "llvmpipe (LLVM 15.0.6, 256 bits)");
        let wrong = std::panic::catch_unwind(|| {
            Driver::SwiftShader.check_device("test", "llvmpipe (LLVM 15.0.6, 256 bits)")
        });
        assert!(wrong.is_err());
    }
}
