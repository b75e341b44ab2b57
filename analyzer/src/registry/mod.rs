//! The Vulkan registry's commands that can reach memory, and what echo does about each
//! (issue 32). `generated.rs` is written by `layer/registry` (`cargo run -p echo-registry`)
//! from `layer/registry/vk.xml`; a test there fails when it is not current. This module holds
//! the questions asked of the table; `command.rs` its types.

mod command;
mod generated;

pub use command::{core_version, Class, Command, Level};
pub use generated::{COMMANDS, VK_XML_VERSION};

/// The command known by `name` (its own name or an alias).
pub fn find(name: &str) -> Option<&'static Command> {
    COMMANDS
        .iter()
        .find(|c| c.name == name || c.aliases.contains(&name))
}

/// The commands a device with these extensions and API version can call that can name an
/// allocation and that echo does not follow (`vkQueueBindSparse` only with `sparse_binding`:
/// a queue may run it only when the device enables that feature).
pub fn memory_commands_not_followed(
    extensions: &[&str],
    sparse_binding: bool,
    api_version: u32,
) -> Vec<&'static Command> {
    COMMANDS
        .iter()
        .filter(|c| c.takes_memory && c.class != Class::Followed)
        .filter(|c| c.name != "vkQueueBindSparse" || sparse_binding)
        .filter(|c| c.available(extensions, api_version))
        .collect()
}

/// What echo does about the commands one core version brought in (a command counts under the
/// lowest version that has it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreCoverage {
    /// `"1.0"` … `"1.4"`.
    pub version: String,
    pub followed: usize,
    pub inert: usize,
    /// The commands echo steps aside from.
    pub aside: Vec<&'static str>,
}

/// Which Vulkan versions and extensions echo follows, from the table (`vkecho doctor`,
/// docs/status.md "Vulkan versions tested").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coverage {
    pub core: Vec<CoreCoverage>,
    /// Extensions each of whose commands that can reach memory is followed (or inert).
    pub extensions_followed: Vec<&'static str>,
    /// Extensions with a command echo steps aside from.
    pub extensions_aside: Vec<&'static str>,
}

/// The lowest core version (`(major, minor)`) of a command, if it is core.
fn lowest_core(c: &Command) -> Option<(u32, u32)> {
    c.requires
        .iter()
        .filter_map(|r| core_version(r))
        .filter_map(|v| {
            let (a, b) = v.split_once('_')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .min()
}

/// The whole table's [`Coverage`].
pub fn coverage() -> Coverage {
    let mut core: std::collections::BTreeMap<(u32, u32), CoreCoverage> = Default::default();
    let mut ext: std::collections::BTreeMap<&'static str, (bool, bool)> = Default::default();
    for c in COMMANDS {
        if let Some((a, b)) = lowest_core(c) {
            let e = core.entry((a, b)).or_insert_with(|| CoreCoverage {
                version: format!("{a}.{b}"),
                followed: 0,
                inert: 0,
                aside: Vec::new(),
            });
            match c.class {
                Class::Followed => e.followed += 1,
                Class::Inert(_) => e.inert += 1,
                Class::Aside => e.aside.push(c.name),
                Class::Platform => {}
            }
        }
        for r in c.requires.iter().filter(|r| core_version(r).is_none()) {
            // (has a command echo follows or that is inert, has one it steps aside from)
            let e = ext.entry(r).or_default();
            match c.class {
                Class::Followed | Class::Inert(_) => e.0 = true,
                Class::Aside => e.1 = true,
                Class::Platform => {}
            }
        }
    }
    Coverage {
        core: core.into_values().collect(),
        extensions_followed: ext
            .iter()
            .filter(|(_, &(f, a))| f && !a)
            .map(|(n, _)| *n)
            .collect(),
        extensions_aside: ext
            .iter()
            .filter(|(_, &(_, a))| a)
            .map(|(n, _)| *n)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(major: u32, minor: u32) -> u32 {
        major << 22 | minor << 12
    }

    #[test]
    fn the_table_knows_the_commands_of_the_issue() {
        for (name, class) in [
            ("vkCmdCopyBuffer", Class::Followed),
            ("vkCmdCopyQueryPoolResults", Class::Aside),
            ("vkCmdTraceRaysKHR", Class::Aside),
            ("vkCmdBindTransformFeedbackBuffersEXT", Class::Aside),
        ] {
            let c = find(name).unwrap_or_else(|| panic!("{name} is not in the table"));
            assert_eq!(
                std::mem::discriminant(&c.class),
                std::mem::discriminant(&class),
                "{name}"
            );
        }
        assert!(find("vkCmdTraceRaysKHR").unwrap().everything);
        assert!(!find("vkCmdCopyQueryPoolResults").unwrap().everything);
        // vkCmdSetViewport names no memory and runs no work: not in the table at all.
        assert!(find("vkCmdSetViewport").is_none());
    }

    #[test]
    fn availability_follows_versions_and_extensions() {
        let c = find("vkCmdCopyQueryPoolResults").unwrap();
        assert!(c.available(&[], v(1, 0)));
        let tf = find("vkCmdBindTransformFeedbackBuffersEXT").unwrap();
        assert!(!tf.available(&[], v(1, 4)));
        assert!(tf.available(&["VK_EXT_transform_feedback"], v(1, 0)));
    }

    #[test]
    fn coverage_names_the_versions_and_extensions_echo_follows() {
        let c = coverage();
        let versions: Vec<&str> = c.core.iter().map(|v| v.version.as_str()).collect();
        assert_eq!(versions, ["1.0", "1.1", "1.2", "1.3", "1.4"]);
        // Every 1.4 core command that can reach memory is followed (maintenance5/6, map_memory2,
        // push descriptors).
        let v14 = &c.core[4];
        assert!(v14.followed >= 8 && v14.aside.is_empty(), "{v14:?}");
        assert!(c.core[0].aside.contains(&"vkCmdCopyQueryPoolResults"));
        assert!(c.core[0].aside.contains(&"vkQueueBindSparse"));
        // VK_KHR_maintenance6's vkCmdSetDescriptorBufferOffsets2EXT (stepped aside from since
        // issue 53) needs VK_EXT_descriptor_buffer too: it is that extension's surface.
        for e in [
            "VK_KHR_map_memory2",
            "VK_KHR_maintenance5",
            "VK_KHR_maintenance6",
            "VK_KHR_push_descriptor",
            "VK_KHR_copy_commands2",
        ] {
            assert!(c.extensions_followed.contains(&e), "{e}");
        }
        assert!(c.extensions_aside.contains(&"VK_EXT_transform_feedback"));
        assert!(!c.extensions_followed.contains(&"VK_EXT_transform_feedback"));
        let counted: usize = c
            .core
            .iter()
            .map(|v| v.followed + v.inert + v.aside.len())
            .sum();
        assert!(counted < COMMANDS.len());
    }

    #[test]
    fn no_inert_command_takes_memory() {
        // Enforce hands out its own memory handles for allocations it does not make: a command
        // that takes memory must be followed (or keep allocations made), never passed as inert.
        for c in COMMANDS {
            if let Class::Inert(_) = c.class {
                assert!(!c.takes_memory, "{} is inert but takes memory", c.name);
            }
        }
    }
}
