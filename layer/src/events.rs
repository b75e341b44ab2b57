//! The chassis's interface (issue 56), below the modes: each followed command described once as
//! a value ([`Cmd`], [`BufferCopy`], and `submit::Batch` for submissions), and the one trait of
//! events, [`Mode`], that every mode implements in its own folder — profile
//! (`profile/profile_mode.rs`), its GPU timing (`profile/gputime/timing_mode.rs`), the runtime
//! guard of guarded enforce (`enforce/guard/guard_mode.rs`) and enforce
//! (`enforce/enforcer/enforce_mode.rs`). The chassis (`chassis.rs`, above the modes) calls them,
//! in the one order written down there.
//!
//! A behaviour body in `hooks/` builds the description and hands it to the chassis with the call
//! down; it does not know which modes exist. Two shapes of event, and questions:
//!
//! - **Observed** ([`Cmd`]): a mode looks at the command before it goes down ([`Mode::before`])
//!   and/or after ([`Mode::after`], with whether it succeeded); it never changes the call.
//! - **Around** ([`Mode::copy`], [`Mode::submit`], [`Mode::wait`], the buffer and memory
//!   commands): a mode receives the call and `next` (the modes inside it, then the next layer)
//!   and decides what goes on: as asked, changed (enforce drops self-copy regions, leaves out
//!   empty command buffers), wrapped (GPU timestamps around it), or nothing. Whatever a mode keeps between before and after (a
//!   sequence number, the guard's memories) stays in its own frame.
//! - **Questions** ([`Mode::wants_uses`], [`Mode::backing`], [`Mode::driver_memory`], …): the
//!   first mode in the chassis order that answers decides.
//!
//! Below the modes: it names records, state, host memory and the submission batches, nothing of
//! a mode or of the chassis.

use crate::hostmem::export::Backing;
use crate::hostmem::memfd::BufferPatch;
use crate::records::Device;
use crate::state::{MemoryState, UpdateTemplate};
use crate::submit::Batch;
use ash::vk;
use echo_analyzer::trace::{BufferUse, CopyRegion, Frame, ObjectKey};
use std::cell::Cell;
use std::ffi::c_void;

pub use crate::handles::{raw, slice};

/// The work a recorded command runs over the state bound to its command buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// None: it touches only the buffers it names (fills, updates, copies to or from images,
    /// vertex and index buffers bound).
    Names,
    /// A dispatch: the compute bind point's descriptors too.
    Dispatch,
    /// A draw: the graphics bind point's descriptors too.
    Draw,
}

/// A command that only needs to be seen: what it is, with the arguments the modes read.
#[derive(Clone, Copy)]
pub enum Cmd<'a> {
    /// Command buffer `cb` records `command`, which uses `buffers` (null handles left out) and
    /// runs `work`.
    Uses {
        cb: u64,
        command: &'static str,
        work: Work,
        buffers: &'a [BufferUse],
    },
    /// `vkCmdBindDescriptorSets(2)`: `sets` bound at `bp` from `first`.
    BindSets {
        cb: u64,
        bp: vk::PipelineBindPoint,
        first: u32,
        sets: &'a [u64],
        dynamic: &'a [u32],
    },
    /// `vkCmdPushDescriptorSet(2)`: `count` writes at `writes` pushed into `set` at `bp`.
    PushDescriptors {
        cb: u64,
        bp: vk::PipelineBindPoint,
        set: u32,
        count: u32,
        writes: *const vk::WriteDescriptorSet<'a>,
    },
    /// `vkCmdPushDescriptorSetWithTemplate(2)`: `template` (`None`: not recorded) pushed with
    /// `data` into `set`.
    PushTemplate {
        cb: u64,
        template: Option<&'a UpdateTemplate>,
        set: u32,
        data: *const c_void,
    },
    /// `vkCmdBindPipeline`.
    BindPipeline {
        cb: u64,
        bp: vk::PipelineBindPoint,
        pipeline: u64,
    },
    /// `vkCmdBindShadersEXT`: each stage's shader (0: unbound).
    BindShaders {
        cb: u64,
        stages: &'a [vk::ShaderStageFlags],
        shaders: &'a [u64],
    },
    /// `vkCmdExecuteCommands` (`None`: a null `pCommandBuffers`).
    Execute {
        cb: u64,
        secondaries: Option<&'a [vk::CommandBuffer]>,
    },
    /// `vkFreeCommandBuffers`: the handles as the application gave them.
    FreeCommandBuffers(&'a [vk::CommandBuffer]),
    /// `vkDestroyCommandPool`: the pool's command buffers go with it.
    DestroyPool(&'a [u64]),
    /// `vkResetCommandPool`: the pool's command buffers were reset.
    ResetPool(&'a [u64]),
    /// `vkBeginCommandBuffer` with its flags.
    Begin {
        cb: u64,
        flags: vk::CommandBufferUsageFlags,
    },
    /// `vkEndCommandBuffer`.
    End(u64),
    /// `vkResetCommandBuffer`.
    Reset(u64),
    /// A device address of the buffer was asked for (`vkGetBufferDeviceAddress`,
    /// `vkGetBufferOpaqueCaptureAddress`).
    DeviceAddress(u64),
    /// A barrier, an event wait (`ordering`: profile marks the command buffer) or an event set:
    /// the buffers its buffer barriers name.
    Barrier {
        cb: u64,
        ordering: bool,
        buffers: Barriers<'a>,
    },
    /// `vkGetFenceStatus`.
    FenceStatus(u64),
    /// `vkResetFences` (`None`: a null `pFences`).
    ResetFences(Option<&'a [vk::Fence]>),
    /// `vkGetSemaphoreCounterValue`, the value written at `value` once it succeeded.
    SemaphoreValue { semaphore: u64, value: *mut u64 },
    /// `vkSignalSemaphore`.
    SignalSemaphore(&'a vk::SemaphoreSignalInfo<'a>),
    /// `vkUpdateDescriptorSets`.
    UpdateSets {
        write_count: u32,
        writes: *const vk::WriteDescriptorSet<'a>,
        copy_count: u32,
        copies: *const vk::CopyDescriptorSet<'a>,
    },
    /// `vkUpdateDescriptorSetWithTemplate`: `template` (`None`: not recorded) with `data`.
    UpdateWithTemplate {
        set: u64,
        template: Option<&'a UpdateTemplate>,
        data: *const c_void,
    },
    /// A shader module made (after).
    ShaderModule(u64, &'a vk::ShaderModuleCreateInfo<'a>),
    /// `vkDestroyShaderModule`.
    DestroyShaderModule(u64),
    /// Compute pipelines made (after; a handle may be null).
    ComputePipelines {
        count: u32,
        infos: *const vk::ComputePipelineCreateInfo<'a>,
        out: *const vk::Pipeline,
    },
    /// Graphics pipelines made (after; a handle may be null).
    GraphicsPipelines {
        count: u32,
        infos: *const vk::GraphicsPipelineCreateInfo<'a>,
        out: *const vk::Pipeline,
    },
    /// `vkDestroyPipeline`.
    DestroyPipeline(u64),
    /// Shader objects made (after; a handle may be null).
    Shaders {
        count: u32,
        infos: *const vk::ShaderCreateInfoEXT<'a>,
        out: *const vk::ShaderEXT,
    },
    /// `vkDestroyShaderEXT`.
    DestroyShader(u64),
    /// `vkAllocateDescriptorSets`: the sets written at `out` once it succeeded.
    AllocateSets(
        &'a vk::DescriptorSetAllocateInfo<'a>,
        *const vk::DescriptorSet,
    ),
    /// A descriptor set layout made (after).
    SetLayout(u64, &'a vk::DescriptorSetLayoutCreateInfo<'a>),
    /// A buffer bound where the application asked (after; its state already says so).
    BufferBound {
        buffer: u64,
        memory: u64,
        offset: u64,
    },
    /// `vkCreateBufferView` (its view at `out` once it succeeded).
    CreateBufferView(&'a vk::BufferViewCreateInfo<'a>, *const vk::BufferView),
    /// `vkDestroyBufferView`.
    DestroyBufferView(u64),
    /// An image bound into memory (after): `chained`, the bind carried extension structures.
    ImageBound {
        image: vk::Image,
        memory: vk::DeviceMemory,
        offset: u64,
        chained: bool,
    },
    /// A memory command echo passes down as asked (`vkMapMemory2` with a chained structure,
    /// `vkUnmapMemory2` with flags): the allocation's buffers leave every group.
    MemoryAside { command: &'a str, memory: u64 },
    /// `vkMapMemory(2)` went down as asked: the driver's pointer is at `data` (a mode may hand
    /// out another view in its place).
    Mapping(MapMemory),
    /// A mapping as asked is recorded in the memory's state.
    Mapped(u64),
    /// `vkDestroyDevice`, before anything of the device is let go.
    DestroyDevice,
    /// The device's work ends without `vkDestroyDevice`: its instance is destroyed with the
    /// device alive.
    LeftAlive,
    /// A command echo steps aside from (`hooks/aside.rs`): its command buffer when recorded,
    /// whether it reaches every buffer of the device, and the handles it names.
    Aside {
        cb: Option<u64>,
        command: &'a str,
        everything: bool,
        buffers: &'a [u64],
        views: &'a [u64],
        memory: &'a [u64],
        sets: &'a [u64],
    },
}

/// The buffer barriers of a barrier command: `VkBufferMemoryBarrier`s, or the ones of each
/// `VkDependencyInfo`.
#[derive(Clone, Copy)]
pub enum Barriers<'a> {
    V1(&'a [vk::BufferMemoryBarrier<'a>]),
    V2(&'a [vk::DependencyInfo<'a>]),
}

impl<'a> Barriers<'a> {
    /// The buffers named.
    ///
    /// # Safety
    /// The application's valid arrays.
    pub unsafe fn buffers(self) -> impl Iterator<Item = vk::Buffer> + 'a {
        let (one, two): (&[vk::BufferMemoryBarrier<'a>], &[vk::DependencyInfo<'a>]) = match self {
            Barriers::V1(b) => (b, &[]),
            Barriers::V2(d) => (&[], d),
        };
        let deps = two.iter().flat_map(|i| {
            // SAFETY: the caller's valid dependency infos.
            unsafe { slice(i.p_buffer_memory_barriers, i.buffer_memory_barrier_count) }
        });
        one.iter().map(|b| b.buffer).chain(deps.map(|b| b.buffer))
    }
}

/// A host wait for the GPU: for idle, for fences, for timeline semaphores.
#[derive(Clone, Copy, Debug)]
pub enum Wait<'a> {
    /// `vkQueueWaitIdle`.
    Queue(u64),
    /// `vkDeviceWaitIdle`.
    Device,
    /// `vkWaitForFences`: `count` fences at `fences`, all of them or any.
    Fences {
        count: u32,
        fences: *const vk::Fence,
        all: bool,
    },
    /// `vkWaitSemaphores`.
    Semaphores(*const vk::SemaphoreWaitInfo<'a>),
}

/// What the outer modes tell the inner ones during one call.
#[derive(Default)]
pub struct Told {
    /// The trace's sequence number of the command (profile's record of it; 0: none).
    pub seq: Cell<u64>,
}

/// One buffer copy as a value: `vkCmdCopyBuffer`'s arguments ([`Copy1`]) or a
/// `VkCopyBufferInfo2` ([`Copy2`]): profile traces it, GPU timing brackets it, the guard counts
/// its buffers, enforce drops its self-copy regions — one path for both commands.
pub trait BufferCopy: Copy {
    /// How the command names one region.
    type Region: Copy;

    /// The command buffer recording it.
    fn cb(&self) -> vk::CommandBuffer;

    /// Source and destination buffers.
    fn buffers(&self) -> (u64, u64);

    /// The regions (empty when the array is null).
    ///
    /// # Safety
    /// The description holds the application's valid arguments.
    unsafe fn regions(&self) -> &[Self::Region];

    /// A region as (src offset, dst offset, size).
    fn region(r: &Self::Region) -> (u64, u64, u64);

    /// Whether the trace records the copy (`vkCmdCopyBuffer` with a null `pRegions` is not).
    fn traced(&self) -> bool;

    /// The same copy with only `keep`'s regions (which outlive the returned value's use).
    fn with_regions(&self, keep: &[Self::Region]) -> Self;

    /// The regions as the trace records them.
    ///
    /// # Safety
    /// As [`BufferCopy::regions`].
    unsafe fn trace(&self) -> Vec<CopyRegion> {
        self.regions()
            .iter()
            .map(|r| {
                let (src_offset, dst_offset, size) = Self::region(r);
                CopyRegion {
                    src_offset,
                    dst_offset,
                    size,
                }
            })
            .collect()
    }
}

/// `vkCmdCopyBuffer`'s arguments.
#[derive(Clone, Copy)]
pub struct Copy1 {
    pub cb: vk::CommandBuffer,
    pub src: vk::Buffer,
    pub dst: vk::Buffer,
    pub count: u32,
    pub regions: *const vk::BufferCopy,
}

impl BufferCopy for Copy1 {
    type Region = vk::BufferCopy;

    fn cb(&self) -> vk::CommandBuffer {
        self.cb
    }

    fn buffers(&self) -> (u64, u64) {
        (raw(self.src), raw(self.dst))
    }

    unsafe fn regions(&self) -> &[vk::BufferCopy] {
        slice(self.regions, self.count)
    }

    fn region(r: &vk::BufferCopy) -> (u64, u64, u64) {
        (r.src_offset, r.dst_offset, r.size)
    }

    fn traced(&self) -> bool {
        !self.regions.is_null()
    }

    fn with_regions(&self, keep: &[vk::BufferCopy]) -> Copy1 {
        Copy1 {
            count: keep.len() as u32,
            regions: keep.as_ptr(),
            ..*self
        }
    }
}

/// `vkCmdCopyBuffer2(KHR)`'s arguments: the application's `info`, until regions are left out
/// (then `at` is null and `info` is the changed copy that goes down).
#[derive(Clone, Copy)]
pub struct Copy2<'a> {
    pub cb: vk::CommandBuffer,
    pub info: vk::CopyBufferInfo2<'a>,
    pub at: *const vk::CopyBufferInfo2<'a>,
}

impl<'a> Copy2<'a> {
    /// The description of the application's `info`.
    ///
    /// # Safety
    /// `info` is the application's valid `VkCopyBufferInfo2`.
    pub unsafe fn of(cb: vk::CommandBuffer, info: *const vk::CopyBufferInfo2<'a>) -> Copy2<'a> {
        Copy2 {
            cb,
            info: *info,
            at: info,
        }
    }

    /// The `VkCopyBufferInfo2` to send down: the application's, or the changed copy.
    pub fn down(&self) -> *const vk::CopyBufferInfo2<'a> {
        if self.at.is_null() {
            &self.info
        } else {
            self.at
        }
    }
}

impl<'a> BufferCopy for Copy2<'a> {
    type Region = vk::BufferCopy2<'a>;

    fn cb(&self) -> vk::CommandBuffer {
        self.cb
    }

    fn buffers(&self) -> (u64, u64) {
        (raw(self.info.src_buffer), raw(self.info.dst_buffer))
    }

    unsafe fn regions(&self) -> &[vk::BufferCopy2<'a>] {
        slice(self.info.p_regions, self.info.region_count)
    }

    fn region(r: &vk::BufferCopy2<'a>) -> (u64, u64, u64) {
        (r.src_offset, r.dst_offset, r.size)
    }

    fn traced(&self) -> bool {
        true
    }

    fn with_regions(&self, keep: &[vk::BufferCopy2<'a>]) -> Copy2<'a> {
        let mut info = self.info;
        info.region_count = keep.len() as u32;
        info.p_regions = keep.as_ptr();
        Copy2 {
            cb: self.cb,
            info,
            at: std::ptr::null(),
        }
    }
}

/// A queue submission as a value: `n` batches at `p` (the application's, or changed by a mode
/// outside), on `queue` with `fence`.
pub struct Submission<B: Batch> {
    pub queue: u64,
    pub fence: u64,
    pub n: u32,
    pub p: *const B,
}

impl<B: Batch> Clone for Submission<B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B: Batch> Copy for Submission<B> {}

impl<B: Batch> Submission<B> {
    /// The batches.
    ///
    /// # Safety
    /// `p` holds `n` valid batches.
    pub unsafe fn batches(&self) -> &[B] {
        slice(self.p, self.n)
    }

    /// The same submission with `n` batches at `p`.
    pub fn with(&self, n: u32, p: *const B) -> Submission<B> {
        Submission { n, p, ..*self }
    }
}

/// `vkCreateBuffer`: the create info that goes down (the application's, or one a mode patched)
/// and where the handle is written.
#[derive(Clone, Copy)]
pub struct CreateBuffer {
    pub info: *const vk::BufferCreateInfo<'static>,
    pub out: *mut vk::Buffer,
}

impl CreateBuffer {
    /// Creates the buffer with `patch`'s info first, and as asked if the driver refuses that.
    ///
    /// # Safety
    /// `patch` is valid for the call.
    pub unsafe fn down_patched(
        self,
        patch: Option<&BufferPatch>,
        next: Next<'_, CreateBuffer, vk::Result>,
    ) -> vk::Result {
        let Some(b) = patch else { return next(self) };
        let r = next(CreateBuffer {
            info: b.info(),
            ..self
        });
        if r == vk::Result::SUCCESS {
            return r;
        }
        next(self)
    }
}

/// The binds of `vkBindBufferMemory` (one) or `vkBindBufferMemory2` (each info).
#[derive(Clone, Copy)]
pub enum BufferBinds<'a> {
    One {
        buffer: u64,
        memory: u64,
        offset: u64,
    },
    Infos(&'a [vk::BindBufferMemoryInfo<'a>]),
}

impl BufferBinds<'_> {
    /// Each bind as (buffer, memory, offset, with extension structures).
    pub fn each(&self) -> impl Iterator<Item = (u64, u64, u64, bool)> + '_ {
        let (one, infos) = match *self {
            BufferBinds::One {
                buffer,
                memory,
                offset,
            } => (Some((buffer, memory, offset, false)), &[][..]),
            BufferBinds::Infos(i) => (None, i),
        };
        one.into_iter().chain(infos.iter().map(|i| {
            (
                raw(i.buffer),
                raw(i.memory),
                i.memory_offset,
                !i.p_next.is_null(),
            )
        }))
    }
}

/// How binds go down: as the application asked, or one of them (by index) at another place.
#[derive(Clone, Copy, Debug)]
pub enum BindDown {
    AsAsked,
    One {
        index: usize,
        memory: u64,
        offset: u64,
    },
}

/// `vkAllocateMemory`: the allocate info that goes down (the application's, or one a mode
/// changed: another memory type, an import), the application's own, where the handle is
/// written, and the identity a mode already took for it (enforce, looking the allocation up in
/// the plan: its key, or the call site hash it read).
#[derive(Clone)]
pub struct Allocate {
    pub info: *const vk::MemoryAllocateInfo<'static>,
    pub app: *const vk::MemoryAllocateInfo<'static>,
    pub alloc: *const vk::AllocationCallbacks<'static>,
    pub out: *mut vk::DeviceMemory,
    pub key: Option<ObjectKey>,
    pub site: Option<u64>,
}

impl Allocate {
    /// The same allocation with `info` going down.
    pub fn with_info<'a>(&self, info: *const vk::MemoryAllocateInfo<'a>) -> Allocate {
        Allocate {
            info: info.cast(),
            ..self.clone()
        }
    }

    /// Records allocation `handle` of the application's info in the device's state, with its
    /// identity: `key` when one was taken, else a fresh one from the call site (`self.site`
    /// when it was read, else `site()`) where the size wants one.
    ///
    /// # Safety
    /// `self.app` is the application's valid info.
    pub unsafe fn record(&self, dev: &Device, handle: u64, site: &dyn Fn() -> (u64, Vec<Frame>)) {
        let i = &*self.app;
        let alloc_flags = allocate_flags(i);
        let (key, stack) = if let Some(k) = self.key.clone() {
            (Some(k), Vec::new())
        } else if dev.wants_key(i.allocation_size) {
            let (hash, frames) = match self.site {
                Some(h) => (h, Vec::new()),
                None => site(),
            };
            let key = dev.state.memory_keys.key(
                hash,
                i.allocation_size,
                i.memory_type_index,
                alloc_flags,
            );
            (Some(key), frames)
        } else {
            (None, Vec::new())
        };
        dev.state.memory.insert(
            handle,
            MemoryState {
                type_index: i.memory_type_index,
                size: i.allocation_size,
                dedicated_buffer: dedicated_buffer(i),
                mapped: None,
                host_mapped: false,
                alloc_flags,
                key,
                stack,
            },
        );
    }
}

/// The dedicated buffer of an allocation, from its pNext chain.
///
/// # Safety
/// `info`'s chain is valid.
pub unsafe fn dedicated_buffer(info: &vk::MemoryAllocateInfo<'_>) -> Option<u64> {
    let mut p = info.p_next as *const vk::BaseInStructure<'_>;
    while !p.is_null() {
        if (*p).s_type == vk::StructureType::MEMORY_DEDICATED_ALLOCATE_INFO {
            let d = &*(p as *const vk::MemoryDedicatedAllocateInfo<'_>);
            return (d.buffer != vk::Buffer::null()).then(|| raw(d.buffer));
        }
        p = (*p).p_next;
    }
    None
}

/// `VkMemoryAllocateFlagsInfo::flags` from the pNext chain, 0 when absent.
///
/// # Safety
/// `info`'s chain is valid.
pub unsafe fn allocate_flags(info: &vk::MemoryAllocateInfo<'_>) -> u32 {
    let mut p = info.p_next as *const vk::BaseInStructure<'_>;
    while !p.is_null() {
        if (*p).s_type == vk::StructureType::MEMORY_ALLOCATE_FLAGS_INFO {
            return (*(p as *const vk::MemoryAllocateFlagsInfo<'_>))
                .flags
                .as_raw();
        }
        p = (*p).p_next;
    }
    0
}

/// `vkFreeMemory` of `memory` with the application's allocation callbacks.
#[derive(Clone, Copy)]
pub struct Free {
    pub memory: u64,
    pub alloc: *const vk::AllocationCallbacks<'static>,
}

/// `vkMapMemory(2)`: what is mapped and where the pointer is written.
#[derive(Clone, Copy)]
pub struct MapMemory {
    pub memory: u64,
    pub offset: u64,
    pub size: u64,
    pub data: *mut *mut c_void,
}

/// How a call on a memory handle goes down: as the application asked (and recorded as such), to
/// the driver with the handle a mode gave (the mode keeps its own record), or not at all (a mode
/// served it; only its result is recorded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Down {
    AsAsked,
    Driver(u64),
    Nothing,
}

/// Flushed or invalidated ranges: `n` at `p`.
#[derive(Clone, Copy)]
pub struct Ranges {
    pub flush: bool,
    pub n: u32,
    pub p: *const vk::MappedMemoryRange<'static>,
}

/// The rest of the call, as the modes inside a mode see it.
pub type Next<'n, A, R> = &'n mut dyn FnMut(A) -> R;

/// One mode of a device: what it does at each event. Every method has a default that changes
/// nothing (observe nothing, pass the call on), so a mode implements only what it follows.
///
/// # Safety
/// The around methods receive descriptions of the application's valid arguments.
pub trait Mode {
    /// Whether the mode reads what recorded commands use ([`Cmd::Uses`]), so a caller that
    /// must allocate to describe them need not when no mode does.
    fn wants_uses(&self) -> bool {
        false
    }

    /// Whether the mode reads descriptor update templates (`state::UpdateTemplate`, recorded at
    /// their creation only when some mode does).
    fn wants_templates(&self) -> bool {
        false
    }

    /// How the mode's double mappings are made on this device from now on (`None`: it makes
    /// none); the first mode in the chassis order that makes them decides.
    fn backing(&self) -> Option<Backing> {
        None
    }

    /// The smallest size of the objects that need a stable key on this device (`None`: the
    /// mode needs none); the first mode in the chassis order that needs keys decides.
    fn key_floor(&self, _dev: &Device) -> Option<u64> {
        None
    }

    /// Before `cmd` goes down.
    ///
    /// # Safety
    /// `cmd` describes the application's valid arguments.
    unsafe fn before(&self, _dev: &Device, _cmd: &Cmd<'_>) {}

    /// After `cmd` went down; `ok`: it succeeded.
    ///
    /// # Safety
    /// As [`Mode::before`].
    unsafe fn after(&self, _dev: &Device, _cmd: &Cmd<'_>, _ok: bool) {}

    /// A buffer copy recorded: `next(c)` records `c` (changed or not) through the modes inside.
    ///
    /// # Safety
    /// `c` describes the application's valid arguments.
    unsafe fn copy<C: BufferCopy>(&self, _dev: &Device, c: C, _told: &Told, next: Next<'_, C, ()>) {
        next(c)
    }

    /// A queue submission: `next(s)` submits `s` (changed or not) through the modes inside.
    ///
    /// # Safety
    /// `s` holds the application's valid batches.
    unsafe fn submit<B: Batch>(
        &self,
        _dev: &Device,
        s: Submission<B>,
        _told: &Told,
        next: Next<'_, Submission<B>, vk::Result>,
    ) -> vk::Result {
        next(s)
    }

    /// `vkCreateBuffer`: `next(c)` creates it (with `c.info` as patched by a mode outside).
    ///
    /// # Safety
    /// `c` describes the application's valid arguments.
    unsafe fn create_buffer(
        &self,
        _dev: &Device,
        c: CreateBuffer,
        next: Next<'_, CreateBuffer, vk::Result>,
    ) -> vk::Result {
        next(c)
    }

    /// `vkDestroyBuffer` of `buffer`: `next(())` destroys it.
    fn destroy_buffer(&self, _dev: &Device, _buffer: u64, next: Next<'_, (), ()>) {
        next(())
    }

    /// Buffer binds: `next(how)` binds (as asked, or one of them elsewhere).
    ///
    /// # Safety
    /// `b` describes the application's valid arguments.
    unsafe fn bind_buffers(
        &self,
        _dev: &Device,
        _b: &BufferBinds<'_>,
        how: BindDown,
        next: Next<'_, BindDown, vk::Result>,
    ) -> vk::Result {
        next(how)
    }

    /// The handle the driver knows for `memory`, made now if the mode had not made it (an
    /// allocation echo left unmade): `None` when the mode does not serve memory handles;
    /// `why` says what needs it.
    fn driver_memory(
        &self,
        _dev: &Device,
        _memory: u64,
        _why: &dyn Fn() -> String,
    ) -> Option<Result<u64, vk::Result>> {
        None
    }

    /// Whether the mode made `memory` at the driver: `Some(Some(real))` under another handle,
    /// `Some(None)` not at all; `None`: not the mode's handle (as asked).
    fn unmade(&self, _memory: u64) -> Option<Option<u64>> {
        None
    }

    /// `vkAllocateMemory`: `next(a)` allocates `a.info` (and records the allocation on
    /// success).
    ///
    /// # Safety
    /// `a` describes the application's valid arguments.
    unsafe fn allocate(
        &self,
        _dev: &Device,
        a: Allocate,
        next: Next<'_, Allocate, vk::Result>,
    ) -> vk::Result {
        next(a)
    }

    /// `vkFreeMemory`: `next(how)` frees it (as asked, the driver's handle, or not at all).
    fn free_memory(&self, _dev: &Device, _f: Free, how: Down, next: Next<'_, Down, ()>) {
        next(how)
    }

    /// `vkMapMemory(2)`: `next(how)` maps it.
    ///
    /// # Safety
    /// `m` describes the application's valid arguments.
    unsafe fn map_memory(
        &self,
        _dev: &Device,
        _m: MapMemory,
        how: Down,
        next: Next<'_, Down, vk::Result>,
    ) -> vk::Result {
        next(how)
    }

    /// `vkUnmapMemory(2)` of `memory`: `next(how)` unmaps it.
    fn unmap_memory(&self, _dev: &Device, _memory: u64, how: Down, next: Next<'_, Down, ()>) {
        next(how)
    }

    /// Flushed or invalidated ranges: `next(r)` passes them (or others) down.
    ///
    /// # Safety
    /// `r` holds the application's valid ranges.
    unsafe fn ranges(
        &self,
        _dev: &Device,
        r: Ranges,
        next: Next<'_, Ranges, vk::Result>,
    ) -> vk::Result {
        next(r)
    }

    /// A host wait: `next(())` waits.
    ///
    /// # Safety
    /// `what` describes the application's valid arguments.
    unsafe fn wait(
        &self,
        _dev: &Device,
        _what: Wait<'_>,
        next: Next<'_, (), vk::Result>,
    ) -> vk::Result {
        next(())
    }
}
