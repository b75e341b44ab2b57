//! Echo's hooks, one file per Vulkan chapter.
//!
//! Device-level hooks are written with [`hook!`]: the macro makes the `extern "system"`
//! function, finds the device by dispatch key, passes straight through when the device is
//! inactive or failed, and runs the body under `catch_unwind` (see `guard.rs`). A body gets
//! `cx: &Call` with `cx.dev` (the device record: settings, decision, state) and `cx.next` (the
//! next layer's function for exactly the command called) and must call down as
//! `cx.down((cx.next)(args))`. Bodies stay thin: observe (record state / trace), apply (a plan
//! decided elsewhere), call down.
//!
//! [`hook_table!`] below lists every device hook once: it is the name → hook table that
//! `vkGetDeviceProcAddr` and `vkGetInstanceProcAddr` consult.

pub mod aside;
#[rustfmt::skip]
mod aside_gen;
pub mod buffer;
pub mod command;
pub mod descriptor;
pub mod device;
pub mod image;
pub mod instance;
pub mod mark;
#[rustfmt::skip]
mod mark_gen;
pub mod memory;
pub mod queue;
pub mod sync;

/// Defines device hooks. `fn vkA | vkAKHR (cx, first: T, ...) -> R { body }` defines one hook
/// per name with the same body (aliases resolve to their own next-layer pointer).
macro_rules! hook {
    () => {};
    (
        $(#[$m:meta])*
        fn $name:ident | $($alias:ident)|+ ($($sig:tt)*) $(-> $ret:ty)? $body:block
        $($rest:tt)*
    ) => {
        $crate::hooks::hook! { $(#[$m])* fn $name ($($sig)*) $(-> $ret)? $body }
        $crate::hooks::hook! { $(#[$m])* fn $($alias)|+ ($($sig)*) $(-> $ret)? $body }
        $crate::hooks::hook! { $($rest)* }
    };
    (
        $(#[$m:meta])*
        fn $name:ident ($cx:ident, $first:ident : $fty:ty $(, $arg:ident : $ty:ty)* $(,)?) $(-> $ret:ty)? $body:block
        $($rest:tt)*
    ) => {
        $(#[$m])*
        #[allow(non_snake_case, unused_unsafe, clippy::missing_safety_doc, clippy::unit_arg)]
        pub unsafe extern "system" fn $name($first: $fty $(, $arg: $ty)*) $(-> $ret)? {
            type Next = unsafe extern "system" fn($fty $(, $ty)*) $(-> $ret)?;
            type Ret = $crate::hooks::ret_ty!($($ret)?);
            $crate::ffi_guard::device_call::<Next, Ret>(
                // SAFETY: the first parameter of every hooked command is a dispatchable handle.
                unsafe { $crate::dispatch::key_of($crate::dispatch::raw($first)) },
                $crate::dispatch::raw($first),
                $crate::hooks::HookId::$name,
                #[allow(unused_unsafe)]
                |$cx: &$crate::ffi_guard::Call<'_, Next, Ret>| unsafe { $body },
                |next: Next| unsafe { next($first $(, $arg)*) },
            )
        }
        $crate::hooks::hook! { $($rest)* }
    };
}

macro_rules! ret_ty {
    () => {
        ()
    };
    ($t:ty) => {
        $t
    };
}

/// The table of device hooks: `chapter::vkName`.
macro_rules! hook_table {
    ($($module:ident :: $name:ident),* $(,)?) => {
        /// Every device-level command echo can intercept.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(usize)]
        pub enum HookId { $($name),* }

        pub const HOOK_COUNT: usize = [$(stringify!($name)),*].len();
        const HOOK_NAMES: [&str; HOOK_COUNT] = [$(stringify!($name)),*];
        /// Whether each hook records a command into a command buffer (`vkCmd*`).
        const HOOK_RECORDS: [bool; HOOK_COUNT] = [$(is_cmd(stringify!($name))),*];

        impl HookId {
            pub const ALL: [HookId; HOOK_COUNT] = [$(HookId::$name),*];

            pub fn name(self) -> &'static str {
                HOOK_NAMES[self as usize]
            }

            /// It records a command into its first argument, a command buffer (`vkCmd*`).
            #[inline]
            pub fn records(self) -> bool {
                HOOK_RECORDS[self as usize]
            }

            pub fn from_name(name: &[u8]) -> Option<HookId> {
                HookId::ALL.iter().copied().find(|h| h.name().as_bytes() == name)
            }

            /// Echo's hook, as the loader's void function pointer.
            pub fn hook(self) -> unsafe extern "system" fn() {
                // SAFETY: a function item cast to a function pointer of another signature;
                // the caller gets it back through vkGet*ProcAddr, typed by the command name.
                unsafe {
                    match self {
                        $(HookId::$name => std::mem::transmute::<*const (), unsafe extern "system" fn()>(
                            $module::$name as *const ()
                        ),)*
                    }
                }
            }
        }
    };
}

pub(crate) use {hook, ret_ty};

/// Whether a command name is a recorded command (`vkCmd` followed by an upper-case letter).
const fn is_cmd(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() > 5
        && b[0] == b'v'
        && b[1] == b'k'
        && b[2] == b'C'
        && b[3] == b'm'
        && b[4] == b'd'
        && b[5].is_ascii_uppercase()
}

hook_table! {
    // memory.rs
    memory::vkAllocateMemory,
    memory::vkFreeMemory,
    memory::vkMapMemory,
    memory::vkUnmapMemory,
    memory::vkMapMemory2,
    memory::vkMapMemory2KHR,
    memory::vkUnmapMemory2,
    memory::vkUnmapMemory2KHR,
    memory::vkFlushMappedMemoryRanges,
    memory::vkInvalidateMappedMemoryRanges,
    memory::vkGetDeviceMemoryCommitment,
    memory::vkGetDeviceMemoryOpaqueCaptureAddress,
    memory::vkGetDeviceMemoryOpaqueCaptureAddressKHR,
    memory::vkGetMemoryFdKHR,
    // buffer.rs
    buffer::vkCreateBuffer,
    buffer::vkDestroyBuffer,
    buffer::vkBindBufferMemory,
    buffer::vkBindBufferMemory2,
    buffer::vkBindBufferMemory2KHR,
    buffer::vkGetBufferDeviceAddress,
    buffer::vkGetBufferDeviceAddressKHR,
    buffer::vkGetBufferDeviceAddressEXT,
    buffer::vkGetBufferOpaqueCaptureAddress,
    buffer::vkGetBufferOpaqueCaptureAddressKHR,
    buffer::vkCreateBufferView,
    buffer::vkDestroyBufferView,
    buffer::vkBindImageMemory,
    buffer::vkBindImageMemory2,
    buffer::vkBindImageMemory2KHR,
    // image.rs
    image::vkCreateImage,
    image::vkDestroyImage,
    // command.rs
    command::vkAllocateCommandBuffers,
    command::vkFreeCommandBuffers,
    command::vkDestroyCommandPool,
    command::vkResetCommandPool,
    command::vkBeginCommandBuffer,
    command::vkEndCommandBuffer,
    command::vkResetCommandBuffer,
    command::vkCmdCopyBuffer,
    command::vkCmdCopyBuffer2,
    command::vkCmdCopyBuffer2KHR,
    command::vkCmdFillBuffer,
    command::vkCmdUpdateBuffer,
    command::vkCmdBindVertexBuffers,
    command::vkCmdBindIndexBuffer,
    command::vkCmdBindPipeline,
    command::vkCmdBindDescriptorSets,
    command::vkCmdPushDescriptorSetKHR,
    command::vkCmdPushDescriptorSet,
    command::vkCmdPushDescriptorSetWithTemplateKHR,
    command::vkCmdPushDescriptorSetWithTemplate,
    command::vkCmdExecuteCommands,
    command::vkCmdDispatch,
    command::vkCmdDispatchIndirect,
    command::vkCmdDraw,
    command::vkCmdDrawIndexed,
    command::vkCmdDrawIndirect,
    command::vkCmdDrawIndexedIndirect,
    command::vkCmdDrawIndirectCount,
    command::vkCmdDrawIndirectCountKHR,
    command::vkCmdDrawIndirectCountAMD,
    command::vkCmdDrawIndexedIndirectCount,
    command::vkCmdDrawIndexedIndirectCountKHR,
    command::vkCmdDrawIndexedIndirectCountAMD,
    command::vkCmdCopyBufferToImage,
    command::vkCmdCopyImageToBuffer,
    command::vkCmdPipelineBarrier,
    command::vkCmdPipelineBarrier2,
    command::vkCmdPipelineBarrier2KHR,
    command::vkCmdCopyBufferToImage2,
    command::vkCmdCopyBufferToImage2KHR,
    command::vkCmdCopyImageToBuffer2,
    command::vkCmdCopyImageToBuffer2KHR,
    command::vkCmdBindVertexBuffers2,
    command::vkCmdBindVertexBuffers2EXT,
    command::vkCmdBindIndexBuffer2,
    command::vkCmdBindIndexBuffer2KHR,
    command::vkCmdBindDescriptorSets2,
    command::vkCmdBindDescriptorSets2KHR,
    command::vkCmdPushDescriptorSet2,
    command::vkCmdPushDescriptorSet2KHR,
    command::vkCmdPushDescriptorSetWithTemplate2,
    command::vkCmdPushDescriptorSetWithTemplate2KHR,
    command::vkCmdDispatchBase,
    command::vkCmdDispatchBaseKHR,
    command::vkCmdDrawMultiEXT,
    command::vkCmdDrawMultiIndexedEXT,
    command::vkCmdWaitEvents,
    command::vkCmdWaitEvents2,
    command::vkCmdWaitEvents2KHR,
    command::vkCmdSetEvent2,
    command::vkCmdSetEvent2KHR,
    // descriptor.rs
    descriptor::vkUpdateDescriptorSets,
    descriptor::vkCreateShaderModule,
    descriptor::vkDestroyShaderModule,
    descriptor::vkCreateComputePipelines,
    descriptor::vkCreateGraphicsPipelines,
    descriptor::vkAllocateDescriptorSets,
    descriptor::vkCreatePipelineLayout,
    descriptor::vkCreateDescriptorSetLayout,
    descriptor::vkCreateDescriptorUpdateTemplate,
    descriptor::vkCreateDescriptorUpdateTemplateKHR,
    descriptor::vkDestroyDescriptorUpdateTemplate,
    descriptor::vkDestroyDescriptorUpdateTemplateKHR,
    descriptor::vkUpdateDescriptorSetWithTemplate,
    descriptor::vkUpdateDescriptorSetWithTemplateKHR,
    // queue.rs
    queue::vkGetDeviceQueue,
    queue::vkGetDeviceQueue2,
    queue::vkQueueSubmit,
    queue::vkQueueSubmit2,
    queue::vkQueueSubmit2KHR,
    queue::vkQueueWaitIdle,
    queue::vkDeviceWaitIdle,
    // sync.rs
    sync::vkWaitForFences,
    sync::vkGetFenceStatus,
    sync::vkResetFences,
    sync::vkWaitSemaphores,
    sync::vkWaitSemaphoresKHR,
    sync::vkGetSemaphoreCounterValue,
    sync::vkGetSemaphoreCounterValueKHR,
    sync::vkSignalSemaphore,
    sync::vkSignalSemaphoreKHR,
}

/// An enabled-extension list for a patched create info: the application's `count` names
/// followed by `added` (echo's own). Keep the returned vector alive while the create info that
/// points into it is used.
///
/// # Safety
/// `names` must hold `count` valid C strings (or be null with `count` 0).
pub unsafe fn extension_list(
    count: u32,
    names: *const *const std::ffi::c_char,
    added: &[*const std::ffi::c_char],
) -> Vec<*const std::ffi::c_char> {
    let mut v: Vec<*const std::ffi::c_char> = if names.is_null() {
        Vec::new()
    } else {
        std::slice::from_raw_parts(names, count as usize).to_vec()
    };
    v.extend_from_slice(added);
    v
}
