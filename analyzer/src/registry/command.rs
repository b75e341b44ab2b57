//! The registry table's types (below the generated table that is written in them and the
//! questions `mod.rs` asks of it).

/// The level of a command: its first parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Device,
    Queue,
    CommandBuffer,
}

/// What echo does about a command that can reach memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Hooked: recorded in profile, honoured in enforce.
    Followed,
    /// Names a buffer, its memory or a descriptor set but can neither read nor write the bytes
    /// nor make them reachable unseen; the reason.
    Inert(&'static str),
    /// Hooked by a generated hook: what it names leaves every group.
    Aside,
    /// Only on platforms no Linux driver has (no hook generated).
    Platform,
}

/// One device-level command that can reach memory.
#[derive(Clone, Copy, Debug)]
pub struct Command {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub level: Level,
    pub class: Class,
    /// It can name a `VkDeviceMemory` (directly or in a structure).
    pub takes_memory: bool,
    /// Stepping aside from it takes every buffer of the device.
    pub everything: bool,
    /// Core versions (`VK_VERSION_1_x`) and extensions that provide it.
    pub requires: &'static [&'static str],
    /// Why it can reach memory.
    pub why: &'static str,
}

impl Command {
    /// Whether a device with these extensions and effective API version can call it.
    pub fn available(&self, extensions: &[&str], api_version: u32) -> bool {
        let (major, minor) = (api_version >> 22 & 0x7f, api_version >> 12 & 0x3ff);
        self.requires.iter().any(|r| match core_version(r) {
            Some(v) => {
                let mut it = v.split('_').map(|x| x.parse::<u32>().unwrap_or(u32::MAX));
                let (a, b) = (it.next().unwrap_or(u32::MAX), it.next().unwrap_or(u32::MAX));
                (a, b) <= (major, minor)
            }
            None => extensions.contains(r),
        })
    }
}

/// `"1_3"` of a core feature's name (`VK_VERSION_1_3`, or `VK_BASE_VERSION_1_3`, … as newer
/// registries split the core into parts); `None` for an extension.
pub fn core_version(name: &str) -> Option<&str> {
    let at = name.find("VERSION_")?;
    let prefix = &name[..at];
    (prefix == "VK_"
        || (prefix.starts_with("VK_")
            && prefix.ends_with('_')
            && !prefix[3..prefix.len() - 1].contains('_')))
    .then(|| &name[at + "VERSION_".len()..])
}
