//! The topology rule of DESIGN §2: is a physical device's memory unified?
//!
//! Vulkan never says "unified"; the class is derived from the memory table and the device type.
//! The layer calls [`classify`] for every physical device and acts only where the answer is
//! active; `vkecho doctor` prints the same answer.

use serde::{Deserialize, Serialize};

/// `VkMemoryPropertyFlagBits`, as raw bits (this crate makes no Vulkan calls and links no bindings).
pub mod flags {
    pub const DEVICE_LOCAL: u32 = 0x1;
    pub const HOST_VISIBLE: u32 = 0x2;
    pub const HOST_COHERENT: u32 = 0x4;
    pub const HOST_CACHED: u32 = 0x8;
    pub const LAZILY_ALLOCATED: u32 = 0x10;
    pub const PROTECTED: u32 = 0x20;
    /// `VK_MEMORY_HEAP_DEVICE_LOCAL_BIT`
    pub const HEAP_DEVICE_LOCAL: u32 = 0x1;
}

/// `VkPhysicalDeviceType`, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DeviceType {
    Other,
    IntegratedGpu,
    DiscreteGpu,
    VirtualGpu,
    Cpu,
}

impl DeviceType {
    /// From the raw `VkPhysicalDeviceType` value.
    pub fn from_raw(v: i32) -> DeviceType {
        match v {
            1 => DeviceType::IntegratedGpu,
            2 => DeviceType::DiscreteGpu,
            3 => DeviceType::VirtualGpu,
            4 => DeviceType::Cpu,
            _ => DeviceType::Other,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryHeap {
    pub size: u64,
    pub flags: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryType {
    pub heap: u32,
    pub flags: u32,
}

/// What `vkGetPhysicalDeviceMemoryProperties` and `vkGetPhysicalDeviceProperties` say.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryTable {
    pub device_type: DeviceType,
    pub heaps: Vec<MemoryHeap>,
    pub types: Vec<MemoryType>,
}

impl MemoryTable {
    /// From the raw `VkPhysicalDeviceProperties::deviceType` and the memory properties, heaps as
    /// `(size, flags)` and types as `(heapIndex, propertyFlags)`.
    pub fn from_raw(
        device_type: i32,
        heaps: impl IntoIterator<Item = (u64, u32)>,
        types: impl IntoIterator<Item = (u32, u32)>,
    ) -> MemoryTable {
        MemoryTable {
            device_type: DeviceType::from_raw(device_type),
            heaps: heaps
                .into_iter()
                .map(|(size, flags)| MemoryHeap { size, flags })
                .collect(),
            types: types
                .into_iter()
                .map(|(heap, flags)| MemoryType { heap, flags })
                .collect(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    UmaStrict,
    UmaIntegrated,
    Discrete,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::UmaStrict => "uma-strict",
            Class::UmaIntegrated => "uma-integrated",
            Class::Discrete => "discrete",
        }
    }
}

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `topology` setting: which classes the layer acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum TopologyPolicy {
    /// Act on `uma-strict` only (default).
    #[default]
    Strict,
    /// Act on `uma-strict` and `uma-integrated`.
    Integrated,
}

/// The answer for one physical device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    pub class: Class,
    /// The memory type aliasing would use: a DEVICE_LOCAL|HOST_VISIBLE type, coherent before
    /// anything else (a staging map redirected into it must stay coherent: the application
    /// flushes nothing on coherent memory), then cached. `None` for a table without one.
    pub alias_type: Option<u32>,
    /// Whether a DEVICE_LOCAL|HOST_VISIBLE|HOST_CACHED type exists (DESIGN §2: without one, CPU
    /// reads of aliased memory may be 10–80× slower; calibration decides).
    pub cached_host_visible: bool,
}

impl Topology {
    /// Whether the layer acts on this device under `policy`.
    pub fn active(&self, policy: TopologyPolicy) -> bool {
        match self.class {
            Class::UmaStrict => true,
            Class::UmaIntegrated => policy == TopologyPolicy::Integrated,
            Class::Discrete => false,
        }
    }
}

fn has(f: u32, bits: u32) -> bool {
    f & bits == bits
}

/// Classify a memory table (DESIGN §2).
pub fn classify(table: &MemoryTable) -> Topology {
    use flags::*;
    let dl_hv = DEVICE_LOCAL | HOST_VISIBLE;
    let usable = |t: &MemoryType| t.flags & (PROTECTED | LAZILY_ALLOCATED) == 0;
    let some_dl_hv = table.types.iter().any(|t| has(t.flags, dl_hv));
    let all_dl = table
        .types
        .iter()
        .filter(|t| t.flags != 0)
        .all(|t| has(t.flags, DEVICE_LOCAL));
    let class = if all_dl && some_dl_hv {
        Class::UmaStrict
    } else if some_dl_hv
        && matches!(
            table.device_type,
            DeviceType::IntegratedGpu | DeviceType::Cpu
        )
    {
        Class::UmaIntegrated
    } else {
        Class::Discrete
    };
    // Preference: coherent+cached, coherent, cached, any DL|HV; lowest index wins a tie.
    // Coherence comes first: echo serves a coherent staging buffer's map from this type, and an
    // application that mapped coherent memory never flushes (the Jetson Nano's cached type 3 is
    // not coherent; its coherent type 2 is the one that keeps the application's writes visible).
    let rank = |f: u32| match (has(f, HOST_COHERENT), has(f, HOST_CACHED)) {
        (true, true) => 0,
        (true, false) => 1,
        (false, true) => 2,
        (false, false) => 3,
    };
    let alias_type = table
        .types
        .iter()
        .enumerate()
        .filter(|(_, t)| has(t.flags, dl_hv) && usable(t))
        .min_by_key(|(i, t)| (rank(t.flags), *i))
        .map(|(i, _)| i as u32);
    let cached_host_visible = table
        .types
        .iter()
        .any(|t| has(t.flags, dl_hv | HOST_CACHED) && usable(t));
    Topology {
        class,
        alias_type,
        cached_host_visible,
    }
}

/// Render memory property flags the way the test data and `vkecho doctor` write them.
pub fn flag_names(f: u32) -> Vec<&'static str> {
    use flags::*;
    let names = [
        (DEVICE_LOCAL, "DL"),
        (HOST_VISIBLE, "HV"),
        (HOST_COHERENT, "HC"),
        (HOST_CACHED, "HCA"),
        (LAZILY_ALLOCATED, "LAZY"),
        (PROTECTED, "PROT"),
    ];
    names
        .iter()
        .filter(|(b, _)| f & b != 0)
        .map(|(_, n)| *n)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use flags::*;
    use serde_json::Value;

    fn parse_flags(v: &Value) -> u32 {
        v.as_array()
            .unwrap()
            .iter()
            .map(|f| match f.as_str().unwrap() {
                "DL" => DEVICE_LOCAL,
                "HV" => HOST_VISIBLE,
                "HC" => HOST_COHERENT,
                "HCA" => HOST_CACHED,
                "LAZY" => LAZILY_ALLOCATED,
                "PROT" => PROTECTED,
                other => panic!("unknown flag {other}"),
            })
            .fold(0, |a, b| a | b)
    }

    fn device_type(s: &str) -> DeviceType {
        match s {
            "CPU" => DeviceType::Cpu,
            "INTEGRATED_GPU" => DeviceType::IntegratedGpu,
            "DISCRETE_GPU" => DeviceType::DiscreteGpu,
            "VIRTUAL_GPU" => DeviceType::VirtualGpu,
            _ => DeviceType::Other,
        }
    }

    /// Every real device table in testdata/devices.json (copied from shared/memory-tables) gets
    /// the class and cached-host-visible answer recorded there.
    #[test]
    fn every_real_device_table_is_classified_as_recorded() {
        let text = include_str!("../testdata/devices.json");
        let doc: Value = serde_json::from_str(text).unwrap();
        let devices = doc["devices"].as_array().unwrap();
        assert!(devices.len() >= 10, "test data lost devices");
        for d in devices {
            let name = d["name"].as_str().unwrap();
            let table = MemoryTable {
                device_type: device_type(d["deviceType"].as_str().unwrap()),
                heaps: d["heaps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|h| MemoryHeap {
                        size: h["size"].as_u64().unwrap(),
                        flags: if parse_flags(&h["flags"]) & DEVICE_LOCAL != 0 {
                            HEAP_DEVICE_LOCAL
                        } else {
                            0
                        },
                    })
                    .collect(),
                types: d["types"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| MemoryType {
                        heap: t["heap"].as_u64().unwrap() as u32,
                        flags: parse_flags(&t["flags"]),
                    })
                    .collect(),
            };
            let topo = classify(&table);
            assert_eq!(
                topo.class.as_str(),
                d["expected"].as_str().unwrap(),
                "class of {name}"
            );
            assert_eq!(
                topo.cached_host_visible,
                d["cached_host_visible"].as_bool().unwrap(),
                "cached host-visible of {name}"
            );
            if topo.class != Class::Discrete {
                let t = topo.alias_type.expect("UMA device without alias type");
                assert!(has(
                    table.types[t as usize].flags,
                    DEVICE_LOCAL | HOST_VISIBLE
                ));
                // Coherent whenever the table has a coherent DL|HV type (Jetson Nano: 2, not
                // the cached non-coherent 3).
                let coherent = DEVICE_LOCAL | HOST_VISIBLE | HOST_COHERENT;
                if table
                    .types
                    .iter()
                    .any(|x| has(x.flags, coherent) && x.flags & PROTECTED == 0)
                {
                    assert!(
                        has(table.types[t as usize].flags, coherent),
                        "{name}: alias type {t} is not coherent"
                    );
                }
                if name.contains("Jetson Nano") {
                    assert_eq!(t, 2, "{name}");
                }
            }
        }
    }

    #[test]
    fn lavapipe_aliases_its_only_type() {
        let t = classify(&MemoryTable {
            device_type: DeviceType::Cpu,
            heaps: vec![MemoryHeap {
                size: 1 << 31,
                flags: HEAP_DEVICE_LOCAL,
            }],
            types: vec![MemoryType {
                heap: 0,
                flags: DEVICE_LOCAL | HOST_VISIBLE | HOST_COHERENT | HOST_CACHED,
            }],
        });
        assert_eq!(t.class, Class::UmaStrict);
        assert_eq!(t.alias_type, Some(0));
        assert!(t.active(TopologyPolicy::Strict));
    }

    #[test]
    fn integrated_needs_the_policy_and_discrete_never_acts() {
        let apu = MemoryTable {
            device_type: DeviceType::IntegratedGpu,
            heaps: vec![],
            types: vec![
                MemoryType {
                    heap: 0,
                    flags: DEVICE_LOCAL,
                },
                MemoryType {
                    heap: 1,
                    flags: HOST_VISIBLE | HOST_COHERENT,
                },
                MemoryType {
                    heap: 0,
                    flags: DEVICE_LOCAL | HOST_VISIBLE | HOST_COHERENT,
                },
            ],
        };
        let t = classify(&apu);
        assert_eq!(t.class, Class::UmaIntegrated);
        assert!(!t.active(TopologyPolicy::Strict));
        assert!(t.active(TopologyPolicy::Integrated));
        let discrete = MemoryTable {
            device_type: DeviceType::DiscreteGpu,
            ..apu
        };
        let t = classify(&discrete);
        assert_eq!(t.class, Class::Discrete);
        assert!(!t.active(TopologyPolicy::Integrated));
    }

    #[test]
    fn prefers_coherent_cached_and_skips_protected() {
        let t = classify(&MemoryTable {
            device_type: DeviceType::IntegratedGpu,
            heaps: vec![],
            types: vec![
                MemoryType {
                    heap: 0,
                    flags: DEVICE_LOCAL | HOST_VISIBLE | PROTECTED | HOST_CACHED | HOST_COHERENT,
                },
                MemoryType {
                    heap: 0,
                    flags: DEVICE_LOCAL | HOST_VISIBLE | HOST_COHERENT,
                },
                MemoryType {
                    heap: 0,
                    flags: DEVICE_LOCAL | HOST_VISIBLE | HOST_CACHED | HOST_COHERENT,
                },
            ],
        });
        assert_eq!(t.alias_type, Some(2));
    }
}
