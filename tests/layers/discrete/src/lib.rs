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
    *REAL.get_or_init(|| std::env::var("VK_ECHO_TEST_TABLE").is_ok_and(|v| v == "real"))
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
    match inst(pd) {
        Some(i) => (i.fp.enumerate_device_extension_properties)(pd, layer, count, props),
        None => vk::Result::ERROR_INITIALIZATION_FAILED,
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
    let get = |a: &CStr, b: &CStr| gipa(handle, a.as_ptr()).or_else(|| gipa(handle, b.as_ptr()));
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

fn make_discrete(p: &mut vk::PhysicalDeviceProperties) {
    if real() {
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
    }
}

/// The real table → the fake discrete one.
fn make_table(m: &mut vk::PhysicalDeviceMemoryProperties) {
    if real() {
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
    (*p).u.pLayerInfo = (*link).pNext;
    let Some(create) = gipa(i.handle, c"vkCreateDevice".as_ptr()) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let r = typed::<vk::PFN_vkCreateDevice>(create)(pd, info, alloc, out);
    if r != vk::Result::SUCCESS {
        return r;
    }
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
    }));
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
    (d.fp.free_memory)(device, memory, alloc)
}

unsafe extern "system" fn unmap_memory(device: vk::Device, memory: vk::DeviceMemory) {
    let Some(d) = dev(device) else { return };
    if known(d, memory, "vkUnmapMemory") {
        (d.fp.unmap_memory)(device, memory)
    }
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
        if (*info).memory_type_index >= FAKE_TYPES.len() as u32 {
            return vk::Result::ERROR_OUT_OF_DEVICE_MEMORY;
        }
        real_info.memory_type_index = d.real_type;
    }
    let r = (d.fp.allocate_memory)(device, &real_info, alloc, out);
    if r == vk::Result::SUCCESS {
        NEWEST.store((*out).as_raw(), std::sync::atomic::Ordering::Relaxed);
        let size = real_info.allocation_size;
        let mut m = d.mem.lock().unwrap();
        m.allocations += 1;
        m.allocated_bytes += size;
        m.live_bytes += size;
        m.peak_live_bytes = m.peak_live_bytes.max(m.live_bytes);
        m.live.insert((*out).as_raw(), size);
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
    (d.fp.create_buffer)(device, info, alloc, out)
}

fn fake_bits(d: &Device, bits: u32) -> u32 {
    if real() {
        return bits;
    }
    if bits & (1 << d.real_type) != 0 {
        FAKE_BITS
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
