//! Enforce-time decisions (DESIGN §6), as pure functions: which role a new buffer plays in the
//! plan, and whether a redirected bind is allowed. The layer (`layer/src/enforce/`) asks here and
//! then makes the Vulkan calls; it decides nothing itself.

use crate::plan::{Direction, Plan};
use crate::trace::{MemReq, ObjectKey};
use std::collections::HashMap;

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
    pub plan: Plan,
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
        let mut by_key: HashMap<ObjectKey, Vec<Role>> = HashMap::new();
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
        (PlanIndex { by_key, plan }, conflicts)
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
                })
                .collect(),
            direction: Direction::StagingIntoDevice,
            sync: SubstituteSync::MemoryBarrier,
            bytes_saved_per_iter: 2 << 20,
            copies_total: 4,
            bytes_total: 4 << 20,
            memory_saved: 0,
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
