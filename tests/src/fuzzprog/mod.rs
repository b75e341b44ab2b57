//! Random legal Vulkan programs (issue 45): the program language, its validity model, the
//! generator and the shrinker. `echo-fuzzprog` (tests/src/bin/echo-fuzzprog/) runs them with
//! ash and compares echo's modes against no layer; docs/fuzzing-programs.md tells how.
//!
//! A program is a flat list of [`Op`]s over small integer ids (memories, buffers, images, views,
//! descriptor sets, command buffers, fences, semaphores). Recorded command buffers hold
//! [`Cmd`]s. [`model::Model`] says whether an op is valid where it stands (every id alive,
//! bound, every GPU→GPU dependency covered by a barrier or semaphore, host accesses only after
//! the wait that completes the GPU work touching the same bytes, reads only of defined bytes);
//! the generator only emits ops the model accepts, and [`model::repair`] drops the ops of any
//! sub-list that have become invalid, so that shrinking (delta debugging over the op list,
//! [`shrink`]) only ever runs valid programs.

pub mod gen;
pub mod model;
pub mod rng;
pub mod shrink;
pub mod sync;

use serde::{Deserialize, Serialize};

/// What the device offers that the generator may use (`echo-fuzzprog caps` prints it).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// `VK_KHR_push_descriptor`.
    pub push_descriptor: bool,
    /// `descriptorBindingStorageBufferUpdateAfterBind`.
    pub uab_storage: bool,
    /// `bufferDeviceAddress`.
    pub device_address: bool,
    /// Memory requirements of the one image shape ([`IMAGE_W`]×[`IMAGE_H`], R32_UINT, optimal).
    pub image_size: u64,
    pub image_align: u64,
    /// `VK_KHR_map_memory2` (core in Vulkan 1.4): vkMapMemory2 / vkUnmapMemory2.
    #[serde(default)]
    pub map2: bool,
    /// `VK_KHR_maintenance6` (core in Vulkan 1.4): vkCmdBindDescriptorSets2,
    /// vkCmdPushDescriptorSet2, ...WithTemplate2, vkCmdPushConstants2.
    #[serde(default)]
    pub maint6: bool,
    /// `descriptorBindingPartiallyBound`: update-after-bind sets whose bindings are also
    /// `PARTIALLY_BOUND`.
    #[serde(default)]
    pub partially_bound: bool,
    /// `VK_EXT_shader_object` (`shaderObject`): kernels bound as shader objects.
    #[serde(default)]
    pub shader_object: bool,
    /// Draws: a graphics queue, dynamic rendering and `vertexPipelineStoresAndAtomics` (vertex
    /// shaders that read and write storage buffers).
    #[serde(default)]
    pub draw: bool,
    /// `VK_EXT_graphics_pipeline_library` (`graphicsPipelineLibrary`): draws through a pipeline
    /// linked from a pre-rasterization library and the link's own fragment shader.
    #[serde(default)]
    pub gpl: bool,
    /// Timestamps on the queue (`timestampValidBits` > 0): vkCmdWriteTimestamp and
    /// vkCmdCopyQueryPoolResults.
    #[serde(default)]
    pub timestamps: bool,
}

/// Every offset of a buffer in memory, of a descriptor range and of a texel view is a multiple
/// of this (≥ every driver's alignments here: lavapipe 16, SwiftShader 256).
pub const ALIGN: u64 = 256;
/// The one image shape: R32_UINT, optimal tiling, transfer source and destination.
pub const IMAGE_W: u32 = 32;
pub const IMAGE_H: u32 = 32;
/// Bytes of the image's texels in a buffer (tightly packed).
pub const IMAGE_BYTES: u64 = (IMAGE_W * IMAGE_H * 4) as u64;
/// Bytes a uniform binding covers (the shader's `uvec4 u[16]`).
pub const UNIFORM_BYTES: u64 = 256;
/// Invocations per workgroup of every kernel.
pub const LOCAL: u32 = 64;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Program {
    pub seed: u64,
    pub caps: Caps,
    pub ops: Vec<Op>,
}

/// Buffer usage, Vulkan's bits.
pub mod usage {
    pub const SRC: u32 = 0x1;
    pub const DST: u32 = 0x2;
    pub const UNIFORM_TEXEL: u32 = 0x4;
    pub const STORAGE_TEXEL: u32 = 0x8;
    pub const UNIFORM: u32 = 0x10;
    pub const STORAGE: u32 = 0x20;
    pub const INDIRECT: u32 = 0x100;
    pub const ADDRESS: u32 = 0x20000;
}

/// Pipeline stages and access masks, Vulkan's (1.0) bits; synchronization2 takes the same
/// values in its 64-bit masks.
pub mod stage {
    pub const DRAW_INDIRECT: u64 = 0x2;
    pub const VERTEX_SHADER: u64 = 0x8;
    pub const COMPUTE: u64 = 0x800;
    pub const TRANSFER: u64 = 0x1000;
    pub const HOST: u64 = 0x4000;
    pub const ALL_COMMANDS: u64 = 0x10000;
}
pub mod access {
    pub const INDIRECT_READ: u64 = 0x1;
    pub const UNIFORM_READ: u64 = 0x8;
    pub const SHADER_READ: u64 = 0x20;
    pub const SHADER_WRITE: u64 = 0x40;
    pub const TRANSFER_READ: u64 = 0x800;
    pub const TRANSFER_WRITE: u64 = 0x1000;
    pub const HOST_READ: u64 = 0x2000;
    pub const HOST_WRITE: u64 = 0x4000;
    pub const MEMORY_READ: u64 = 0x8000;
    pub const MEMORY_WRITE: u64 = 0x10000;
}

/// The compute kernels (tests/shaders/fz_*.comp), each `local_size_x = 64`, push constants
/// `n` (elements) and `k`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Kernel {
    /// binding 0 storage (read), 1 storage (write): `dst[i] = src[i]*3 + k + i`.
    Xform,
    /// binding 0 storage (read-write): `a[i] = a[i]*5 + k`.
    Inplace,
    /// binding 0 uniform (256 bytes, read), 1 storage (read-write): `dst[i] ^= f(u[i%16]) + k`.
    Uniform,
    /// binding 0 uniform texel buffer (read), 1 storage texel buffer (write), views R32_UINT.
    Texel,
    /// no descriptors: device addresses of `src` and `dst` in push constants.
    Addr,
}

impl Kernel {
    pub const ALL: [Kernel; 5] = [
        Kernel::Xform,
        Kernel::Inplace,
        Kernel::Uniform,
        Kernel::Texel,
        Kernel::Addr,
    ];
    /// The descriptor types of its bindings (Vulkan's values).
    pub fn bindings(self) -> &'static [Binding] {
        match self {
            Kernel::Xform => &[Binding::StorageRead, Binding::StorageWrite],
            Kernel::Inplace => &[Binding::StorageRw],
            Kernel::Uniform => &[Binding::Uniform, Binding::StorageRw],
            Kernel::Texel => &[Binding::UniformTexel, Binding::StorageTexel],
            Kernel::Addr => &[],
        }
    }
}

/// One binding of a kernel and how the kernel uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    StorageRead,
    StorageWrite,
    StorageRw,
    Uniform,
    UniformTexel,
    StorageTexel,
}

impl Binding {
    /// The buffer usage bit it needs.
    pub fn usage(self) -> u32 {
        match self {
            Binding::StorageRead | Binding::StorageWrite | Binding::StorageRw => usage::STORAGE,
            Binding::Uniform => usage::UNIFORM,
            Binding::UniformTexel => usage::UNIFORM_TEXEL,
            Binding::StorageTexel => usage::STORAGE_TEXEL,
        }
    }
    pub fn texel(self) -> bool {
        matches!(self, Binding::UniformTexel | Binding::StorageTexel)
    }
    pub fn reads(self) -> bool {
        !matches!(self, Binding::StorageWrite | Binding::StorageTexel)
    }
    pub fn writes(self) -> bool {
        matches!(
            self,
            Binding::StorageWrite | Binding::StorageRw | Binding::StorageTexel
        )
    }
    pub fn access(self) -> (u64, u64) {
        match self {
            Binding::Uniform => (access::UNIFORM_READ, 0),
            _ => (
                if self.reads() { access::SHADER_READ } else { 0 },
                if self.writes() {
                    access::SHADER_WRITE
                } else {
                    0
                },
            ),
        }
    }
}

/// What a descriptor names: a buffer range, or a texel view.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Res {
    Buf { buf: u32, offset: u64, range: u64 },
    View { view: u32 },
}

/// How a dispatch gets its descriptors.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Desc {
    /// A descriptor set (vkCmdBindDescriptorSets).
    Set { set: u32 },
    /// vkCmdPushDescriptorSetKHR, or ...WithTemplateKHR.
    Push { res: Vec<Res>, template: bool },
    /// Device addresses of two buffers in push constants (kernel `addr`).
    Addr { src: u32, dst: u32 },
}

/// A semaphore named by a submission: binary (`value` 0) or timeline.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct SemRef {
    pub sem: u32,
    pub value: u64,
    /// Wait: the stages that wait (signal: ignored).
    pub stage: u64,
}

/// Host-level operations.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// vkAllocateMemory (the one host-visible type); `dedicated`: VkMemoryDedicatedAllocateInfo
    /// for that buffer; `address`: VkMemoryAllocateFlagsInfo(DEVICE_ADDRESS).
    Alloc {
        mem: u32,
        size: u64,
        dedicated: Option<u32>,
        address: bool,
    },
    Free {
        mem: u32,
    },
    /// vkCreateBuffer.
    Buffer {
        buf: u32,
        size: u64,
        usage: u32,
    },
    /// vkBindBufferMemory (or vkBindBufferMemory2).
    Bind {
        buf: u32,
        mem: u32,
        offset: u64,
        v2: bool,
    },
    Destroy {
        buf: u32,
    },
    /// vkCreateImage: the one shape (IMAGE_W×IMAGE_H R32_UINT, optimal).
    Image {
        img: u32,
    },
    /// vkBindImageMemory (or ...2).
    BindImage {
        img: u32,
        mem: u32,
        offset: u64,
        v2: bool,
    },
    DestroyImage {
        img: u32,
    },
    /// vkCreateBufferView (R32_UINT).
    View {
        view: u32,
        buf: u32,
        offset: u64,
        range: u64,
    },
    DestroyView {
        view: u32,
    },
    /// vkMapMemory of the whole allocation, kept until Unmap (a persistent map).
    Map {
        mem: u32,
        /// vkMapMemory2KHR.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        v2: bool,
    },
    /// vkUnmapMemory (or vkUnmapMemory2KHR) of a persistent map; later host accesses map for
    /// their own use.
    Unmap {
        mem: u32,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        v2: bool,
    },
    /// The host writes `len` bytes at `offset` of the memory (a pattern from `val`): through the
    /// persistent map, or mapped for this write only.
    Write {
        mem: u32,
        offset: u64,
        len: u64,
        val: u32,
    },
    /// The host writes a VkDispatchIndirectCommand `{groups, 1, 1}` at `offset`.
    WriteIndirect {
        mem: u32,
        offset: u64,
        groups: u32,
    },
    /// The host reads `len` bytes at `offset`: one hash line of the output.
    Read {
        mem: u32,
        offset: u64,
        len: u64,
    },
    /// vkFlushMappedMemoryRanges / vkInvalidateMappedMemoryRanges (whole, while mapped).
    Flush {
        mem: u32,
    },
    Invalidate {
        mem: u32,
    },
    /// vkAllocateDescriptorSets for `kernel`'s layout (update-after-bind or not; `partial`:
    /// its update-after-bind bindings also `PARTIALLY_BOUND`).
    Set {
        set: u32,
        kernel: Kernel,
        uab: bool,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        partial: bool,
        /// Its layout is for the vertex stage (a draw's set), not the compute stage.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        vertex: bool,
    },
    /// vkUpdateDescriptorSets (or vkUpdateDescriptorSetWithTemplate): every binding.
    WriteSet {
        set: u32,
        res: Vec<Res>,
        template: bool,
    },
    /// Records command buffer `cb` (allocated at its first use, reset by a later record).
    Record {
        cb: u32,
        cmds: Vec<Cmd>,
        /// Runs `[start, end)` of `cmds` recorded into secondary command buffers, each executed
        /// (vkCmdExecuteCommands) where its run stands; sorted, disjoint, without barriers
        /// (the validation layer of Debian 12 did not apply a barrier recorded in a secondary to
        /// accesses before it) or image layout changes.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        secondary: Vec<[usize; 2]>,
    },
    /// vkQueueSubmit (or vkQueueSubmit2): one batch.
    Submit {
        cbs: Vec<u32>,
        fence: Option<u32>,
        wait: Vec<SemRef>,
        signal: Vec<SemRef>,
        v2: bool,
    },
    Fence {
        fence: u32,
    },
    Semaphore {
        sem: u32,
        timeline: bool,
    },
    WaitFence {
        fence: u32,
    },
    ResetFence {
        fence: u32,
    },
    /// vkWaitSemaphores on a timeline semaphore.
    WaitSem {
        sem: u32,
        value: u64,
    },
    QueueIdle,
    DeviceIdle,
}

/// Recorded commands.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Cmd {
    /// vkCmdCopyBuffer (or ...2): regions `[src_offset, dst_offset, size]`.
    Copy {
        src: u32,
        dst: u32,
        regions: Vec<[u64; 3]>,
        v2: bool,
    },
    Fill {
        buf: u32,
        offset: u64,
        size: u64,
        val: u32,
    },
    /// vkCmdUpdateBuffer with a pattern from `val`.
    Update {
        buf: u32,
        offset: u64,
        size: u64,
        val: u32,
    },
    /// Layout UNDEFINED → GENERAL (an image barrier); discards the image's texels.
    ImageInit { img: u32 },
    /// vkCmdClearColorImage (GENERAL) with `val` in every texel: a command echo only marks,
    /// writing the image's memory.
    ClearImage { img: u32, val: u32 },
    /// vkCmdResetQueryPool, vkCmdWriteTimestamp (or ...2) and vkCmdCopyQueryPoolResults of
    /// that timestamp (8 bytes, waiting) to `(buf, offset)`: echo steps aside from the buffer
    /// (the bytes are undefined: a time).
    QueryCopy { buf: u32, offset: u64, v2: bool },
    /// vkCmdPushConstants with no dispatch after it (a command echo only marks).
    PushConstants { val: u32 },
    /// vkCmdCopyBufferToImage (or ...2), the whole image from `offset`.
    ToImage {
        buf: u32,
        offset: u64,
        img: u32,
        v2: bool,
    },
    /// vkCmdCopyImageToBuffer (or ...2), the whole image to `offset`.
    FromImage {
        img: u32,
        buf: u32,
        offset: u64,
        v2: bool,
    },
    /// vkCmdPipelineBarrier (or ...2): a global memory barrier, or a buffer memory barrier over
    /// the whole buffer.
    Barrier {
        v2: bool,
        /// Through an event instead: vkCmdSetEvent (or ...2) then at once vkCmdWaitEvents (or
        /// ...2) with this barrier and vkCmdResetEvent (or ...2) after it, on an event of the
        /// command buffer — the same dependency.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        event: bool,
        buf: Option<u32>,
        src_stage: u64,
        src_access: u64,
        dst_stage: u64,
        dst_access: u64,
    },
    /// Bind `kernel`'s pipeline and descriptors, push `n`, `k`, then vkCmdDispatch (base:
    /// vkCmdDispatchBase; indirect: vkCmdDispatchIndirect at `(buf, offset)`).
    Dispatch {
        kernel: Kernel,
        desc: Desc,
        groups: u32,
        base: u32,
        indirect: Option<(u32, u64)>,
        n: u32,
        k: u32,
        /// Descriptors and push constants through VK_KHR_maintenance6's `...2` commands.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        bind2: bool,
        /// How the kernel's code is bound (a pipeline, or a shader object).
        #[serde(default, skip_serializing_if = "Code::is_pipeline")]
        code: Code,
        /// Not a dispatch but a draw (kernels `xform` and `inplace` as vertex shaders: `groups`
        /// points from vertex `base`, each vertex doing what a workgroup does), in a rendering
        /// without attachments.
        #[serde(default, skip_serializing_if = "Draw::is_none")]
        draw: Draw,
    },
}

/// How a dispatch binds its kernel's code (VK_EXT_shader_object: binding a shader object to
/// the compute stage and binding a compute pipeline each replace the other).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Code {
    /// vkCmdBindPipeline.
    #[default]
    Pipeline,
    /// vkCmdBindShadersEXT: the kernel as a shader object (vkCreateShadersEXT, SPIR-V).
    Object,
    /// The pipeline of another kernel bound first, then the shader object: the object runs.
    PipelineThenObject,
    /// The shader object of another kernel bound first, then the pipeline: the pipeline runs.
    ObjectThenPipeline,
    /// The shader object, and after the dispatch a null shader bound to the compute stage.
    ObjectUnbind,
}

impl Code {
    pub fn is_pipeline(&self) -> bool {
        *self == Code::Pipeline
    }
    pub fn needs_shader_object(&self) -> bool {
        !self.is_pipeline()
    }
}

/// Whether a [`Cmd::Dispatch`] is a draw, and through which pipeline.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Draw {
    /// A dispatch.
    #[default]
    None,
    /// vkCmdDraw with one graphics pipeline (vertex and fragment shader in its pStages).
    Monolithic,
    /// vkCmdDraw with a pipeline linked from a pre-rasterization library (the vertex shader)
    /// and its own pStages (the fragment shader): VK_EXT_graphics_pipeline_library.
    Library,
}

impl Draw {
    pub fn is_none(&self) -> bool {
        *self == Draw::None
    }
}

/// The secondary runs of a command list after keeping only the commands where `kept(j)`: each
/// run over what is left of it, dropped when nothing is.
pub fn kept_runs(runs: &[[usize; 2]], kept: impl Fn(usize) -> bool) -> Vec<[usize; 2]> {
    let before = |x: usize| (0..x).filter(|&j| kept(j)).count();
    runs.iter()
        .filter_map(|&[a, b]| {
            let (na, nb) = (before(a), before(b));
            (nb > na).then_some([na, nb])
        })
        .collect()
}

impl Program {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a program serializes")
    }
    pub fn from_json(text: &str) -> Result<Program, String> {
        serde_json::from_str(text).map_err(|e| format!("not a program: {e}"))
    }
    /// Ops plus recorded commands: the size shrinking reduces.
    pub fn size(&self) -> usize {
        self.ops
            .iter()
            .map(|o| match o {
                Op::Record { cmds, .. } => 1 + cmds.len(),
                _ => 1,
            })
            .sum()
    }
}

/// The bytes a host write of `val` puts at byte `offset` (a multiple of 4) of the memory.
pub fn pattern(val: u32, offset: u64) -> u32 {
    let w = (offset / 4) as u32;
    (val ^ w.wrapping_mul(0x9e37_79b1)).rotate_left(w % 31) ^ 0x5bd1_e995
}

/// FNV-1a, 64 bits: the hash of each host read and of the whole output.
pub fn fnv(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests;
