//! Which Vulkan driver a test runs its programs on (issue 44: every conformant driver, not one).
//!
//! `ECHO_TEST_DRIVER` chooses:
//! - unset or empty: the machine's own drivers, left as the caller's environment has them
//!   (lavapipe here, and Mesa 25's lavapipe inside the Vulkan 1.4 root of
//!   `scripts/modern-stack.sh`): what every other test runs on;
//! - `lavapipe`: Mesa's lavapipe ICD of this machine, named explicitly (`VK_DRIVER_FILES`);
//! - `swiftshader`: Google's SwiftShader from Debian's `chromium` package
//!   (`VK_DRIVER_FILES=/usr/lib/chromium/vk_swiftshader_icd.json`; `scripts/deps.sh` installs it).
//!
//! Anything else, or a named driver whose ICD manifest is missing, fails the test: a typo must
//! not quietly test the default driver again. [`Driver::select`] puts the choice into a
//! [`World`]; [`Driver::check_device`] fails a test whose program ran on another device than
//! the one chosen (from the device name a trace or plan records).

use crate::world::World;
use std::path::{Path, PathBuf};

/// SwiftShader's ICD manifest as Debian's `chromium` package installs it.
pub const SWIFTSHADER_ICD: &str = "/usr/lib/chromium/vk_swiftshader_icd.json";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Driver {
    /// The caller's environment as it is (`ECHO_TEST_DRIVER` unset).
    Default,
    /// This ICD manifest, set as `VK_DRIVER_FILES`.
    Icd {
        name: &'static str,
        manifest: PathBuf,
    },
}

impl Driver {
    /// The driver `ECHO_TEST_DRIVER` names (see the module's documentation); panics on a name it
    /// does not know or an ICD that is not installed.
    pub fn from_env() -> Driver {
        let v = std::env::var("ECHO_TEST_DRIVER").unwrap_or_default();
        Driver::named(v.trim())
    }

    /// [`Driver::from_env`] for the value `name`.
    pub fn named(name: &str) -> Driver {
        let (name, manifest): (&'static str, PathBuf) = match name {
            "" => return Driver::Default,
            "lavapipe" => ("lavapipe", lavapipe_icd()),
            "swiftshader" => ("swiftshader", PathBuf::from(SWIFTSHADER_ICD)),
            other => panic!(
                "ECHO_TEST_DRIVER={other:?}: want `lavapipe` or `swiftshader` (or unset: the \
                 machine's own drivers)"
            ),
        };
        assert!(
            manifest.is_file(),
            "ECHO_TEST_DRIVER={name}: its ICD manifest {} is missing (scripts/deps.sh installs \
             mesa-vulkan-drivers and chromium)",
            manifest.display()
        );
        Driver::Icd { name, manifest }
    }

    /// `default`, `lavapipe` or `swiftshader`: for test messages.
    pub fn name(&self) -> &'static str {
        match self {
            Driver::Default => "default",
            Driver::Icd { name, .. } => name,
        }
    }

    /// `w` with this driver selected (`VK_DRIVER_FILES`; the older `VK_ICD_FILENAMES`, which it
    /// overrides, is dropped too, so no reader of the environment sees two answers).
    pub fn select(&self, w: World) -> World {
        match self {
            Driver::Default => w,
            Driver::Icd { manifest, .. } => w
                .unset("VK_ICD_FILENAMES")
                .set("VK_DRIVER_FILES", manifest.display().to_string()),
        }
    }

    /// The part of `VkPhysicalDeviceProperties::deviceName` that shows the driver: `llvmpipe`
    /// for lavapipe (also the default here), `SwiftShader` for SwiftShader.
    pub fn device_marker(&self) -> &'static str {
        match self.name() {
            "swiftshader" => "SwiftShader",
            _ => "llvmpipe",
        }
    }

    /// Panics unless `device_name` (a trace's or plan's `context.device_name`) is this driver's
    /// device: the selection reached the program.
    pub fn check_device(&self, what: &str, device_name: &str) {
        assert!(
            device_name.contains(self.device_marker()),
            "{what}: ran on device {device_name:?}, but ECHO_TEST_DRIVER chose {} (a device \
             named like {:?})",
            self.name(),
            self.device_marker()
        );
    }
}

/// Mesa's lavapipe ICD manifest of this machine (`lvp_icd.<arch>.json`).
fn lavapipe_icd() -> PathBuf {
    let dir = Path::new("/usr/share/vulkan/icd.d");
    let arch = std::env::consts::ARCH;
    let named = dir.join(format!("lvp_icd.{arch}.json"));
    if named.is_file() {
        return named;
    }
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("lvp_icd."))
        })
        .unwrap_or(named)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_is_the_default_and_names_are_checked() {
        assert_eq!(Driver::named(""), Driver::Default);
        assert_eq!(Driver::named("").device_marker(), "llvmpipe");
        let bad = std::panic::catch_unwind(|| Driver::named("swiftshadr"));
        assert!(
            bad.is_err(),
            "a misspelt driver must fail, not test the default"
        );
    }

    #[test]
    fn swiftshader_is_told_from_its_device_name() {
        let d = Driver::Icd {
            name: "swiftshader",
            manifest: PathBuf::from(SWIFTSHADER_ICD),
        };
        assert_eq!(d.device_marker(), "SwiftShader");
        d.check_device("test", "SwiftShader Device (Subzero)");
        let caught = std::panic::catch_unwind(|| d.check_device("test", "llvmpipe (LLVM 15)"));
        assert!(caught.is_err());
    }
}
