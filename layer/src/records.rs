//! A device and an instance as profile and enforce see them (issue 32, item 4): the next
//! layer's commands, the settings, the topology decision, the per-handle state. Imports point
//! one way: hooks (and `dispatch.rs`, their table) → coordinator → profile and enforce → this
//! file (`records.rs`) → state → `handles.rs`. Nothing here names a mode or a hook.

pub use crate::handles::*;
use crate::log;
use crate::state::DeviceState;
use ash::vk;
use echo_analyzer::settings::{Mode, Settings};
use echo_analyzer::topology::{MemoryTable, Topology};
use std::collections::HashSet;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[allow(dead_code)] // fields read by profile and enforce mode
pub struct InstanceData {
    pub handle: vk::Instance,
    pub next_gipa: vk::PFN_vkGetInstanceProcAddr,
    /// The next layer's Vulkan 1.0 instance commands.
    pub fp: ash::InstanceFnV1_0,
    /// `vkGetPhysicalDeviceProperties2` (1.1) or its KHR alias, only where the instance makes
    /// it legal (`apiVersion` ≥ 1.1, or the KHR extension enabled) and the next layer has it.
    pub get_physical_device_properties2: Option<vk::PFN_vkGetPhysicalDeviceProperties2>,
    /// `vkGetPhysicalDeviceImageFormatProperties2` (1.1) or its KHR alias, under the same rule,
    /// the KHR one only with `VK_KHR_external_memory_capabilities` enabled too (echo asks it with
    /// `VkPhysicalDeviceExternalImageFormatInfo`). Resolved at `vkCreateInstance`: resolved later,
    /// the loader's terminator answers with the top of the chain's entry, which a layer above
    /// (RenderDoc) may not have filled for an extension only echo enabled.
    pub get_physical_device_image_format_properties2:
        Option<vk::PFN_vkGetPhysicalDeviceImageFormatProperties2>,
    /// `vkGetPhysicalDeviceExternalBufferProperties` (or its KHR alias), resolved likewise.
    pub get_physical_device_external_buffer_properties:
        Option<vk::PFN_vkGetPhysicalDeviceExternalBufferProperties>,
    /// `vkGetPhysicalDeviceCalibrateableTimeDomainsKHR` (or the EXT name), resolved likewise.
    pub get_physical_device_calibrateable_time_domains:
        Option<vk::PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsKHR>,
    pub settings: Settings,
    /// The application's `apiVersion` (1.0 when it gave none).
    pub api_version: u32,
    /// Instance extensions enabled: the application's plus any echo added for itself.
    pub extensions: HashSet<String>,
}

impl InstanceData {
    /// The next layer's instance-level command `name`, if it has one.
    pub fn next_proc(&self, name: &CStr) -> vk::PFN_vkVoidFunction {
        // SAFETY: next_gipa comes from the loader's link info for this instance.
        unsafe { (self.next_gipa)(self.handle, name.as_ptr()) }
    }

    /// `vkGetPhysicalDeviceProperties2` for `pd` when calling it is legal: the instance allows
    /// it (see the field) and, for the core command, the physical device supports 1.1 too.
    pub fn properties2(
        &self,
        pd: vk::PhysicalDevice,
    ) -> Option<vk::PFN_vkGetPhysicalDeviceProperties2> {
        let f = self.get_physical_device_properties2?;
        if self.api_version >= vk::API_VERSION_1_1 {
            let mut props = vk::PhysicalDeviceProperties::default();
            // SAFETY: pd belongs to this instance; the out struct is valid.
            unsafe { (self.fp.get_physical_device_properties)(pd, &mut props) };
            if props.api_version < vk::API_VERSION_1_1
                && !self
                    .extensions
                    .contains("VK_KHR_get_physical_device_properties2")
            {
                return None;
            }
        }
        Some(f)
    }

    /// `vkGetPhysicalDeviceImageFormatProperties2` (or its KHR alias) for `pd`, where asking it
    /// with `VkPhysicalDeviceExternalImageFormatInfo` is legal: the properties2 query is (see
    /// [`InstanceData::properties2`]) and external-memory capabilities are core (1.1) or enabled.
    pub fn image_format_properties2(
        &self,
        pd: vk::PhysicalDevice,
    ) -> Option<vk::PFN_vkGetPhysicalDeviceImageFormatProperties2> {
        // The same legality as the properties2 query (core needs a 1.1 physical device too).
        self.properties2(pd)?;
        self.get_physical_device_image_format_properties2
    }

    /// `vkGetPhysicalDeviceExternalBufferProperties` (or its KHR alias) for `pd`, where asking
    /// it is legal (core on a 1.1 physical device, or the capabilities extension enabled).
    pub fn external_buffer_properties(
        &self,
        pd: vk::PhysicalDevice,
    ) -> Option<vk::PFN_vkGetPhysicalDeviceExternalBufferProperties> {
        if self.api_version >= vk::API_VERSION_1_1 {
            let mut props = vk::PhysicalDeviceProperties::default();
            // SAFETY: pd belongs to this instance; the out struct is valid.
            unsafe { (self.fp.get_physical_device_properties)(pd, &mut props) };
            if props.api_version < vk::API_VERSION_1_1
                && !self
                    .extensions
                    .contains("VK_KHR_external_memory_capabilities")
            {
                return None;
            }
        }
        self.get_physical_device_external_buffer_properties
    }

    /// The physical device's memory table and type, read through the next layer (so a layer
    /// below can present another table), plus its name.
    pub fn memory_table(
        &self,
        pd: vk::PhysicalDevice,
    ) -> (MemoryTable, String, vk::PhysicalDeviceProperties) {
        let mut props = vk::PhysicalDeviceProperties::default();
        let mut mem = vk::PhysicalDeviceMemoryProperties::default();
        // SAFETY: pd belongs to this instance; the out structs are valid.
        unsafe {
            (self.fp.get_physical_device_properties)(pd, &mut props);
            (self.fp.get_physical_device_memory_properties)(pd, &mut mem);
        }
        let name = props
            .device_name_as_c_str()
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default();
        let table = MemoryTable::from_raw(
            props.device_type.as_raw(),
            mem.memory_heaps_as_slice()
                .iter()
                .map(|h| (h.size, h.flags.as_raw())),
            mem.memory_types_as_slice()
                .iter()
                .map(|t| (t.heap_index, t.property_flags.as_raw())),
        );
        (table, name, props)
    }
}

/// Why a device is (in)active, decided once at `vkCreateDevice`.
#[derive(Clone, Debug)]
#[allow(dead_code)] // fields read by profile and enforce mode
pub struct Decision {
    pub name: String,
    pub table: MemoryTable,
    pub topology: Topology,
    pub mode: Mode,
    pub active: bool,
    pub why: String,
}

/// A device as everything below the hooks sees it: its handle, the next layer's commands, its
/// settings, the topology decision and its state. Profile and enforce take this from below; the
/// hooks' record ([`crate::dispatch::DeviceData`]) holds it with the modes' state above it.
#[allow(dead_code)] // fields read by profile and enforce mode
pub struct Device {
    pub handle: vk::Device,
    /// Creation index in the process (`crate::lifetime`): traces and plans name devices by it.
    pub index: u32,
    /// Its statistics were written (at `vkDestroyDevice` or at exit): once only.
    pub stats_written: AtomicBool,
    /// The smallest buffer or allocation size that gets a stable key (`u64::MAX`: none).
    pub key_floor: std::sync::atomic::AtomicU64,
    pub physical_device: vk::PhysicalDevice,
    pub instance: Option<Arc<InstanceData>>,
    pub next_gdpa: vk::PFN_vkGetDeviceProcAddr,
    /// The next layer's Vulkan 1.0 device commands, for echo's own calls.
    pub fp: ash::DeviceFnV1_0,
    pub settings: Settings,
    pub decision: Decision,
    /// Extensions enabled on the device: the application's plus any echo added.
    pub extensions: HashSet<String>,
    /// Extensions echo added for itself (not visible to the application's requests).
    pub added_extensions: Vec<String>,
    /// The application enabled `sparseBinding` (`vkQueueBindSparse` may name memory).
    pub sparse_binding: bool,
    /// The queues the application created: `(family, flags)` of each `VkDeviceQueueCreateInfo`.
    pub queues_created: Vec<(u32, vk::DeviceQueueCreateFlags)>,
    /// The loader's `vkSetDeviceLoaderData`, when it gave one.
    pub set_loader_data_fn: crate::loader::PFN_vkSetDeviceLoaderData,
    /// The device's effective API version: the lower of the application's and the device's.
    pub api_version: u32,
    /// Set when echo hit an internal error on this device: passthrough from then on.
    pub failed: AtomicBool,
    pub state: DeviceState,
}

impl Device {
    /// Whether echo's hooks do anything for this device.
    #[inline]
    pub fn is_active(&self) -> bool {
        self.decision.active && !self.failed.load(Ordering::Relaxed)
    }

    /// Whether a buffer or allocation of `size` bytes gets a stable key (call site + ordinal).
    /// Taking the call site unwinds the stack, the main cost of `vkCreateBuffer` in these modes,
    /// so only objects that can matter get one: in profile mode those of at least `min_bytes`
    /// (smaller ones can never be candidates; they are traced without identity), in enforce mode
    /// those at least as large as the smallest buffer the plan names (none without a plan).
    #[inline]
    pub fn wants_key(&self, size: u64) -> bool {
        size >= self.key_floor.load(Ordering::Relaxed)
    }

    /// Sets the key floor once profile/enforce start-up decided (see [`DeviceData::wants_key`]).
    pub fn set_key_floor(&self, floor: u64) {
        self.key_floor.store(floor, Ordering::Relaxed);
    }

    /// Gives a command buffer echo allocated itself the loader's dispatch pointer, as every
    /// dispatchable object created below the loader's trampoline needs: through the loader's
    /// `vkSetDeviceLoaderData`, else (a loader that gave none) by copying the device's.
    pub fn set_loader_data(&self, cb: vk::CommandBuffer) -> bool {
        let obj = vk::Handle::as_raw(cb) as usize as *mut std::ffi::c_void;
        if obj.is_null() {
            return false;
        }
        match self.set_loader_data_fn {
            // SAFETY: the loader's callback, for an object created on this device.
            Some(f) => unsafe { f(self.handle, obj) == vk::Result::SUCCESS },
            None => {
                // SAFETY: both are dispatchable objects: their first word is the dispatch
                // pointer.
                unsafe {
                    *(obj as *mut usize) =
                        *(vk::Handle::as_raw(self.handle) as usize as *const usize)
                };
                true
            }
        }
    }

    /// The next layer's device-level command `name`.
    pub fn next_proc(&self, name: &CStr) -> vk::PFN_vkVoidFunction {
        // SAFETY: next_gdpa comes from the loader's link info for this device.
        unsafe { (self.next_gdpa)(self.handle, name.as_ptr()) }
    }

    /// Marks the device failed after an internal error in `what`; logs once per device.
    pub fn fail(&self, what: &str) {
        if !self.failed.swap(true, Ordering::Relaxed) {
            log::error!(
                "internal error in {what} on device '{}'; echo falls back to passthrough for this device",
                self.decision.name
            );
        }
    }
}
