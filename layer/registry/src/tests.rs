//! The registry's tests: the generated files are current, the classification covers every
//! command that can reach memory and every recorded command, the decisions name what the rule
//! covers, and a command added to the registry is never invisible.

use super::ash::Ash;
use super::render::{generate_from, hooked, render_analyzer, render_intercepts, Hooked, Way};
use super::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn registry() -> Registry {
    let xml = std::fs::read_to_string(root().join("layer/registry/vk.xml")).unwrap();
    Registry::parse(&xml).unwrap()
}

fn ash() -> &'static Ash {
    static A: OnceLock<Ash> = OnceLock::new();
    A.get_or_init(|| Ash::load(&root()).unwrap())
}

#[test]
fn generated_files_are_current() {
    for (path, text) in generate_from(&root(), &registry(), ash()).unwrap() {
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            old == text,
            "{} is not current: run `cargo run -p echo-registry` and commit the result",
            path.display()
        );
    }
}

#[test]
fn the_registry_is_the_newest_we_know() {
    let r = registry();
    assert!(r.version.starts_with("1.4."), "{}", r.version);
    // Debian 12's and Debian 13's registries are older: every command they name is here.
    for sys in ["/usr/share/vulkan/registry/vk.xml"] {
        let Ok(text) = std::fs::read_to_string(sys) else {
            continue;
        };
        let old = Registry::parse(&text).unwrap();
        let ours = r.all_names();
        let missing: Vec<_> = old
            .all_names()
            .into_iter()
            .filter(|n| !ours.contains(n))
            .collect();
        assert!(
            missing.is_empty(),
            "{sys} ({}) has commands layer/registry/vk.xml lacks: {missing:?}",
            old.version
        );
    }
}

#[test]
fn decisions_name_commands_the_rule_covers() {
    let r = registry();
    let entries = r.classify(&followed_names(&r));
    for (n, _) in INERT {
        assert!(
            entries
                .iter()
                .any(|e| e.name == *n || e.aliases.iter().any(|a| a == n)),
            "INERT names {n}, which cannot reach memory by the registry's rule (remove it)"
        );
    }
    for n in NAMES_ONLY {
        let c = r
            .command(n)
            .unwrap_or_else(|| panic!("NAMES_ONLY names {n}, which vk.xml lacks"));
        assert!(
            c.action,
            "NAMES_ONLY names {n}, which is not an action command"
        );
    }
    // FOLLOWED lists definitions (an alias there would hide its definition's other names),
    // each once, each a device-level command of the registry.
    let mut seen = BTreeSet::new();
    for (module, defs) in FOLLOWED {
        for d in *defs {
            let c = r
                .command(d)
                .unwrap_or_else(|| panic!("FOLLOWED names {d}, which vk.xml lacks"));
            assert_eq!(&c.name, d, "FOLLOWED names the alias {d}: name {}", c.name);
            assert!(seen.insert(*d), "FOLLOWED names {d} twice");
            assert!(
                root().join(format!("layer/src/hooks/{module}.rs")).exists(),
                "FOLLOWED puts {d} in layer/src/hooks/{module}.rs, which does not exist"
            );
        }
    }
}

#[test]
fn every_command_that_can_reach_memory_has_a_class() {
    // Followed and aside ones have an intercept for every name.
    let r = registry();
    let f = followed_names(&r);
    let entries = r.classify(&f);
    let h = hooked(&r, &entries).unwrap();
    let way = |n: &str| h.iter().find(|x| x.name == n).map(|x| x.way.clone());
    for e in &entries {
        for n in std::iter::once(&e.name).chain(&e.aliases) {
            match &e.class {
                Class::Followed => assert!(
                    matches!(way(n), Some(Way::Followed { .. })),
                    "{} is followed but its name {n} has no intercept",
                    e.name
                ),
                Class::Aside => assert!(
                    matches!(way(n), Some(Way::Aside { .. })),
                    "no aside intercept for {n}"
                ),
                Class::Inert(why) => {
                    assert!(!why.is_empty());
                    assert!(way(n).is_none(), "{n} is inert and hooked");
                }
                Class::Platform => {
                    assert!(e.requires.iter().all(|x| r.platform.contains_key(x)))
                }
            }
        }
    }
}

/// Every command recorded into a command buffer is echo's on an active enforcing device:
/// followed, stepped aside from or marked — exactly one of them. A command buffer echo drops
/// from a submission (it held only elided copies) therefore held nothing echo did not see.
#[test]
fn every_recorded_command_is_hooked() {
    let r = registry();
    let entries = r.classify(&followed_names(&r));
    let h = hooked(&r, &entries).unwrap();
    let platform: BTreeSet<&str> = entries
        .iter()
        .filter(|e| e.class == Class::Platform)
        .flat_map(|e| std::iter::once(&e.name).chain(&e.aliases))
        .map(String::as_str)
        .collect();
    let mut n = 0;
    for c in r.commands.values() {
        if !c.name.starts_with("vkCmd") || c.params[0].ty != "VkCommandBuffer" {
            continue;
        }
        for name in r.names_of(&c.name) {
            if !r.providers.contains_key(&name) || platform.contains(name.as_str()) {
                continue;
            }
            let ways: Vec<&Hooked> = h.iter().filter(|x| x.name == name).collect();
            assert_eq!(ways.len(), 1, "{name}: hooked {} times", ways.len());
            n += 1;
        }
    }
    assert!(n > 300, "only {n} recorded commands");
}

/// The C declarations the registry's commands use, in `ash`'s types.
#[test]
fn parameters_are_written_in_ashs_types() {
    let r = registry();
    let p = |code: &str, name: &str, ty: &str| Param {
        name: name.into(),
        ty: ty.into(),
        pointer: code.contains('*') || code.contains('['),
        len: None,
        code: code.into(),
    };
    let a = ash();
    let cases = [
        (
            p(
                "VkCommandBuffer commandBuffer",
                "commandBuffer",
                "VkCommandBuffer",
            ),
            "vk::CommandBuffer",
        ),
        (
            p("const VkBufferCopy* pRegions", "pRegions", "VkBufferCopy"),
            "*const vk::BufferCopy",
        ),
        (
            p(
                "const VkCopyBufferInfo2* pInfo",
                "pInfo",
                "VkCopyBufferInfo2",
            ),
            "*const vk::CopyBufferInfo2<'_>",
        ),
        // Promoted in 1.4, in ash only under its extension's name.
        (
            p("const VkMemoryMapInfo* pInfo", "pInfo", "VkMemoryMapInfo"),
            "*const vk::MemoryMapInfoKHR<'_>",
        ),
        (p("void** ppData", "ppData", "void"), "*mut *mut c_void"),
        (p("const void* pData", "pData", "void"), "*const c_void"),
        (
            p("const char* const* ppNames", "ppNames", "char"),
            "*const *const c_char",
        ),
        (
            p("const float blendConstants[4]", "blendConstants", "float"),
            "*const [f32; 4]",
        ),
        (
            p("VkDeviceSize offset", "offset", "VkDeviceSize"),
            "vk::DeviceSize",
        ),
        (p("uint32_t count", "count", "uint32_t"), "u32"),
        (p("int* pFd", "pFd", "int"), "*mut i32"),
    ];
    for (param, want) in cases {
        assert_eq!(a.param(&r, &param).unwrap(), want, "{}", param.code);
    }
}

/// A command added to the registry that can reach memory is classified (stepped aside from,
/// with an intercept), and the table committed today no longer matches: the currency test fails
/// until it is regenerated — a new command is never invisible.
#[test]
fn a_planted_command_is_caught() {
    let xml = std::fs::read_to_string(root().join("layer/registry/vk.xml")).unwrap();
    let cmd = r#"<command queues="VK_QUEUE_TRANSFER_BIT" renderpass="outside" cmdbufferlevel="primary,secondary">
        <proto><type>void</type> <name>vkCmdFrobBufferECHO</name></proto>
        <param externsync="true"><type>VkCommandBuffer</type> <name>commandBuffer</name></param>
        <param><type>VkBuffer</type> <name>dstBuffer</name></param>
        <param><type>VkDeviceSize</type> <name>dstOffset</name></param>
    </command>
    "#;
    let ext = r#"<extension name="VK_ECHO_planted" number="99999" type="device" author="ECHO" supported="vulkan">
        <require><command name="vkCmdFrobBufferECHO"/></require>
    </extension>
    "#;
    let planted = xml
        .replacen("</commands>", &format!("{cmd}</commands>"), 1)
        .replacen("</extensions>", &format!("{ext}</extensions>"), 1);
    let r = Registry::parse(&planted).unwrap();
    let entries = r.classify(&followed_names(&r));
    let e = entries
        .iter()
        .find(|e| e.name == "vkCmdFrobBufferECHO")
        .expect("the planted command is classified");
    assert_eq!(e.class, Class::Aside);
    assert!(
        !e.everything,
        "it names its buffer, so only that buffer leaves"
    );
    let h = hooked(&r, &entries).unwrap();
    let layer = render_intercepts(&r, ash(), &h).unwrap();
    assert!(
        layer.contains("pub unsafe extern \"system\" fn vkCmdFrobBufferECHO(command_buffer: vk::CommandBuffer, dst_buffer: vk::Buffer, dst_offset: vk::DeviceSize) -> ()"),
        "{}",
        &layer[layer.find("vkCmdFrobBufferECHO").unwrap_or(0)..][..400]
    );
    assert!(layer.contains("Named::One(What::Buffer, dst_buffer.as_raw())"));
    let committed =
        std::fs::read_to_string(root().join("analyzer/src/registry/generated.rs")).unwrap();
    assert_ne!(
        render_analyzer(&r, &entries),
        committed,
        "the currency test would not notice"
    );
    // Without the planted command, the same registry gives the committed table.
    let r0 = Registry::parse(&xml).unwrap();
    assert_eq!(
        render_analyzer(&r0, &r0.classify(&followed_names(&r0))),
        committed
    );
}

/// Fail closed (issue 53): a command that names a handle type nobody reviewed — here a new
/// `VkFrobnicatorECHO` that reaches no buffer by the old rule — is stepped aside from, and from
/// everything; a recorded command naming it is never merely marked.
#[test]
fn a_planted_command_with_an_unknown_handle_is_stepped_aside_from() {
    let xml = std::fs::read_to_string(root().join("layer/registry/vk.xml")).unwrap();
    let ty = r#"<type category="handle" objtypeenum="VK_OBJECT_TYPE_UNKNOWN" name="VkFrobnicatorECHO"><type>VK_DEFINE_NON_DISPATCHABLE_HANDLE</type>(<name>VkFrobnicatorECHO</name>)</type>
    "#;
    let cmds = r#"<command queues="VK_QUEUE_COMPUTE_BIT" renderpass="both" cmdbufferlevel="primary,secondary">
        <proto><type>void</type> <name>vkCmdBindFrobnicatorECHO</name></proto>
        <param externsync="true"><type>VkCommandBuffer</type> <name>commandBuffer</name></param>
        <param><type>VkFrobnicatorECHO</type> <name>frobnicator</name></param>
    </command>
    <command successcodes="VK_SUCCESS">
        <proto><type>VkResult</type> <name>vkCreateFrobnicatorECHO</name></proto>
        <param><type>VkDevice</type> <name>device</name></param>
        <param><type>uint32_t</type> <name>size</name></param>
        <param><type>VkFrobnicatorECHO</type>* <name>pFrobnicator</name></param>
    </command>
    "#;
    let ext = r#"<extension name="VK_ECHO_frobnicator" number="99998" type="device" author="ECHO" supported="vulkan">
        <require><type name="VkFrobnicatorECHO"/><command name="vkCmdBindFrobnicatorECHO"/><command name="vkCreateFrobnicatorECHO"/></require>
    </extension>
    "#;
    let planted = xml
        .replacen(
            "<type category=\"handle\"",
            &format!("{ty}<type category=\"handle\""),
            1,
        )
        .replacen("</commands>", &format!("{cmds}</commands>"), 1)
        .replacen("</extensions>", &format!("{ext}</extensions>"), 1);
    let r = Registry::parse(&planted).unwrap();
    let f = followed_names(&r);
    let entries = r.classify(&f);
    for name in ["vkCmdBindFrobnicatorECHO", "vkCreateFrobnicatorECHO"] {
        let e = entries
            .iter()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("{name} is not classified: it would be marked or invisible"));
        assert_eq!(e.class, Class::Aside, "{name}");
        assert!(e.everything, "{name}: echo cannot tell what it reaches");
        assert!(e.why.contains("VkFrobnicatorECHO"), "{}", e.why);
    }
    let h = hooked(&r, &entries).unwrap();
    let way = h
        .iter()
        .find(|x| x.name == "vkCmdBindFrobnicatorECHO")
        .map(|x| x.way.clone());
    assert_eq!(way, Some(Way::Aside { everything: true }));
    // Reviewing the type (as decisions.rs does for VkSampler and the rest) makes the recorded
    // command merely marked again: the rule, not a list of commands, decides.
    assert!(r.unreviewed(r.command("vkCmdBindFrobnicatorECHO").unwrap()) == ["VkFrobnicatorECHO"]);
}

/// Code is state (issue 53): every command that binds or makes code is followed, and
/// `vkCmdBindShadersEXT` is never merely marked again; every `vkCmd*Bind*` command is followed,
/// stepped aside from, or reviewed with its reason.
#[test]
fn code_binding_is_followed_and_every_bind_is_decided() {
    let r = registry();
    let f = followed_names(&r);
    let entries = r.classify(&f);
    let h = hooked(&r, &entries).unwrap();
    let way = |n: &str| h.iter().find(|x| x.name == n).map(|x| x.way.clone());
    for n in [
        "vkCmdBindShadersEXT",
        "vkCreateShadersEXT",
        "vkDestroyShaderEXT",
        "vkCmdBindPipeline",
        "vkCreateGraphicsPipelines",
        "vkCreateComputePipelines",
        "vkDestroyPipeline",
        "vkCreateShaderModule",
    ] {
        assert!(
            matches!(way(n), Some(Way::Followed { .. })),
            "{n} must be followed: {:?}",
            way(n)
        );
    }
    for (n, why) in decisions::REVIEWED_BINDS {
        assert!(
            r.command(n).is_some(),
            "REVIEWED_BINDS names {n}, which vk.xml lacks"
        );
        assert!(!why.is_empty());
    }
    for (n, _) in decisions::CHANGES_BOUND {
        assert!(
            matches!(way(n), Some(Way::Aside { everything: true })),
            "{n} changes bound state: aside from everything"
        );
    }
    for c in r.commands.values() {
        if !c.name.starts_with("vkCmdBind") {
            continue;
        }
        for name in r.names_of(&c.name) {
            if !r.providers.contains_key(&name) {
                continue;
            }
            let w = way(&name);
            let reviewed = decisions::REVIEWED_BINDS.iter().any(|(n, _)| *n == name);
            let platform = entries.iter().any(|e| {
                e.class == Class::Platform && (e.name == name || e.aliases.contains(&name))
            });
            assert!(
                matches!(w, Some(Way::Followed { .. }) | Some(Way::Aside { .. }))
                    || reviewed
                    || platform,
                "{name} binds state and is only {w:?}: follow it, or review it in REVIEWED_BINDS"
            );
        }
    }
    // Every reviewed handle type exists in the registry.
    for (t, why) in decisions::REVIEWED_HANDLES {
        assert!(
            matches!(r.kind(t), Kind::Handle | Kind::Dispatchable),
            "REVIEWED_HANDLES names {t}, which is not a handle type of vk.xml"
        );
        assert!(!why.is_empty());
    }
}
