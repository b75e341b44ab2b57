//! `VK_LAYER_ECHO_test_discrete`: a test-only explicit layer placed below VK_LAYER_echo that
//! makes the device look like a discrete GPU to the layers above it.
//!
//! It presents the memory table of a typical discrete card — type 0 DEVICE_LOCAL (heap 0),
//! type 1 HOST_VISIBLE|HOST_COHERENT and type 2 HOST_VISIBLE|HOST_COHERENT|HOST_CACHED (heap 1,
//! host memory) — and `deviceType = DISCRETE_GPU`, and maps every fake memory type index back to
//! the driver's real host-visible type in `vkAllocateMemory` (and `memoryTypeBits` in the
//! memory-requirement queries), so applications still run. The tests write its manifest.
//!
//! With `VK_ECHO_TEST_TABLE=apu` it presents an AMD-APU-like table instead (`INTEGRATED_GPU`;
//! types DEVICE_LOCAL, HOST_VISIBLE|HOST_COHERENT on a host heap, DEVICE_LOCAL|HOST_VISIBLE|
//! HOST_COHERENT): class `uma-integrated`, which echo acts on only with `topology=integrated`.
//! With `VK_ECHO_TEST_TABLE=real` it presents the driver's own table and type (for the fault and
//! poison modes below on the real UMA device).
//!
//! With `VK_ECHO_TEST_TABLE=jetson-nano` it presents a Jetson Nano (JetPack 4.6, issue 13): the
//! memory table and device type of the entry of `analyzer/testdata/devices.json` whose name
//! contains "Jetson Nano" (embedded at build time; `VK_ECHO_TEST_DEVICES=FILE` reads another
//! devices.json, `VK_ECHO_TEST_DEVICE=TEXT` picks another entry), `apiVersion` 1.2, and a Vulkan
//! 1.2 driver's command set: every Vulkan 1.3 core command (the names of ash's `InstanceFnV1_3`
//! and `DeviceFnV1_3`) resolves to NULL through `vkGetInstanceProcAddr`/`vkGetDeviceProcAddr`,
//! and `VK_EXT_external_memory_host` is neither listed nor creatable
//! (`VK_ERROR_EXTENSION_NOT_PRESENT`), nor is `vkGetMemoryHostPointerPropertiesEXT` resolvable.
//! The KHR/EXT aliases of promoted extensions stay as the driver offers them (a 1.2 driver may
//! have `VK_KHR_copy_commands2`).
//! A real GPU does not use the CPU's page tables; lavapipe's "GPU" threads do. So that an
//! application's (or echo's) `mprotect` of a mapping behaves as on the Jetson, every allocation
//! of a host-visible type is backed, below everything above, by one memfd mapped twice: view A
//! imported into lavapipe with `VK_EXT_external_memory_host` (which this layer enables for
//! itself and hides), view B returned by `vkMapMemory`. Buffers get
//! `VkExternalMemoryBufferCreateInfo(HOST_ALLOCATION)` so that binding them there is valid. An
//! allocation it cannot back that way prints one `[VK_LAYER_ECHO_test_discrete] jetson: ...
//! driver's own mapping` line (a test can see it). `VK_ECHO_TEST_JETSON_MAP=driver` turns this
//! off, to show what it avoids (lavapipe's threads then fault on pages protected for the host).
//!
//! In every mode `VK_ECHO_TEST_UUID=<32 hex digits>` replaces the `deviceUUID` of
//! `VkPhysicalDeviceIDProperties` and `VK_ECHO_TEST_DRIVER_VERSION=N` the `driverVersion` (issue 27:
//! two boards of one model, or one board after a driver update).
//!
//! Fault injection (issue 8): `VK_ECHO_TEST_FAIL=entry[,entry...]`, each entry
//! `COMMAND[:FILTER]@N` (fail the Nth matching call, 1-based), `COMMAND[:FILTER]@N+` (the Nth and
//! every later one) or `COMMAND[:FILTER]@*` (every one). COMMAND is one of `vkAllocateMemory`,
//! `vkBindBufferMemory`, `vkBindBufferMemory2` (also the KHR alias), `vkMapMemory`,
//! `vkCreateBuffer`; FILTER is, for vkAllocateMemory, `import` (carries a
//! `VkImportMemoryHostPointerInfoEXT`: echo's profile-mode double mapping) or `plain` (does not),
//! and for vkMapMemory/vkBindBufferMemory `older` (an allocation other than the newest one, or one
//! a buffer is already bound into: the samples map and bind right after allocating, echo's own
//! enforce-mode maps and redirected binds target a device allocation its buffer is bound into).
//! A failed call returns `VK_ERROR_OUT_OF_DEVICE_MEMORY` (`vkMapMemory`:
//! `VK_ERROR_MEMORY_MAP_FAILED`; `vkCreateBuffer`: `VK_ERROR_OUT_OF_HOST_MEMORY`) without
//! reaching the driver, and prints one line
//! `[VK_LAYER_ECHO_test_discrete] injected ...` to stderr, so a test can count the faults.
//!
//! Poisoning (issue 8, DESIGN §8 "recycled memory"): `VK_ECHO_TEST_POISON=1` (or a byte in hex,
//! default `a5`) fills every new host-visible `VkDeviceMemory` with that byte right after
//! `vkAllocateMemory` (map, fill, unmap), so code that assumes fresh memory is zero shows it.
//!
//! Memory at the driver boundary (issue 14): the layer counts every `vkAllocateMemory` that
//! reaches it (bytes, allocations, live bytes and their peak) and checks that every
//! `VkDeviceMemory` the layers above hand it (free, map, unmap, flush, invalidate, buffer and image
//! binds) is one it allocated — a handle a layer above invented must never reach the driver.
//! `VK_ECHO_TEST_MEMLOG=<file>` appends one JSON line per device at `vkDestroyDevice`:
//! `{"allocations", "allocated_bytes", "peak_live_bytes", "live_bytes", "unknown_handles"}`; an
//! unknown handle is also one stderr line `[VK_LAYER_ECHO_test_discrete] unknown memory ...`.
//!
//! Over 1,000 lines: a layer is one file of intercepts; each behaviour above (the tables, the
//! faults it injects, the poisoning, the memory log) is a section of it.

#![allow(non_snake_case, clippy::missing_safety_doc, clippy::nonminimal_bool)]

#[path = "../../../../layer/src/loader/vk_layer_bindings.rs"]
#[rustfmt::skip]
mod bindings;

use ash::vk;
use ash::vk::Handle;
use bindings::{
    VkLayerDeviceCreateInfo, VkLayerFunction, VkLayerInstanceCreateInfo, VkNegotiateLayerInterface,
};
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr};
use std::sync::{Mutex, OnceLock};

const LAYER_NAME: &CStr = c"VK_LAYER_ECHO_test_discrete";
const FAKE_TYPES: [(u32, vk::MemoryPropertyFlags); 3] = [
    (0, vk::MemoryPropertyFlags::DEVICE_LOCAL),
    (
        1,
        vk::MemoryPropertyFlags::from_raw(
            vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw()
                | vk::MemoryPropertyFlags::HOST_COHERENT.as_raw(),
        ),
    ),
    (
        1,
        vk::MemoryPropertyFlags::from_raw(
            vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw()
                | vk::MemoryPropertyFlags::HOST_COHERENT.as_raw()
                | vk::MemoryPropertyFlags::HOST_CACHED.as_raw(),
        ),
    ),
];
const APU_TYPES: [(u32, vk::MemoryPropertyFlags); 3] = [
    (0, vk::MemoryPropertyFlags::DEVICE_LOCAL),
    (1, FAKE_TYPES[1].1),
    (
        0,
        vk::MemoryPropertyFlags::from_raw(
            vk::MemoryPropertyFlags::DEVICE_LOCAL.as_raw()
                | vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw()
                | vk::MemoryPropertyFlags::HOST_COHERENT.as_raw(),
        ),
    ),
];
const FAKE_BITS: u32 = 0b111;

/// Whether to present the APU table (`VK_ECHO_TEST_TABLE=apu`) instead of the discrete one.
fn apu() -> bool {
    static APU: OnceLock<bool> = OnceLock::new();
    *APU.get_or_init(|| std::env::var("VK_ECHO_TEST_TABLE").is_ok_and(|v| v == "apu"))
}

/// Whether to present the driver's own table unchanged (`VK_ECHO_TEST_TABLE=real`).
fn real() -> bool {
    static REAL: OnceLock<bool> = OnceLock::new();
    *REAL.get_or_init(|| {
        std::env::var("VK_ECHO_TEST_TABLE").is_ok_and(|v| v == "real")
            || (jetson() && table().is_none())
    })
}

/// Whether to present the Jetson Nano (`VK_ECHO_TEST_TABLE=jetson-nano`).
fn jetson() -> bool {
    static J: OnceLock<bool> = OnceLock::new();
    *J.get_or_init(|| std::env::var("VK_ECHO_TEST_TABLE").is_ok_and(|v| v == "jetson-nano"))
}

/// Echo's double mapping (one memfd, two views), reused as is (`hostmem::memfd`, so its tests
/// find themselves by the same name).
mod hostmem;
use hostmem::memfd::DoubleMap;

const EXT_MEMORY_HOST: &CStr = c"VK_EXT_external_memory_host";
const EXT_EXTERNAL_MEMORY: &CStr = c"VK_KHR_external_memory";

/// The devices.json the layer was built with (the analyzer's test data, from the shared tables).
const DEVICES_JSON: &str = include_str!("../../../../analyzer/testdata/devices.json");

/// A device of devices.json, as Vulkan structures.
#[derive(Debug)]
struct Table {
    name: String,
    device_type: vk::PhysicalDeviceType,
    heaps: Vec<vk::MemoryHeap>,
    types: Vec<vk::MemoryType>,
}

impl Table {
    /// The types a buffer may use: every type but the protected ones.
    fn buffer_bits(&self) -> u32 {
        self.types
            .iter()
            .enumerate()
            .filter(|(_, t)| {
                !t.property_flags
                    .contains(vk::MemoryPropertyFlags::PROTECTED)
            })
            .fold(0, |bits, (i, _)| bits | 1 << i)
    }

    fn host_visible(&self, index: u32) -> bool {
        self.types.get(index as usize).is_some_and(|t| {
            t.property_flags
                .contains(vk::MemoryPropertyFlags::HOST_VISIBLE)
        })
    }
}

/// The entry of devices.json `text` whose name contains `want`.
fn parse_table(text: &str, want: &str) -> Result<Table, String> {
    use vk::MemoryPropertyFlags as F;
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let dev = doc["devices"]
        .as_array()
        .ok_or("no \"devices\" array")?
        .iter()
        .find(|d| d["name"].as_str().is_some_and(|n| n.contains(want)))
        .ok_or_else(|| format!("no device whose name contains '{want}'"))?;
    let name = dev["name"].as_str().unwrap_or_default().to_string();
    let device_type = match dev["deviceType"].as_str() {
        Some("INTEGRATED_GPU") => vk::PhysicalDeviceType::INTEGRATED_GPU,
        Some("DISCRETE_GPU") => vk::PhysicalDeviceType::DISCRETE_GPU,
        Some("VIRTUAL_GPU") => vk::PhysicalDeviceType::VIRTUAL_GPU,
        Some("CPU") => vk::PhysicalDeviceType::CPU,
        Some("OTHER") => vk::PhysicalDeviceType::OTHER,
        other => return Err(format!("{name}: unknown deviceType {other:?}")),
    };
    let list = |v: &serde_json::Value, what: &str| -> Result<Vec<String>, String> {
        v.as_array()
            .ok_or_else(|| format!("{name}: {what} is not an array"))?
            .iter()
            .map(|f| {
                f.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("{name}: {what} holds a non-string"))
            })
            .collect()
    };
    let mut heaps = Vec::new();
    for h in dev["heaps"].as_array().ok_or("no heaps")? {
        let mut flags = vk::MemoryHeapFlags::empty();
        for f in list(&h["flags"], "heap flags")? {
            flags |= match f.as_str() {
                "DL" => vk::MemoryHeapFlags::DEVICE_LOCAL,
                "MI" => vk::MemoryHeapFlags::MULTI_INSTANCE,
                other => return Err(format!("{name}: unknown heap flag {other}")),
            };
        }
        let size = h["size"]
            .as_u64()
            .ok_or_else(|| format!("{name}: heap without a size"))?;
        heaps.push(vk::MemoryHeap { size, flags });
    }
    let mut types = Vec::new();
    for t in dev["types"].as_array().ok_or("no types")? {
        let mut flags = F::empty();
        for f in list(&t["flags"], "type flags")? {
            flags |= match f.as_str() {
                "DL" => F::DEVICE_LOCAL,
                "HV" => F::HOST_VISIBLE,
                "HC" => F::HOST_COHERENT,
                "HCA" => F::HOST_CACHED,
                "LAZY" => F::LAZILY_ALLOCATED,
                "PROT" => F::PROTECTED,
                other => return Err(format!("{name}: unknown type flag {other}")),
            };
        }
        let heap = t["heap"]
            .as_u64()
            .filter(|h| (*h as usize) < heaps.len())
            .ok_or_else(|| format!("{name}: a type names no valid heap"))?;
        types.push(vk::MemoryType {
            property_flags: flags,
            heap_index: heap as u32,
        });
    }
    if heaps.is_empty() || heaps.len() > vk::MAX_MEMORY_HEAPS || types.is_empty() {
        return Err(format!("{name}: heap or type count out of range"));
    }
    if types.len() > vk::MAX_MEMORY_TYPES {
        return Err(format!("{name}: more than {} types", vk::MAX_MEMORY_TYPES));
    }
    Ok(Table {
        name,
        device_type,
        heaps,
        types,
    })
}

/// The table of jetson mode (`None` in every other mode, or when it cannot be read: then the
/// driver's own table is presented and one line says why).
fn table() -> Option<&'static Table> {
    static T: OnceLock<Option<Table>> = OnceLock::new();
    T.get_or_init(|| {
        if !jetson() {
            return None;
        }
        let text = match std::env::var("VK_ECHO_TEST_DEVICES") {
            Ok(path) => match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("[VK_LAYER_ECHO_test_discrete] jetson: cannot read {path}: {e}");
                    return None;
                }
            },
            Err(_) => DEVICES_JSON.to_string(),
        };
        let want = std::env::var("VK_ECHO_TEST_DEVICE").unwrap_or_else(|_| "Jetson Nano".into());
        match parse_table(&text, &want) {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("[VK_LAYER_ECHO_test_discrete] jetson: no table ({e}); the driver's own is presented");
                None
            }
        }
    })
    .as_ref()
}

/// Whether a Vulkan 1.2 driver lacks `name` (jetson mode): every Vulkan 1.3 core command, and the
/// command of `VK_EXT_external_memory_host`.
fn hidden(name: &[u8]) -> bool {
    static H: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    if !jetson() {
        return false;
    }
    H.get_or_init(|| {
        let mut v = vec![b"vkGetMemoryHostPointerPropertiesEXT".to_vec()];
        let mut note = |n: &CStr| {
            v.push(n.to_bytes().to_vec());
            std::ptr::null()
        };
        ash::InstanceFnV1_3::load(&mut note);
        ash::DeviceFnV1_3::load(&mut note);
        v
    })
    .iter()
    .any(|h| h == name)
}

/// Allocations backed by a double mapping in jetson mode: memory handle → views.
fn doubles() -> &'static Mutex<HashMap<u64, DoubleMap>> {
    static M: OnceLock<Mutex<HashMap<u64, DoubleMap>>> = OnceLock::new();
    M.get_or_init(Default::default)
}

/// Which calls an injected fault matches.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Filter {
    Any,
    /// vkAllocateMemory with `VkImportMemoryHostPointerInfoEXT` in its pNext chain.
    Import,
    /// vkAllocateMemory without it.
    Plain,
    /// vkMapMemory / vkBindBufferMemory on an allocation other than the newest one, or on one a
    /// buffer is already bound into. The samples map and bind their own buffers' memory right
    /// after allocating it; echo's own maps (enforce: the device allocation a staging map is
    /// redirected into) and redirected binds target a device allocation whose buffer is bound
    /// (and, when echo leaves the staging allocation unmade, may be the newest the driver saw).
    Older,
}

#[derive(Debug)]
struct Fault {
    command: &'static str,
    filter: Filter,
    /// First matching call (1-based) that fails.
    first: u64,
    /// Whether every later matching call fails too.
    onward: bool,
    seen: std::sync::atomic::AtomicU64,
}

const FAULT_COMMANDS: [&str; 5] = [
    "vkAllocateMemory",
    "vkBindBufferMemory",
    "vkBindBufferMemory2",
    "vkMapMemory",
    "vkCreateBuffer",
];

/// Parses `VK_ECHO_TEST_FAIL`; an entry it cannot read is reported on stderr and skipped.
fn parse_faults(spec: &str) -> Vec<Fault> {
    let mut out = Vec::new();
    for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let parsed = (|| {
            let (what, when) = entry.split_once('@')?;
            let (name, filter) = match what.split_once(':') {
                Some((n, "import")) => (n, Filter::Import),
                Some((n, "plain")) => (n, Filter::Plain),
                Some((n, "older")) => (n, Filter::Older),
                Some(_) => return None,
                None => (what, Filter::Any),
            };
            let name = name.strip_suffix("KHR").unwrap_or(name);
            let command = *FAULT_COMMANDS.iter().find(|c| **c == name)?;
            let (first, onward) = match when {
                "*" => (1, true),
                w => match w.strip_suffix('+') {
                    Some(n) => (n.parse().ok()?, true),
                    None => (w.parse().ok()?, false),
                },
            };
            (first >= 1).then_some(Fault {
                command,
                filter,
                first,
                onward,
                seen: Default::default(),
            })
        })();
        match parsed {
            Some(f) => out.push(f),
            None => eprintln!(
                "[VK_LAYER_ECHO_test_discrete] VK_ECHO_TEST_FAIL: cannot read '{entry}', ignored"
            ),
        }
    }
    out
}

fn faults() -> &'static [Fault] {
    static F: OnceLock<Vec<Fault>> = OnceLock::new();
    F.get_or_init(|| parse_faults(&std::env::var("VK_ECHO_TEST_FAIL").unwrap_or_default()))
}

/// The newest allocation any device made (for the `older` filter).
static NEWEST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Allocations a buffer has been bound into (for the `older` filter).
fn bound() -> &'static Mutex<std::collections::HashSet<u64>> {
    static B: OnceLock<Mutex<std::collections::HashSet<u64>>> = OnceLock::new();
    B.get_or_init(Default::default)
}

fn older(memory: vk::DeviceMemory) -> bool {
    memory.as_raw() != NEWEST.load(std::sync::atomic::Ordering::Relaxed)
        || bound().lock().unwrap().contains(&memory.as_raw())
}

/// Whether this call of `command` is one to fail (`import`: it imports host memory, or for
/// map/bind: the memory is not the newest allocation); counts it in every matching entry and
/// logs an injected fault.
fn inject(command: &str, import: bool, result: vk::Result) -> Option<vk::Result> {
    let mut fail = false;
    for f in faults().iter().filter(|f| f.command == command) {
        let matches = match f.filter {
            Filter::Any => true,
            Filter::Import => import,
            Filter::Plain => !import,
            Filter::Older => import,
        };
        if !matches {
            continue;
        }
        let n = f.seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if n == f.first || (f.onward && n > f.first) {
            fail = true;
            eprintln!(
                "[VK_LAYER_ECHO_test_discrete] injected {result:?} into {command} call {n}{}",
                match (import, command) {
                    (false, _) => "",
                    (true, "vkAllocateMemory") => " (host-pointer import)",
                    (true, _) => " (not the newest allocation)",
                }
            );
        }
    }
    fail.then_some(result)
}

/// The byte every new host-visible allocation is filled with (`VK_ECHO_TEST_POISON`), if any.
fn poison() -> Option<u8> {
    static P: OnceLock<Option<u8>> = OnceLock::new();
    *P.get_or_init(|| {
        let v = std::env::var("VK_ECHO_TEST_POISON").ok()?;
        match v.trim() {
            "" | "0" => None,
            "1" => Some(0xA5),
            x => u8::from_str_radix(x.trim_start_matches("0x"), 16).ok(),
        }
    })
}

struct Instance {
    handle: vk::Instance,
    gipa: vk::PFN_vkGetInstanceProcAddr,
    fp: ash::InstanceFnV1_0,
    props2: Option<vk::PFN_vkGetPhysicalDeviceProperties2>,
    mem2: Option<vk::PFN_vkGetPhysicalDeviceMemoryProperties2>,
}

/// What one device allocated at the driver (issue 14).
#[derive(Default)]
struct MemCount {
    allocations: u64,
    allocated_bytes: u64,
    live_bytes: u64,
    peak_live_bytes: u64,
    unknown_handles: u64,
    /// Live allocations: handle → size.
    live: HashMap<u64, u64>,
}

struct Device {
    gdpa: vk::PFN_vkGetDeviceProcAddr,
    mem: Mutex<MemCount>,
    fp: ash::DeviceFnV1_0,
    /// The driver's memory type every fake type maps to.
    real_type: u32,
    /// The driver's host-visible memory types, as bits.
    host_visible: u32,
    bind2: Option<vk::PFN_vkBindBufferMemory2>,
    bind2_khr: Option<vk::PFN_vkBindBufferMemory2>,
    buf_req2: Option<vk::PFN_vkGetBufferMemoryRequirements2>,
    buf_req2_khr: Option<vk::PFN_vkGetBufferMemoryRequirements2>,
    img_req2: Option<vk::PFN_vkGetImageMemoryRequirements2>,
    img_req2_khr: Option<vk::PFN_vkGetImageMemoryRequirements2>,
    host_ptr_props: Option<vk::PFN_vkGetMemoryHostPointerPropertiesEXT>,
    /// Jetson mode: host-visible allocations are double-mapped (the layer enabled
    /// `VK_EXT_external_memory_host` for itself), with this import alignment.
    double_map: bool,
    import_align: u64,
}

fn instances() -> &'static Mutex<HashMap<usize, &'static Instance>> {
    static M: OnceLock<Mutex<HashMap<usize, &'static Instance>>> = OnceLock::new();
    M.get_or_init(Default::default)
}
fn devices() -> &'static Mutex<HashMap<usize, &'static Device>> {
    static M: OnceLock<Mutex<HashMap<usize, &'static Device>>> = OnceLock::new();
    M.get_or_init(Default::default)
}

unsafe fn key(raw: u64) -> usize {
    *(raw as usize as *const usize)
}
unsafe fn inst<H: vk::Handle>(h: H) -> Option<&'static Instance> {
    instances().lock().ok()?.get(&key(h.as_raw())).copied()
}
unsafe fn dev<H: vk::Handle>(h: H) -> Option<&'static Device> {
    devices().lock().ok()?.get(&key(h.as_raw())).copied()
}
unsafe fn typed<F: Copy>(f: unsafe extern "system" fn()) -> F {
    std::mem::transmute_copy(&f)
}
fn void(f: *const ()) -> unsafe extern "system" fn() {
    unsafe { std::mem::transmute::<*const (), unsafe extern "system" fn()>(f) }
}

#[no_mangle]
pub unsafe extern "system" fn vkNegotiateLoaderLayerInterfaceVersion(
    p: *mut VkNegotiateLayerInterface,
) -> vk::Result {
    if p.is_null() {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    let v = &mut *p;
    v.loaderLayerInterfaceVersion = v.loaderLayerInterfaceVersion.min(2);
    v.pfnGetInstanceProcAddr = Some(vkGetInstanceProcAddr);
    v.pfnGetDeviceProcAddr = Some(vkGetDeviceProcAddr);
    v.pfnGetPhysicalDeviceProcAddr = None;
    vk::Result::SUCCESS
}

#[no_mangle]
pub unsafe extern "system" fn vkGetInstanceProcAddr(
    instance: vk::Instance,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    let n = CStr::from_ptr(name).to_bytes();
    if hidden(n) {
        return None;
    }
    let f: *const () = match n {
        b"vkGetInstanceProcAddr" => vkGetInstanceProcAddr as *const (),
        b"vkCreateInstance" => create_instance as *const (),
        b"vkDestroyInstance" => destroy_instance as *const (),
        b"vkGetPhysicalDeviceProperties" => get_properties as *const (),
        b"vkGetPhysicalDeviceProperties2" | b"vkGetPhysicalDeviceProperties2KHR" => {
            get_properties2 as *const ()
        }
        b"vkGetPhysicalDeviceMemoryProperties" => get_memory_properties as *const (),
        b"vkGetPhysicalDeviceMemoryProperties2" | b"vkGetPhysicalDeviceMemoryProperties2KHR" => {
            get_memory_properties2 as *const ()
        }
        b"vkCreateDevice" => create_device as *const (),
        b"vkEnumerateDeviceExtensionProperties" => {
            enumerate_device_extension_properties as *const ()
        }
        _ => {
            if let Some(f) = device_hook(n) {
                return Some(f);
            }
            return match inst(instance) {
                Some(i) if instance != vk::Instance::null() => (i.gipa)(instance, name),
                _ => None,
            };
        }
    };
    Some(void(f))
}

fn device_hook(n: &[u8]) -> vk::PFN_vkVoidFunction {
    let f: *const () = match n {
        b"vkGetDeviceProcAddr" => vkGetDeviceProcAddr as *const (),
        b"vkDestroyDevice" => destroy_device as *const (),
        b"vkAllocateMemory" => allocate_memory as *const (),
        b"vkBindBufferMemory" => bind_buffer_memory as *const (),
        b"vkBindBufferMemory2" => bind_buffer_memory2 as *const (),
        b"vkBindBufferMemory2KHR" => bind_buffer_memory2_khr as *const (),
        b"vkMapMemory" => map_memory as *const (),
        b"vkFreeMemory" => free_memory as *const (),
        b"vkUnmapMemory" => unmap_memory as *const (),
        b"vkFlushMappedMemoryRanges" => flush_ranges as *const (),
        b"vkInvalidateMappedMemoryRanges" => invalidate_ranges as *const (),
        b"vkBindImageMemory" => bind_image_memory as *const (),
        b"vkCreateBuffer" => create_buffer as *const (),
        b"vkGetBufferMemoryRequirements" => buffer_requirements as *const (),
        b"vkGetBufferMemoryRequirements2" => buffer_requirements2 as *const (),
        b"vkGetBufferMemoryRequirements2KHR" => buffer_requirements2_khr as *const (),
        b"vkGetImageMemoryRequirements" => image_requirements as *const (),
        b"vkGetImageMemoryRequirements2" => image_requirements2 as *const (),
        b"vkGetImageMemoryRequirements2KHR" => image_requirements2_khr as *const (),
        b"vkGetMemoryHostPointerPropertiesEXT" => host_pointer_properties as *const (),
        _ => return None,
    };
    Some(void(f))
}

#[no_mangle]
pub unsafe extern "system" fn vkGetDeviceProcAddr(
    device: vk::Device,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    let d = dev(device)?;
    if hidden(CStr::from_ptr(name).to_bytes()) {
        return None;
    }
    let next = (d.gdpa)(device, name);
    next?;
    device_hook(CStr::from_ptr(name).to_bytes()).or(next)
}

#[no_mangle]
pub unsafe extern "system" fn vkEnumerateInstanceLayerProperties(
    count: *mut u32,
    props: *mut vk::LayerProperties,
) -> vk::Result {
    if props.is_null() {
        *count = 1;
        return vk::Result::SUCCESS;
    }
    if *count == 0 {
        return vk::Result::INCOMPLETE;
    }
    let mut p = vk::LayerProperties {
        spec_version: vk::make_api_version(0, 1, 3, 239),
        implementation_version: 1,
        ..Default::default()
    };
    for (d, b) in p.layer_name.iter_mut().zip(LAYER_NAME.to_bytes()) {
        *d = *b as c_char;
    }
    *props = p;
    *count = 1;
    vk::Result::SUCCESS
}

#[no_mangle]
pub unsafe extern "system" fn vkEnumerateInstanceExtensionProperties(
    _layer: *const c_char,
    count: *mut u32,
    _props: *mut vk::ExtensionProperties,
) -> vk::Result {
    *count = 0;
    vk::Result::SUCCESS
}

unsafe extern "system" fn enumerate_device_extension_properties(
    pd: vk::PhysicalDevice,
    layer: *const c_char,
    count: *mut u32,
    props: *mut vk::ExtensionProperties,
) -> vk::Result {
    if !layer.is_null() && CStr::from_ptr(layer) == LAYER_NAME {
        *count = 0;
        return vk::Result::SUCCESS;
    }
    let Some(i) = inst(pd) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if !jetson() {
        return (i.fp.enumerate_device_extension_properties)(pd, layer, count, props);
    }
    // A Vulkan 1.2 driver without VK_EXT_external_memory_host.
    let all = match device_extensions(i, pd, layer) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let shown: Vec<_> = all
        .into_iter()
        .filter(|e| e.extension_name_as_c_str() != Ok(EXT_MEMORY_HOST))
        .collect();
    if props.is_null() {
        *count = shown.len() as u32;
        return vk::Result::SUCCESS;
    }
    let n = (*count as usize).min(shown.len());
    std::ptr::copy_nonoverlapping(shown.as_ptr(), props, n);
    *count = n as u32;
    if n < shown.len() {
        vk::Result::INCOMPLETE
    } else {
        vk::Result::SUCCESS
    }
}

/// Every device extension the layers below offer.
unsafe fn device_extensions(
    i: &Instance,
    pd: vk::PhysicalDevice,
    layer: *const c_char,
) -> Result<Vec<vk::ExtensionProperties>, vk::Result> {
    loop {
        let mut n = 0u32;
        let r =
            (i.fp.enumerate_device_extension_properties)(pd, layer, &mut n, std::ptr::null_mut());
        if r != vk::Result::SUCCESS {
            return Err(r);
        }
        let mut v = vec![vk::ExtensionProperties::default(); n as usize];
        let r = (i.fp.enumerate_device_extension_properties)(pd, layer, &mut n, v.as_mut_ptr());
        match r {
            vk::Result::SUCCESS => {
                v.truncate(n as usize);
                return Ok(v);
            }
            vk::Result::INCOMPLETE => continue,
            e => return Err(e),
        }
    }
}

unsafe extern "system" fn create_instance(
    info: *const vk::InstanceCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Instance,
) -> vk::Result {
    let mut p = (*info).p_next as *mut VkLayerInstanceCreateInfo;
    while !p.is_null()
        && !((*p).sType == vk::StructureType::LOADER_INSTANCE_CREATE_INFO
            && (*p).function == VkLayerFunction::VK_LAYER_LINK_INFO)
    {
        p = (*p).pNext as *mut VkLayerInstanceCreateInfo;
    }
    if p.is_null() {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    let link = *(*p).u.pLayerInfo.as_ref();
    let Some(gipa) = (*link).pfnNextGetInstanceProcAddr else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    *(*p).u.pLayerInfo.as_mut() = (*link).pNext;
    let Some(create) = gipa(vk::Instance::null(), c"vkCreateInstance".as_ptr()) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let r = typed::<vk::PFN_vkCreateInstance>(create)(info, alloc, out);
    if r != vk::Result::SUCCESS {
        return r;
    }
    let handle = *out;
    let fp = ash::InstanceFnV1_0::load(|n| {
        gipa(handle, n.as_ptr()).map_or(std::ptr::null(), |f| f as *const c_void)
    });
    // A 1.0 instance may call only the KHR names (VK_KHR_get_physical_device_properties2, which
    // the application or a layer above enabled); calling the core name there is
    // UNASSIGNED-API-Version-Violation. From 1.1 on, the core name.
    let api = (*info)
        .p_application_info
        .as_ref()
        .map_or(vk::API_VERSION_1_0, |a| a.api_version);
    let get = |core: &CStr, khr: &CStr| {
        let (a, b) = if api >= vk::API_VERSION_1_1 {
            (core, khr)
        } else {
            (khr, core)
        };
        gipa(handle, a.as_ptr()).or_else(|| gipa(handle, b.as_ptr()))
    };
    let data = Box::leak(Box::new(Instance {
        handle,
        gipa,
        fp,
        props2: get(
            c"vkGetPhysicalDeviceProperties2",
            c"vkGetPhysicalDeviceProperties2KHR",
        )
        .map(|f| typed(f)),
        mem2: get(
            c"vkGetPhysicalDeviceMemoryProperties2",
            c"vkGetPhysicalDeviceMemoryProperties2KHR",
        )
        .map(|f| typed(f)),
    }));
    instances()
        .lock()
        .unwrap()
        .insert(key(handle.as_raw()), data);
    r
}

unsafe extern "system" fn destroy_instance(
    instance: vk::Instance,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    let i = instances().lock().unwrap().remove(&key(instance.as_raw()));
    if let Some(i) = i {
        (i.fp.destroy_instance)(instance, alloc);
    }
}

/// `VK_ECHO_TEST_DRIVER_VERSION=N`: the `driverVersion` presented (any mode; issue 27).
fn driver_version() -> Option<u32> {
    static V: OnceLock<Option<u32>> = OnceLock::new();
    *V.get_or_init(|| {
        let v = std::env::var("VK_ECHO_TEST_DRIVER_VERSION").ok()?;
        v.parse()
            .ok()
            .or_else(|| u32::from_str_radix(v.trim_start_matches("0x"), 16).ok())
    })
}

/// `VK_ECHO_TEST_UUID=<32 hex digits>`: the `deviceUUID` presented (any mode; issue 27: two
/// boards of one model).
fn device_uuid() -> Option<[u8; vk::UUID_SIZE]> {
    static U: OnceLock<Option<[u8; vk::UUID_SIZE]>> = OnceLock::new();
    *U.get_or_init(|| {
        let v = std::env::var("VK_ECHO_TEST_UUID").ok()?;
        let mut out = [0u8; vk::UUID_SIZE];
        if v.len() != 2 * vk::UUID_SIZE {
            eprintln!(
                "[VK_LAYER_ECHO_test_discrete] VK_ECHO_TEST_UUID: not 32 hex digits, ignored"
            );
            return None;
        }
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(v.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(out)
    })
}

fn make_discrete(p: &mut vk::PhysicalDeviceProperties) {
    if let Some(v) = driver_version() {
        p.driver_version = v;
    }
    if real() {
        return;
    }
    if jetson() {
        let Some(t) = table() else { return };
        p.device_type = t.device_type;
        // A Vulkan 1.2 driver (the patch level stays the driver's).
        p.api_version = vk::make_api_version(0, 1, 2, vk::api_version_patch(p.api_version));
        let real_name = unsafe { CStr::from_ptr(p.device_name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let name = format!("{} (emulated on {real_name})", t.name);
        let bytes = name.as_bytes();
        let n = bytes.len().min(p.device_name.len() - 1);
        for (d, b) in p.device_name.iter_mut().zip(&bytes[..n]) {
            *d = *b as c_char;
        }
        p.device_name[n] = 0;
        return;
    }
    p.device_type = if apu() {
        vk::PhysicalDeviceType::INTEGRATED_GPU
    } else {
        vk::PhysicalDeviceType::DISCRETE_GPU
    };
}

unsafe extern "system" fn get_properties(
    pd: vk::PhysicalDevice,
    out: *mut vk::PhysicalDeviceProperties,
) {
    if let Some(i) = inst(pd) {
        (i.fp.get_physical_device_properties)(pd, out);
        make_discrete(&mut *out);
    }
}

unsafe extern "system" fn get_properties2(
    pd: vk::PhysicalDevice,
    out: *mut vk::PhysicalDeviceProperties2<'_>,
) {
    if let Some(i) = inst(pd) {
        match i.props2 {
            Some(f) => f(pd, out),
            None => (i.fp.get_physical_device_properties)(pd, &mut (*out).properties),
        }
        make_discrete(&mut (*out).properties);
        if let Some(uuid) = device_uuid() {
            // SAFETY: the application's chain of output structures, each starting with sType/pNext.
            let mut next = (*out).p_next as *mut vk::BaseOutStructure<'_>;
            while !next.is_null() {
                if (*next).s_type == vk::StructureType::PHYSICAL_DEVICE_ID_PROPERTIES {
                    (*(next as *mut vk::PhysicalDeviceIDProperties<'_>)).device_uuid = uuid;
                }
                next = (*next).p_next;
            }
        }
    }
}

/// The real table → the fake discrete one.
fn make_table(m: &mut vk::PhysicalDeviceMemoryProperties) {
    if real() {
        return;
    }
    if jetson() {
        let Some(t) = table() else { return };
        *m = vk::PhysicalDeviceMemoryProperties::default();
        m.memory_heap_count = t.heaps.len() as u32;
        m.memory_heaps[..t.heaps.len()].copy_from_slice(&t.heaps);
        m.memory_type_count = t.types.len() as u32;
        m.memory_types[..t.types.len()].copy_from_slice(&t.types);
        return;
    }
    let total = m.memory_heaps[0].size;
    m.memory_heap_count = 2;
    m.memory_heaps[0] = vk::MemoryHeap {
        size: total,
        flags: vk::MemoryHeapFlags::DEVICE_LOCAL,
    };
    m.memory_heaps[1] = vk::MemoryHeap {
        size: total,
        flags: vk::MemoryHeapFlags::empty(),
    };
    m.memory_type_count = FAKE_TYPES.len() as u32;
    let types = if apu() { &APU_TYPES } else { &FAKE_TYPES };
    for (i, (heap, flags)) in types.iter().enumerate() {
        m.memory_types[i] = vk::MemoryType {
            property_flags: *flags,
            heap_index: *heap,
        };
    }
}

unsafe extern "system" fn get_memory_properties(
    pd: vk::PhysicalDevice,
    out: *mut vk::PhysicalDeviceMemoryProperties,
) {
    if let Some(i) = inst(pd) {
        (i.fp.get_physical_device_memory_properties)(pd, out);
        make_table(&mut *out);
    }
}

unsafe extern "system" fn get_memory_properties2(
    pd: vk::PhysicalDevice,
    out: *mut vk::PhysicalDeviceMemoryProperties2<'_>,
) {
    if let Some(i) = inst(pd) {
        match i.mem2 {
            Some(f) => f(pd, out),
            None => (i.fp.get_physical_device_memory_properties)(pd, &mut (*out).memory_properties),
        }
        make_table(&mut (*out).memory_properties);
    }
}

unsafe extern "system" fn create_device(
    pd: vk::PhysicalDevice,
    info: *const vk::DeviceCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Device,
) -> vk::Result {
    let Some(i) = inst(pd) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let mut p = (*info).p_next as *mut VkLayerDeviceCreateInfo;
    while !p.is_null()
        && !((*p).sType == vk::StructureType::LOADER_DEVICE_CREATE_INFO
            && (*p).function == VkLayerFunction::VK_LAYER_LINK_INFO)
    {
        p = (*p).pNext as *mut VkLayerDeviceCreateInfo;
    }
    if p.is_null() {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    let link = (*p).u.pLayerInfo;
    let (Some(gipa), Some(gdpa)) = (
        (*link).pfnNextGetInstanceProcAddr,
        (*link).pfnNextGetDeviceProcAddr,
    ) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // Jetson mode: the application cannot have VK_EXT_external_memory_host; the layer enables it
    // (and what it needs on a 1.0 device) for its own double mapping when the driver has it.
    let asked: Vec<*const c_char> = if (*info).enabled_extension_count == 0 {
        Vec::new()
    } else {
        std::slice::from_raw_parts(
            (*info).pp_enabled_extension_names,
            (*info).enabled_extension_count as usize,
        )
        .to_vec()
    };
    let has = |v: &[*const c_char], e: &CStr| v.iter().any(|n| CStr::from_ptr(*n) == e);
    let mut names = asked.clone();
    let mut double_map = false;
    if jetson() && table().is_some() {
        if has(&asked, EXT_MEMORY_HOST) {
            return vk::Result::ERROR_EXTENSION_NOT_PRESENT;
        }
        let offered = device_extensions(i, pd, std::ptr::null()).unwrap_or_default();
        let offers = |e: &CStr| offered.iter().any(|x| x.extension_name_as_c_str() == Ok(e));
        let own_tables = std::env::var("VK_ECHO_TEST_JETSON_MAP").map_or(true, |v| v != "driver");
        if !own_tables {
            eprintln!("[VK_LAYER_ECHO_test_discrete] jetson: VK_ECHO_TEST_JETSON_MAP=driver: mappings are the driver's own mapping");
        } else if offers(EXT_MEMORY_HOST) && offers(EXT_EXTERNAL_MEMORY) {
            names.push(EXT_MEMORY_HOST.as_ptr());
            if !has(&asked, EXT_EXTERNAL_MEMORY) {
                names.push(EXT_EXTERNAL_MEMORY.as_ptr());
            }
            double_map = true;
        } else {
            eprintln!("[VK_LAYER_ECHO_test_discrete] jetson: the driver has no VK_EXT_external_memory_host; mappings are the driver's own mapping");
        }
    }
    let mut own_info = *info;
    own_info.enabled_extension_count = names.len() as u32;
    own_info.pp_enabled_extension_names = names.as_ptr();
    (*p).u.pLayerInfo = (*link).pNext;
    let Some(create) = gipa(i.handle, c"vkCreateDevice".as_ptr()) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let r = typed::<vk::PFN_vkCreateDevice>(create)(pd, &own_info, alloc, out);
    if r != vk::Result::SUCCESS {
        return r;
    }
    let import_align = if double_map {
        let mut host = vk::PhysicalDeviceExternalMemoryHostPropertiesEXT::default();
        let mut p2 = vk::PhysicalDeviceProperties2 {
            p_next: &mut host as *mut _ as *mut c_void,
            ..Default::default()
        };
        if let Some(f) = i.props2 {
            f(pd, &mut p2);
        }
        host.min_imported_host_pointer_alignment
    } else {
        0
    };
    let device = *out;
    // The real table: the first host-visible type takes every fake type's allocations.
    let mut mem = vk::PhysicalDeviceMemoryProperties::default();
    (i.fp.get_physical_device_memory_properties)(pd, &mut mem);
    let real_type = mem
        .memory_types_as_slice()
        .iter()
        .position(|t| {
            t.property_flags
                .contains(vk::MemoryPropertyFlags::HOST_VISIBLE)
        })
        .unwrap_or(0) as u32;
    let fp = ash::DeviceFnV1_0::load(|n| {
        gdpa(device, n.as_ptr()).map_or(std::ptr::null(), |f| f as *const c_void)
    });
    unsafe fn get<F: Copy>(
        gdpa: vk::PFN_vkGetDeviceProcAddr,
        device: vk::Device,
        n: &CStr,
    ) -> Option<F> {
        gdpa(device, n.as_ptr()).map(|f| typed(f))
    }
    let d = Box::leak(Box::new(Device {
        gdpa,
        mem: Mutex::new(MemCount::default()),
        fp,
        real_type,
        host_visible: mem
            .memory_types_as_slice()
            .iter()
            .enumerate()
            .filter(|(_, t)| {
                t.property_flags
                    .contains(vk::MemoryPropertyFlags::HOST_VISIBLE)
            })
            .fold(0, |bits, (i, _)| bits | 1 << i),
        bind2: get(gdpa, device, c"vkBindBufferMemory2"),
        bind2_khr: get(gdpa, device, c"vkBindBufferMemory2KHR"),
        buf_req2: get(gdpa, device, c"vkGetBufferMemoryRequirements2"),
        buf_req2_khr: get(gdpa, device, c"vkGetBufferMemoryRequirements2KHR"),
        img_req2: get(gdpa, device, c"vkGetImageMemoryRequirements2"),
        img_req2_khr: get(gdpa, device, c"vkGetImageMemoryRequirements2KHR"),
        host_ptr_props: get(gdpa, device, c"vkGetMemoryHostPointerPropertiesEXT"),
        double_map: false,
        import_align,
    }));
    d.double_map = double_map && import_align.is_power_of_two() && d.host_ptr_props.is_some();
    if double_map && !d.double_map {
        eprintln!("[VK_LAYER_ECHO_test_discrete] jetson: cannot import host memory (alignment {import_align}); mappings are the driver's own mapping");
    }
    devices().lock().unwrap().insert(key(device.as_raw()), d);
    r
}

unsafe extern "system" fn destroy_device(
    device: vk::Device,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    let d = devices().lock().unwrap().remove(&key(device.as_raw()));
    if let Some(d) = d {
        write_memlog(d);
        (d.fp.destroy_device)(device, alloc);
    }
}

/// `VK_ECHO_TEST_MEMLOG`: one JSON line for this device.
fn write_memlog(d: &Device) {
    let Ok(path) = std::env::var("VK_ECHO_TEST_MEMLOG") else {
        return;
    };
    let m = d.mem.lock().unwrap();
    let line = format!(
        "{{\"allocations\":{},\"allocated_bytes\":{},\"peak_live_bytes\":{},\"live_bytes\":{},\"unknown_handles\":{}}}\n",
        m.allocations, m.allocated_bytes, m.peak_live_bytes, m.live_bytes, m.unknown_handles
    );
    use std::io::Write;
    let r = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = r {
        eprintln!("[VK_LAYER_ECHO_test_discrete] cannot write {path}: {e}");
    }
}

/// Whether `memory` is a live allocation of this device; counts and reports one that is not.
fn known(d: &Device, memory: vk::DeviceMemory, command: &str) -> bool {
    let mut m = d.mem.lock().unwrap();
    if memory == vk::DeviceMemory::null() || m.live.contains_key(&memory.as_raw()) {
        return true;
    }
    m.unknown_handles += 1;
    eprintln!(
        "[VK_LAYER_ECHO_test_discrete] unknown memory {:#x} handed to {command}: not an allocation of the driver",
        memory.as_raw()
    );
    false
}

unsafe extern "system" fn free_memory(
    device: vk::Device,
    memory: vk::DeviceMemory,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    let Some(d) = dev(device) else { return };
    if !known(d, memory, "vkFreeMemory") {
        return;
    }
    {
        let mut m = d.mem.lock().unwrap();
        if let Some(size) = m.live.remove(&memory.as_raw()) {
            m.live_bytes -= size;
        }
        bound().lock().unwrap().remove(&memory.as_raw());
    }
    (d.fp.free_memory)(device, memory, alloc);
    // A Jetson-table double mapping is unmapped only after the driver let go of the memory.
    let m = doubles().lock().unwrap().remove(&memory.as_raw());
    drop(m);
}

unsafe extern "system" fn unmap_memory(device: vk::Device, memory: vk::DeviceMemory) {
    let Some(d) = dev(device) else { return };
    if !known(d, memory, "vkUnmapMemory") {
        return;
    }
    if doubles().lock().unwrap().contains_key(&memory.as_raw()) {
        return; // view B stays until the memory is freed
    }
    (d.fp.unmap_memory)(device, memory)
}

macro_rules! ranges {
    ($name:ident, $field:ident, $cmd:literal) => {
        unsafe extern "system" fn $name(
            device: vk::Device,
            count: u32,
            ranges: *const vk::MappedMemoryRange<'_>,
        ) -> vk::Result {
            let Some(d) = dev(device) else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            if count > 0 && !ranges.is_null() {
                for r in std::slice::from_raw_parts(ranges, count as usize) {
                    if !known(d, r.memory, $cmd) {
                        return vk::Result::ERROR_OUT_OF_HOST_MEMORY;
                    }
                }
            }
            (d.fp.$field)(device, count, ranges)
        }
    };
}
ranges!(
    flush_ranges,
    flush_mapped_memory_ranges,
    "vkFlushMappedMemoryRanges"
);
ranges!(
    invalidate_ranges,
    invalidate_mapped_memory_ranges,
    "vkInvalidateMappedMemoryRanges"
);

unsafe extern "system" fn bind_image_memory(
    device: vk::Device,
    image: vk::Image,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
) -> vk::Result {
    let Some(d) = dev(device) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if !known(d, memory, "vkBindImageMemory") {
        return vk::Result::ERROR_OUT_OF_DEVICE_MEMORY;
    }
    (d.fp.bind_image_memory)(device, image, memory, offset)
}

/// Whether an allocation imports host memory (`VkImportMemoryHostPointerInfoEXT`).
unsafe fn imports_host_pointer(info: &vk::MemoryAllocateInfo<'_>) -> bool {
    let mut p = info.p_next as *const vk::BaseInStructure<'_>;
    while !p.is_null() {
        if (*p).s_type == vk::StructureType::IMPORT_MEMORY_HOST_POINTER_INFO_EXT {
            return true;
        }
        p = (*p).p_next;
    }
    false
}

/// An allocation that reached the driver: counted, and live until `vkFreeMemory`.
fn count_allocation(d: &Device, memory: vk::DeviceMemory, size: vk::DeviceSize) {
    let mut m = d.mem.lock().unwrap();
    m.allocations += 1;
    m.allocated_bytes += size;
    m.live_bytes += size;
    m.peak_live_bytes = m.peak_live_bytes.max(m.live_bytes);
    m.live.insert(memory.as_raw(), size);
}

unsafe extern "system" fn allocate_memory(
    device: vk::Device,
    info: *const vk::MemoryAllocateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::DeviceMemory,
) -> vk::Result {
    let Some(d) = dev(device) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if let Some(r) = inject(
        "vkAllocateMemory",
        imports_host_pointer(&*info),
        vk::Result::ERROR_OUT_OF_DEVICE_MEMORY,
    ) {
        return r;
    }
    let mut real_info = *info;
    if !real() {
        let presented = table().map_or(FAKE_TYPES.len(), |t| t.types.len());
        if (*info).memory_type_index >= presented as u32 {
            return vk::Result::ERROR_OUT_OF_DEVICE_MEMORY;
        }
        real_info.memory_type_index = d.real_type;
    }
    if d.double_map && table().is_some_and(|t| t.host_visible((*info).memory_type_index)) {
        if let Some(r) = allocate_double(d, device, &real_info, alloc, out) {
            if r == vk::Result::SUCCESS {
                NEWEST.store((*out).as_raw(), std::sync::atomic::Ordering::Relaxed);
                count_allocation(d, *out, real_info.allocation_size);
                if let Some(byte) = poison() {
                    if let Some(m) = doubles().lock().unwrap().get(&(*out).as_raw()) {
                        std::ptr::write_bytes(m.app_ptr(), byte, m.len());
                    }
                }
            }
            return r;
        }
    }
    let r = (d.fp.allocate_memory)(device, &real_info, alloc, out);
    if r == vk::Result::SUCCESS {
        NEWEST.store((*out).as_raw(), std::sync::atomic::Ordering::Relaxed);
        count_allocation(d, *out, real_info.allocation_size);
    }
    if r == vk::Result::SUCCESS && d.host_visible & (1 << real_info.memory_type_index) != 0 {
        if let Some(byte) = poison() {
            let mut p: *mut c_void = std::ptr::null_mut();
            let m = (d.fp.map_memory)(
                device,
                *out,
                0,
                vk::WHOLE_SIZE,
                vk::MemoryMapFlags::empty(),
                &mut p,
            );
            if m == vk::Result::SUCCESS && !p.is_null() {
                std::ptr::write_bytes(p as *mut u8, byte, real_info.allocation_size as usize);
                (d.fp.unmap_memory)(device, *out);
            } else {
                eprintln!("[VK_LAYER_ECHO_test_discrete] cannot map a new allocation to poison it ({m:?})");
            }
        }
    }
    r
}

/// Jetson mode: allocates `info` as an import of view A of a new double mapping (view B is what
/// `vkMapMemory` returns). `None` when it cannot (a chain it does not know, the mapping or the
/// import failed): the caller allocates as asked, and one line says so.
unsafe fn allocate_double(
    d: &Device,
    device: vk::Device,
    info: &vk::MemoryAllocateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::DeviceMemory,
) -> Option<vk::Result> {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let say = |why: String| {
        if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
            eprintln!("[VK_LAYER_ECHO_test_discrete] jetson: {why}; this allocation is mapped through the driver's own mapping");
        }
    };
    // Keep the allocate flags (device address), drop a dedication (an import may not carry
    // one); anything else (export, import, …) is left to the driver.
    let mut flags: Option<vk::MemoryAllocateFlagsInfo<'_>> = None;
    let mut p = info.p_next as *const vk::BaseInStructure<'_>;
    while !p.is_null() {
        match (*p).s_type {
            vk::StructureType::MEMORY_ALLOCATE_FLAGS_INFO => {
                let mut f = *(p as *const vk::MemoryAllocateFlagsInfo<'_>);
                f.p_next = std::ptr::null();
                flags = Some(f);
            }
            vk::StructureType::MEMORY_DEDICATED_ALLOCATE_INFO => {}
            other => {
                say(format!("an allocation chains {other:?}"));
                return None;
            }
        }
        p = (*p).p_next;
    }
    let m = match DoubleMap::new(info.allocation_size as usize, d.import_align as usize) {
        Ok(m) => m,
        Err(e) => {
            say(format!("no double mapping ({e})"));
            return None;
        }
    };
    let f = d.host_ptr_props?;
    let mut props = vk::MemoryHostPointerPropertiesEXT::default();
    let handle = vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT;
    let r = f(device, handle, m.driver_ptr() as *const c_void, &mut props);
    let bits = if r == vk::Result::SUCCESS {
        props.memory_type_bits
    } else {
        0
    };
    let type_index = if bits & (1 << info.memory_type_index) != 0 {
        info.memory_type_index
    } else if bits != 0 {
        bits.trailing_zeros()
    } else {
        say(format!(
            "vkGetMemoryHostPointerPropertiesEXT: {r:?}, types {bits:#x}"
        ));
        return None;
    };
    let import = vk::ImportMemoryHostPointerInfoEXT {
        p_next: flags
            .as_ref()
            .map_or(std::ptr::null(), |f| f as *const _ as *const c_void),
        handle_type: handle,
        p_host_pointer: m.driver_ptr() as *mut c_void,
        ..Default::default()
    };
    let ai = vk::MemoryAllocateInfo {
        p_next: &import as *const _ as *const c_void,
        allocation_size: m.len() as u64,
        memory_type_index: type_index,
        ..Default::default()
    };
    let r = (d.fp.allocate_memory)(device, &ai, alloc, out);
    if r != vk::Result::SUCCESS {
        say(format!("importing host memory failed ({r:?})"));
        return None;
    }
    doubles().lock().unwrap().insert((*out).as_raw(), m);
    Some(r)
}

unsafe extern "system" fn bind_buffer_memory(
    device: vk::Device,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
) -> vk::Result {
    let Some(d) = dev(device) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if let Some(r) = inject(
        "vkBindBufferMemory",
        older(memory),
        vk::Result::ERROR_OUT_OF_DEVICE_MEMORY,
    ) {
        return r;
    }
    if !known(d, memory, "vkBindBufferMemory") {
        return vk::Result::ERROR_OUT_OF_DEVICE_MEMORY;
    }
    let r = (d.fp.bind_buffer_memory)(device, buffer, memory, offset);
    if r == vk::Result::SUCCESS {
        bound().lock().unwrap().insert(memory.as_raw());
    }
    r
}

macro_rules! bind2 {
    ($name:ident, $field:ident) => {
        unsafe extern "system" fn $name(
            device: vk::Device,
            count: u32,
            infos: *const vk::BindBufferMemoryInfo<'_>,
        ) -> vk::Result {
            let Some(d) = dev(device) else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            let Some(f) = d.$field else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            let all = if count > 0 && !infos.is_null() {
                std::slice::from_raw_parts(infos, count as usize)
            } else {
                &[]
            };
            for i in all {
                if !known(d, i.memory, "vkBindBufferMemory2") {
                    return vk::Result::ERROR_OUT_OF_DEVICE_MEMORY;
                }
            }
            if let Some(r) = inject(
                "vkBindBufferMemory2",
                false,
                vk::Result::ERROR_OUT_OF_DEVICE_MEMORY,
            ) {
                return r;
            }
            let r = f(device, count, infos);
            if r == vk::Result::SUCCESS {
                let mut b = bound().lock().unwrap();
                b.extend(all.iter().map(|i| i.memory.as_raw()));
            }
            r
        }
    };
}
bind2!(bind_buffer_memory2, bind2);
bind2!(bind_buffer_memory2_khr, bind2_khr);

unsafe extern "system" fn map_memory(
    device: vk::Device,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
    size: vk::DeviceSize,
    flags: vk::MemoryMapFlags,
    data: *mut *mut c_void,
) -> vk::Result {
    let Some(d) = dev(device) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if let Some(r) = inject(
        "vkMapMemory",
        older(memory),
        vk::Result::ERROR_MEMORY_MAP_FAILED,
    ) {
        return r;
    }
    if !known(d, memory, "vkMapMemory") {
        return vk::Result::ERROR_MEMORY_MAP_FAILED;
    }
    if let Some(m) = doubles().lock().unwrap().get(&memory.as_raw()) {
        if offset as usize >= m.len() {
            return vk::Result::ERROR_MEMORY_MAP_FAILED;
        }
        *data = m.app_ptr().add(offset as usize) as *mut c_void;
        return vk::Result::SUCCESS;
    }
    (d.fp.map_memory)(device, memory, offset, size, flags, data)
}

unsafe extern "system" fn create_buffer(
    device: vk::Device,
    info: *const vk::BufferCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Buffer,
) -> vk::Result {
    let Some(d) = dev(device) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if let Some(r) = inject(
        "vkCreateBuffer",
        false,
        vk::Result::ERROR_OUT_OF_HOST_MEMORY,
    ) {
        return r;
    }
    if d.double_map {
        // Binding into imported host memory needs the handle type at creation.
        let mut p = (*info).p_next as *const vk::BaseInStructure<'_>;
        let mut has_external = false;
        while !p.is_null() {
            has_external |= (*p).s_type == vk::StructureType::EXTERNAL_MEMORY_BUFFER_CREATE_INFO;
            p = (*p).p_next;
        }
        if !has_external {
            let ext = vk::ExternalMemoryBufferCreateInfo {
                p_next: (*info).p_next,
                handle_types: vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT,
                ..Default::default()
            };
            let own = vk::BufferCreateInfo {
                p_next: &ext as *const _ as *const c_void,
                ..*info
            };
            return (d.fp.create_buffer)(device, &own, alloc, out);
        }
    }
    (d.fp.create_buffer)(device, info, alloc, out)
}

fn fake_bits(d: &Device, bits: u32) -> u32 {
    if real() {
        return bits;
    }
    if bits & (1 << d.real_type) != 0 {
        table().map_or(FAKE_BITS, Table::buffer_bits)
    } else {
        0
    }
}

/// Host-pointer import compatibility, in the presented table's type bits (like every other
/// `memoryTypeBits` this layer hands up), so echo's double mapping works under a fake table.
unsafe extern "system" fn host_pointer_properties(
    device: vk::Device,
    handle_type: vk::ExternalMemoryHandleTypeFlags,
    ptr: *const c_void,
    out: *mut vk::MemoryHostPointerPropertiesEXT<'_>,
) -> vk::Result {
    let Some(d) = dev(device) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(f) = d.host_ptr_props else {
        return vk::Result::ERROR_EXTENSION_NOT_PRESENT;
    };
    let r = f(device, handle_type, ptr, out);
    if r == vk::Result::SUCCESS {
        (*out).memory_type_bits = fake_bits(d, (*out).memory_type_bits);
    }
    r
}

unsafe extern "system" fn buffer_requirements(
    device: vk::Device,
    b: vk::Buffer,
    out: *mut vk::MemoryRequirements,
) {
    if let Some(d) = dev(device) {
        (d.fp.get_buffer_memory_requirements)(device, b, out);
        (*out).memory_type_bits = fake_bits(d, (*out).memory_type_bits);
    }
}

unsafe extern "system" fn image_requirements(
    device: vk::Device,
    i: vk::Image,
    out: *mut vk::MemoryRequirements,
) {
    if let Some(d) = dev(device) {
        (d.fp.get_image_memory_requirements)(device, i, out);
        (*out).memory_type_bits = fake_bits(d, (*out).memory_type_bits);
    }
}

macro_rules! req2 {
    ($name:ident, $info:ty, $field:ident) => {
        unsafe extern "system" fn $name(
            device: vk::Device,
            info: *const $info,
            out: *mut vk::MemoryRequirements2<'_>,
        ) {
            if let Some(d) = dev(device) {
                if let Some(f) = d.$field {
                    f(device, info, out);
                    let r = &mut (*out).memory_requirements;
                    r.memory_type_bits = fake_bits(d, r.memory_type_bits);
                }
            }
        }
    };
}
req2!(
    buffer_requirements2,
    vk::BufferMemoryRequirementsInfo2<'_>,
    buf_req2
);
req2!(
    buffer_requirements2_khr,
    vk::BufferMemoryRequirementsInfo2<'_>,
    buf_req2_khr
);
req2!(
    image_requirements2,
    vk::ImageMemoryRequirementsInfo2<'_>,
    img_req2
);
req2!(
    image_requirements2_khr,
    vk::ImageMemoryRequirementsInfo2<'_>,
    img_req2_khr
);
