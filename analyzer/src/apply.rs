//! Enforce-time decisions (DESIGN §6), as pure functions: which role a new buffer plays in the
//! plan, and whether a redirected bind is allowed. The layer (`layer/src/enforce/`) asks here and
//! then makes the Vulkan calls; it decides nothing itself.

use crate::fasthash::FastMap as HashMap;
use crate::plan::{Direction, Group, Plan};
use crate::trace::{MemReq, ObjectKey};

/// The part a buffer plays in the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The device buffer of group `group`.
    Device { group: u32, direction: Direction },
    /// Member `member` of group `group`: byte `i` of the device buffer is byte `i + delta` of this
    /// staging buffer.
    Staging {
        group: u32,
        member: usize,
        delta: i64,
        direction: Direction,
    },
}

impl Role {
    pub fn group(&self) -> u32 {
        match *self {
            Role::Device { group, .. } | Role::Staging { group, .. } => group,
        }
    }
}

/// A plan indexed by buffer key.
#[derive(Clone, Debug)]
pub struct PlanIndex {
    by_key: HashMap<ObjectKey, Vec<Role>>,
    /// Per-call classes that go past the instances profiled (`crate::classes`).
    classes: Vec<ClassIdx>,
    pub plan: Plan,
}

/// Group ids of class instances past those profiled: bit 31 set, the class's index in bits
/// 20–30, the instance past the last profiled one in bits 0–19 (so at most 2^20 of them per
/// class, and 2^11 classes; more are not matched).
const BEYOND: u32 = 1 << 31;
const BEYOND_INSTANCES: u32 = 1 << 20;
const BEYOND_CLASSES: usize = 1 << 11;

/// A class as enforce matches it: instance 0's group and how many instances the profile saw.
#[derive(Clone, Debug)]
struct ClassIdx {
    template: Group,
    profiled: u32,
}

impl ClassIdx {
    /// The instance a key of this class (but for the ordinal) belongs to: `(n, roles)` where
    /// the role's `group` is still instance 0's id.
    fn instance_of(&self, key: &ObjectKey) -> Vec<(u32, Role)> {
        let b = crate::classes::base(key);
        let g = &self.template;
        let mut out = Vec::new();
        if crate::classes::base(&g.device.key) == b && key.ordinal >= g.device.key.ordinal {
            out.push((
                key.ordinal - g.device.key.ordinal,
                Role::Device {
                    group: g.id,
                    direction: g.direction,
                },
            ));
        }
        for (i, m) in g.members.iter().enumerate() {
            if crate::classes::base(&m.staging.key) == b && key.ordinal >= m.staging.key.ordinal {
                out.push((
                    key.ordinal - m.staging.key.ordinal,
                    Role::Staging {
                        group: g.id,
                        member: i,
                        delta: m.delta,
                        direction: g.direction,
                    },
                ));
            }
        }
        out
    }
}

fn with_group(r: Role, id: u32) -> Role {
    match r {
        Role::Device { direction, .. } => Role::Device {
            group: id,
            direction,
        },
        Role::Staging {
            member,
            delta,
            direction,
            ..
        } => Role::Staging {
            group: id,
            member,
            delta,
            direction,
        },
    }
}

/// Whether one buffer may play all of `roles`: only a staging buffer that hosts the device
/// buffers of several `DeviceIntoStaging` groups side by side (one staging buffer holding the
/// inputs of several destinations, each at its own delta).
fn compatible(roles: &[Role]) -> bool {
    roles.len() <= 1
        || roles.iter().all(|r| {
            matches!(
                r,
                Role::Staging {
                    direction: Direction::DeviceIntoStaging,
                    ..
                }
            )
        })
}

impl PlanIndex {
    /// Index the plan's groups. A key that appears in two groups is ambiguous: both groups are
    /// left out, and the conflict is returned so the layer can say why. The exception is a
    /// staging buffer that hosts several `DeviceIntoStaging` groups (see [`compatible`]).
    /// The index of the groups of `plan` that came from the device with creation index
    /// `device` in the profiled process: a plan's groups apply only to the device traffic they
    /// were derived from.
    pub fn for_device(mut plan: Plan, device: u32) -> (PlanIndex, Vec<String>) {
        plan.groups.retain(|g| g.device_index == device);
        PlanIndex::new(plan)
    }

    pub fn new(plan: Plan) -> (PlanIndex, Vec<String>) {
        let mut by_key: HashMap<ObjectKey, Vec<Role>> = HashMap::default();
        let mut conflicts = Vec::new();
        let mut bad_groups = Vec::new();
        for g in &plan.groups {
            let mut entries = vec![(
                g.device.key.clone(),
                Role::Device {
                    group: g.id,
                    direction: g.direction,
                },
            )];
            for (i, m) in g.members.iter().enumerate() {
                entries.push((
                    m.staging.key.clone(),
                    Role::Staging {
                        group: g.id,
                        member: i,
                        delta: m.delta,
                        direction: g.direction,
                    },
                ));
            }
            for (k, r) in entries {
                let roles = by_key.entry(k.clone()).or_default();
                roles.push(r);
                if !compatible(roles) {
                    let prev = roles[0];
                    conflicts.push(format!(
                        "buffer {k} is in groups {} and {}; both left out",
                        prev.group(),
                        g.id
                    ));
                    bad_groups.extend(roles.iter().map(|r| r.group()));
                }
            }
        }
        for roles in by_key.values_mut() {
            roles.retain(|r| !bad_groups.contains(&r.group()));
        }
        by_key.retain(|_, r| !r.is_empty());
        // Classes whose every instance group is indexed (none left out above, none filtered
        // away before) and that may go past the instances profiled.
        let indexed: std::collections::BTreeSet<u32> =
            by_key.values().flatten().map(|r| r.group()).collect();
        let classes = plan
            .classes
            .iter()
            .filter(|c| c.beyond && c.groups.len() >= 2)
            .filter(|c| c.groups.iter().all(|id| indexed.contains(id)))
            .filter_map(|c| {
                let template = plan.groups.iter().find(|g| g.id == c.groups[0])?.clone();
                Some(ClassIdx {
                    template,
                    profiled: c.groups.len() as u32,
                })
            })
            .take(BEYOND_CLASSES)
            .collect();
        (
            PlanIndex {
                by_key,
                classes,
                plan,
            },
            conflicts,
        )
    }

    /// The roles of a buffer that is an instance of a per-call class past those the profile saw
    /// (issue 24), each in a group of its own whose id [`PlanIndex::beyond_group`] resolves.
    /// Empty when the key is one the plan names (see [`PlanIndex::roles`]) or no class's.
    pub fn beyond_roles(&self, key: &ObjectKey) -> Vec<Role> {
        if self.by_key.contains_key(key) {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (c, class) in self.classes.iter().enumerate() {
            for (n, role) in class.instance_of(key) {
                let past = n.checked_sub(class.profiled);
                if let Some(p) = past.filter(|&p| p < BEYOND_INSTANCES) {
                    out.push(with_group(role, BEYOND | (c as u32) << 20 | p));
                }
            }
        }
        // One buffer in two instances is ambiguous: no role.
        if out.len() > 1 {
            out.clear();
        }
        out
    }

    /// The group of a class instance past those profiled, by the id [`PlanIndex::beyond_roles`]
    /// gave (its keys are instance 0's with every ordinal moved up).
    pub fn beyond_group(&self, id: u32) -> Option<Group> {
        if id & BEYOND == 0 {
            return None;
        }
        let class = self.classes.get(((id & !BEYOND) >> 20) as usize)?;
        let n = class.profiled.checked_add(id & (BEYOND_INSTANCES - 1))?;
        let mut g = crate::classes::instance(&class.template, n)?;
        g.id = id;
        Some(g)
    }

    /// The class instance past those profiled whose member's own allocation has key `key`:
    /// `(group id, member)`.
    pub fn beyond_memory(&self, key: &ObjectKey) -> Option<(u32, usize)> {
        let b = crate::classes::base(key);
        for (c, class) in self.classes.iter().enumerate() {
            for (i, m) in class.template.members.iter().enumerate() {
                let Some(k0) = &m.memory else { continue };
                if crate::classes::base(k0) != b || key.ordinal < k0.ordinal {
                    continue;
                }
                let Some(p) = (key.ordinal - k0.ordinal).checked_sub(class.profiled) else {
                    continue;
                };
                if p < BEYOND_INSTANCES && class.template.direction == Direction::StagingIntoDevice
                {
                    return Some((BEYOND | (c as u32) << 20 | p, i));
                }
            }
        }
        None
    }

    /// Whether a group id names a class instance past those profiled.
    pub fn is_beyond(id: u32) -> bool {
        id & BEYOND != 0
    }

    /// The buffer's role (the first, for a staging buffer that hosts several groups).
    pub fn role(&self, key: &ObjectKey) -> Option<Role> {
        self.by_key.get(key).and_then(|r| r.first()).copied()
    }

    /// Every role of the buffer: more than one only for a staging buffer hosting several
    /// `DeviceIntoStaging` groups.
    pub fn roles(&self, key: &ObjectKey) -> &[Role] {
        self.by_key.get(key).map_or(&[], |r| r.as_slice())
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

/// The memory a buffer would be bound into by a redirected bind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    pub memory_type: u32,
    pub memory_size: u64,
    /// Offset in that memory where the buffer's byte 0 would be. Signed: a negative value is a
    /// refusal, not an overflow.
    pub offset: i128,
}

/// Why a redirected bind was refused (the layer then binds as the application asked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    MemoryType {
        type_index: u32,
        allowed_bits: u32,
    },
    Alignment {
        offset: i128,
        alignment: u64,
    },
    Bounds {
        offset: i128,
        size: u64,
        memory_size: u64,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::MemoryType { type_index, allowed_bits } => write!(
                f,
                "memory type {type_index} is not allowed by the buffer's memoryTypeBits {allowed_bits:#x}"
            ),
            Refusal::Alignment { offset, alignment } => {
                write!(f, "offset {offset} is not a multiple of the required alignment {alignment}")
            }
            Refusal::Bounds { offset, size, memory_size } => write!(
                f,
                "range [{offset}, {offset}+{size}) does not fit in the {memory_size}-byte allocation"
            ),
        }
    }
}

/// Check a redirected bind of a buffer with requirements `req` into `target`: memory type bits,
/// alignment, and bounds. The driver may accept a wrong bind silently (lavapipe does), so this
/// check is the only guard.
pub fn check_redirect(req: &MemReq, target: &Target) -> Result<(), Refusal> {
    if target.memory_type >= 32 || req.type_bits & (1u32 << target.memory_type) == 0 {
        return Err(Refusal::MemoryType {
            type_index: target.memory_type,
            allowed_bits: req.type_bits,
        });
    }
    let align = req.alignment.max(1) as i128;
    if target.offset < 0 || target.offset % align != 0 {
        return Err(Refusal::Alignment {
            offset: target.offset,
            alignment: req.alignment,
        });
    }
    if target.offset + req.size as i128 > target.memory_size as i128 {
        return Err(Refusal::Bounds {
            offset: target.offset,
            size: req.size,
            memory_size: target.memory_size,
        });
    }
    Ok(())
}

/// `StagingIntoDevice`: the application's maps of a staging buffer's own allocation
/// (`own_size` bytes, the buffer at `offset_in_own`) are served from echo's mapping of the device
/// allocation (`device_size` bytes), the buffer's byte 0 landing at `target_offset` there. Every
/// byte the application can map of its allocation must land inside the device allocation; the
/// shift (device offset of the allocation's byte 0) when it does. The analysis asks the same
/// question of the trace (`safety::compat`), so a group enforce would refuse here is refused in
/// the plan already.
pub fn check_map_redirect(
    target_offset: i128,
    offset_in_own: u64,
    own_size: u64,
    device_size: u64,
) -> Result<i128, String> {
    let shift = target_offset - offset_in_own as i128;
    if shift < 0 || shift + own_size as i128 > device_size as i128 {
        return Err(format!(
            "its {own_size}-byte allocation would map to [{shift}, {}) of the {device_size}-byte device allocation",
            shift + own_size as i128
        ));
    }
    Ok(shift)
}

/// Enforce's words for a staging member whose own allocation the application still holds mapped
/// when the member would be bound into the device buffer's memory.
pub const MAPPED_BY_APPLICATION: &str = "its allocation is mapped by the application while the device buffer is bound, so host writes through that mapping would not reach the shared memory";

/// `StagingIntoDevice` (issue 36): a staging member is bound into the device buffer's memory when
/// both are bound (its bind waits for the device buffer's). `mapped`: the application holds a
/// mapping of the member's own allocation at that moment, which it obtained from the driver (it
/// mapped the allocation before the device buffer was bound, and has not unmapped it since);
/// `redirected`: that allocation's maps are already served from the device allocation. A pointer
/// the driver handed out cannot be moved, so what the host writes through it would never reach
/// the shared range: the member is not bound there (the other members of its group can be).
/// Enforce asks this at the bind; the analysis asks it of the trace (`safety::compat::
/// mapped_before_bind`), so the plan never holds a member enforce would refuse for it.
pub fn check_staging_mapping(mapped: bool, redirected: bool) -> Result<(), &'static str> {
    if mapped && !redirected {
        return Err(MAPPED_BY_APPLICATION);
    }
    Ok(())
}

/// One line for the reasons a group was not applied, `(member, why)` each (`None`: the group as a
/// whole): members with the same reason share it ("members 0, 2: ..."), and past `limit`
/// characters only the first reason is kept, with how many others there were.
pub fn summarize_reasons(reasons: &[(Option<usize>, String)], limit: usize) -> String {
    let mut by: Vec<(String, Vec<Option<usize>>)> = Vec::new();
    for (m, why) in reasons {
        match by.iter_mut().find(|(w, _)| w == why) {
            Some((_, ms)) => ms.push(*m),
            None => by.push((why.clone(), vec![*m])),
        }
    }
    let part = |(why, ms): &(String, Vec<Option<usize>>)| {
        let named: Vec<String> = ms.iter().flatten().map(|m| m.to_string()).collect();
        match named.len() {
            0 => why.clone(),
            1 => format!("member {}: {why}", named[0]),
            _ => format!("members {}: {why}", named.join(", ")),
        }
    };
    let parts: Vec<String> = by.iter().map(part).collect();
    let line = parts.join("; ");
    if line.chars().count() <= limit || parts.len() < 2 {
        return line;
    }
    format!(
        "{} (and {} other reason{})",
        parts[0],
        parts.len() - 1,
        if parts.len() == 2 { "" } else { "s" }
    )
}

/// Whether allocations may be left unmade on a device with these extensions, features and
/// effective API version (the lower of the application's and the device's): every command the
/// device can call that can name an allocation must be one echo follows. Which commands those
/// are comes from the Vulkan registry ([`crate::registry`], issue 32), not from a list kept by
/// hand: e.g. `vkQueueBindSparse` (when the device enables `sparseBinding`),
/// `vkSetDeviceMemoryPriorityEXT`, the external-memory handle exports of other platforms.
pub fn memory_commands_followed<'a>(
    extensions: impl IntoIterator<Item = &'a str>,
    sparse_binding: bool,
    api_version: u32,
) -> Result<(), String> {
    let exts: Vec<&str> = extensions.into_iter().collect();
    let bad = crate::registry::memory_commands_not_followed(&exts, sparse_binding, api_version);
    if bad.is_empty() {
        return Ok(());
    }
    let mut names: Vec<String> = bad
        .iter()
        .map(|c| {
            let by: Vec<&str> = c
                .requires
                .iter()
                .copied()
                .filter(|r| exts.contains(r) || crate::registry::core_version(r).is_some())
                .collect();
            format!("{} ({})", c.name, by.join(", "))
        })
        .collect();
    names.sort();
    names.dedup();
    Err(format!(
        "the device can call {}, which can name an allocation and which echo does not follow",
        names.join(", ")
    ))
}

/// The structures of a `VkMemoryAllocateInfo` chain, as far as leaving the allocation unmade
/// goes (the layer reads the chain; this decides).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllocChain {
    /// `VkMemoryAllocateFlagsInfo::flags` (0 when absent).
    pub flags: u32,
    /// `VkMemoryDedicatedAllocateInfo`: `(buffer, image)` as raw handles (0: null).
    pub dedicated: Option<(u64, u64)>,
    /// A `VkMemoryPriorityAllocateInfoEXT` (a hint; kept when the allocation is made late).
    pub priority: Option<u32>,
    /// `sType` of every other structure.
    pub other: Vec<i32>,
}

/// Whether an allocation the plan marks `skip_allocation` may be left unmade given its chain
/// (`member`: the staging buffer whose allocation it is): only structures echo can recreate
/// when it has to make the allocation after all. Export, import, device-address and
/// device-mask allocations are always made.
pub fn may_skip_allocation(chain: &AllocChain, member: u64) -> Result<(), String> {
    if let Some(t) = chain.other.first() {
        return Err(format!(
            "its allocate info carries a structure of sType {t} (export, import or another extension), which only the driver can honour"
        ));
    }
    if chain.flags != 0 {
        return Err(format!(
            "it is allocated with VkMemoryAllocateFlags {:#x}",
            chain.flags
        ));
    }
    if let Some((b, i)) = chain.dedicated {
        if i != 0 || b != member {
            return Err("it is dedicated to another resource".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{BufferRef, Group, Member, Role as MemberRole, SubstituteSync, Thresholds};
    use crate::trace::Context;

    fn key(site: &str) -> ObjectKey {
        ObjectKey {
            site: site.into(),
            size: 1 << 20,
            usage: 3,
            flags: 0,
            ordinal: 0,
        }
    }

    fn bref(site: &str) -> BufferRef {
        BufferRef {
            key: key(site),
            usage: 3,
            created_at: String::new(),
        }
    }

    fn group(id: u32, dev: &str, staging: &[&str]) -> Group {
        Group {
            id,
            device_index: 0,
            device: bref(dev),
            members: staging
                .iter()
                .map(|s| Member {
                    staging: bref(s),
                    delta: 0,
                    role: MemberRole::Both,
                    copies: 2,
                    bytes: 2 << 20,
                    one_time: false,
                    memory: None,
                    memory_offset: 0,
                    skip_allocation: false,
                    allocation_note: String::new(),
                })
                .collect(),
            direction: Direction::StagingIntoDevice,
            sync: SubstituteSync::MemoryBarrier,
            bytes_saved_per_iter: 2 << 20,
            copies_total: 4,
            bytes_total: 4 << 20,
            memory_saved: 0,
            device_memory: None,
            device_mapped: false,
            extrapolable: false,
            not_extrapolable: String::new(),
        }
    }

    #[test]
    fn roles_by_key_and_conflicts_drop_both_groups() {
        let mut plan = Plan::empty(Context::default(), Thresholds::default());
        plan.groups = vec![group(0, "d0", &["h0", "h1"]), group(1, "d1", &["h2"])];
        let (idx, conflicts) = PlanIndex::new(plan.clone());
        assert!(conflicts.is_empty());
        assert!(matches!(
            idx.role(&key("d0")),
            Some(Role::Device { group: 0, .. })
        ));
        assert!(matches!(
            idx.role(&key("h1")),
            Some(Role::Staging {
                group: 0,
                member: 1,
                ..
            })
        ));
        assert_eq!(idx.role(&key("zz")), None);
        plan.groups.push(group(2, "d2", &["h2"]));
        let (idx, conflicts) = PlanIndex::new(plan.clone());
        assert_eq!(conflicts.len(), 1, "{conflicts:?}");
        assert_eq!(idx.role(&key("h2")), None);
        assert_eq!(idx.role(&key("d1")), None);
        assert!(idx.role(&key("d0")).is_some());

        // One sub-allocated staging buffer hosting two device buffers side by side is fine.
        for g in &mut plan.groups[1..] {
            g.direction = Direction::DeviceIntoStaging;
        }
        plan.groups[2].members[0].delta = 1 << 20;
        let (idx, conflicts) = PlanIndex::new(plan);
        assert!(conflicts.is_empty(), "{conflicts:?}");
        assert_eq!(idx.roles(&key("h2")).len(), 2);
        assert!(matches!(
            idx.role(&key("d2")),
            Some(Role::Device { group: 2, .. })
        ));
    }

    #[test]
    fn allocations_are_left_unmade_only_where_echo_follows_every_use() {
        assert!(memory_commands_followed(["VK_KHR_swapchain"], false, vk_version(1, 3)).is_ok());
        // vkMapMemory2 is followed (issue 32/33): 1.4 and VK_KHR_map_memory2 keep the gain.
        assert!(memory_commands_followed(["VK_KHR_map_memory2"], false, vk_version(1, 3)).is_ok());
        assert!(memory_commands_followed([], false, vk_version(1, 4)).is_ok());
        // vkSetDeviceMemoryPriorityEXT takes an allocation and is not followed.
        let e = memory_commands_followed(
            ["VK_KHR_swapchain", "VK_EXT_pageable_device_local_memory"],
            false,
            vk_version(1, 3),
        )
        .unwrap_err();
        assert!(
            e.contains("vkSetDeviceMemoryPriorityEXT (VK_EXT_pageable_device_local_memory)"),
            "{e}"
        );
        assert!(memory_commands_followed([], true, vk_version(1, 2))
            .unwrap_err()
            .contains("vkQueueBindSparse"));

        let plain = AllocChain::default();
        assert!(may_skip_allocation(&plain, 7).is_ok());
        let own = AllocChain {
            dedicated: Some((7, 0)),
            priority: Some(0),
            ..Default::default()
        };
        assert!(may_skip_allocation(&own, 7).is_ok());
        assert!(may_skip_allocation(&own, 8).is_err());
        let export = AllocChain {
            other: vec![1000072002],
            ..Default::default()
        };
        assert!(may_skip_allocation(&export, 7)
            .unwrap_err()
            .contains("1000072002"));
        let bda = AllocChain {
            flags: 2,
            ..Default::default()
        };
        assert!(may_skip_allocation(&bda, 7).is_err());
    }

    fn vk_version(major: u32, minor: u32) -> u32 {
        major << 22 | minor << 12
    }

    #[test]
    fn map_redirect_must_fit_the_device_allocation() {
        // A 64 KiB staging allocation, buffer at 0, into 1 MiB at 4096: fits.
        assert_eq!(check_map_redirect(4096, 0, 65536, 1 << 20), Ok(4096));
        // wgpu at 16 MiB (issue 23): a 128 MiB staging block cannot map into 64 MiB.
        let e = check_map_redirect(0, 0, 128 << 20, 64 << 20).unwrap_err();
        assert!(e.contains("134217728-byte allocation"), "{e}");
        // The buffer sits at 8192 of its block but lands at 4096: the block's start would be
        // before the device allocation's.
        assert!(check_map_redirect(4096, 8192, 65536, 1 << 20).is_err());
    }

    #[test]
    fn reasons_in_one_line() {
        let same = vec![
            (Some(0), "used before its partner was bound".to_string()),
            (Some(1), "used before its partner was bound".to_string()),
            (Some(2), "used before its partner was bound".to_string()),
        ];
        assert_eq!(
            summarize_reasons(&same, 200),
            "members 0, 1, 2: used before its partner was bound"
        );
        let long: Vec<(Option<usize>, String)> = (0..12)
            .map(|i| (Some(i), format!("reason number {i} {}", "x".repeat(80))))
            .collect();
        let line = summarize_reasons(&long, 200);
        assert!(line.starts_with("member 0: reason number 0"), "{line}");
        assert!(line.ends_with("(and 11 other reasons)"), "{line}");
        assert!(line.chars().count() < 200, "{line}");
        assert_eq!(
            summarize_reasons(&[(None, "its device buffer was not created".into())], 10),
            "its device buffer was not created"
        );
    }

    #[test]
    fn redirect_checks_type_alignment_bounds() {
        let req = MemReq {
            size: 1024,
            alignment: 256,
            type_bits: 0b10,
        };
        let ok = Target {
            memory_type: 1,
            memory_size: 4096,
            offset: 512,
        };
        assert_eq!(check_redirect(&req, &ok), Ok(()));
        assert!(matches!(
            check_redirect(
                &req,
                &Target {
                    memory_type: 0,
                    ..ok
                }
            ),
            Err(Refusal::MemoryType { .. })
        ));
        assert!(matches!(
            check_redirect(
                &req,
                &Target {
                    memory_type: 40,
                    ..ok
                }
            ),
            Err(Refusal::MemoryType { .. })
        ));
        assert!(matches!(
            check_redirect(&req, &Target { offset: 100, ..ok }),
            Err(Refusal::Alignment { .. })
        ));
        assert!(matches!(
            check_redirect(&req, &Target { offset: -256, ..ok }),
            Err(Refusal::Alignment { .. })
        ));
        assert!(matches!(
            check_redirect(&req, &Target { offset: 3328, ..ok }),
            Err(Refusal::Bounds { .. })
        ));
        assert_eq!(check_redirect(&req, &Target { offset: 3072, ..ok }), Ok(()));
        let msg = check_redirect(&req, &Target { offset: 3328, ..ok })
            .unwrap_err()
            .to_string();
        assert!(msg.contains("4096-byte allocation"), "{msg}");
    }
}
