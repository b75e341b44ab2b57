//! The decisions people make about the registry; everything else is derived from vk.xml.
//!
//! A device-level command *can reach memory* when a type it takes can hold a handle of
//! [`REACH_HANDLES`] or a [`REACH_ADDRESS`] (through structure members and every structure that
//! may extend one in its `pNext` chain), or when it is an action command (`tasks="action"`) that
//! is not in [`NAMES_ONLY`]: such a command runs shaders or other work over whatever is bound to
//! the command buffer (descriptor sets, vertex buffers, shader binding tables …).
//!
//! Every command that can reach memory is **followed** (listed in [`FOLLOWED`], with the file of
//! `layer/src/hooks/` that holds what echo does for it), **inert** (listed in [`INERT`], with the reason it can neither
//! read nor write a buffer's bytes nor make them reachable unseen), or **stepped aside from**:
//! echo hands out a generated hook that records what it names, and the analysis takes those
//! buffers and memory out of every group.
//!
//! **Fail closed** (issue 53): a command that reaches no memory by that rule is marked (a
//! recorded command) or left unhooked (any other) only when every handle type it names — its
//! parameters after the first, and every structure they reach — is on [`REVIEWED_HANDLES`]: types
//! reviewed as unable to change what the GPU reads or writes, each with its reason. A command that
//! names any other handle type (code: `VkPipeline`, `VkShaderEXT`, `VkShaderModule`,
//! `VkPipelineBinaryKHR`; device-generated commands' layouts; whatever a newer `vk.xml` brings) is
//! followed, listed inert with its reason, or stepped aside from — everything it can reach, since
//! echo cannot tell what such a handle does. [`CHANGES_BOUND`] lists the commands that name only
//! reviewed types and still change what bound descriptors mean; every `vkCmdBind*` command is
//! followed, stepped aside from, or reviewed in [`REVIEWED_BINDS`] (a test checks).
//!
//! Images are not a reach type: an image reaches a buffer's bytes only when it is bound over
//! that buffer's memory, and every image bind is followed (the bind itself makes the buffer
//! leave). Device addresses are: a buffer whose address was taken, or that shares bytes with
//! one, is refused by S3, so a command that only carries addresses names nothing new.

/// The commands echo follows, by definition name (every alias is followed alike), with the file
/// of `layer/src/hooks/` that holds each one's behaviour: a function of the command's name taking
/// the call (`hooks/calls_gen.rs`) and the command's parameters. Some cannot reach memory by the
/// registry's rule and are followed for what they tell echo (command buffers begun and reset,
/// pipelines and their shaders, fences waited on, images created).
///
/// To follow a command: add it here, write its behaviour in that file, regenerate
/// (`cargo run -p echo-registry`).
pub const FOLLOWED: &[(&str, &[&str])] = &[
    (
        "memory",
        &[
            "vkAllocateMemory",
            "vkFreeMemory",
            "vkMapMemory",
            "vkUnmapMemory",
            "vkMapMemory2",
            "vkUnmapMemory2",
            "vkFlushMappedMemoryRanges",
            "vkInvalidateMappedMemoryRanges",
            "vkGetDeviceMemoryCommitment",
            "vkGetDeviceMemoryOpaqueCaptureAddress",
            "vkGetMemoryFdKHR",
        ],
    ),
    (
        "buffer",
        &[
            "vkCreateBuffer",
            "vkDestroyBuffer",
            "vkBindBufferMemory",
            "vkBindBufferMemory2",
            "vkGetBufferDeviceAddress",
            "vkGetBufferOpaqueCaptureAddress",
            "vkCreateBufferView",
            "vkDestroyBufferView",
            "vkBindImageMemory",
            "vkBindImageMemory2",
        ],
    ),
    ("image", &["vkCreateImage", "vkDestroyImage"]),
    (
        "command",
        &[
            "vkAllocateCommandBuffers",
            "vkFreeCommandBuffers",
            "vkDestroyCommandPool",
            "vkResetCommandPool",
            "vkBeginCommandBuffer",
            "vkEndCommandBuffer",
            "vkResetCommandBuffer",
            "vkCmdExecuteCommands",
        ],
    ),
    (
        "transfer",
        &[
            "vkCmdCopyBuffer",
            "vkCmdCopyBuffer2",
            "vkCmdFillBuffer",
            "vkCmdUpdateBuffer",
            "vkCmdCopyBufferToImage",
            "vkCmdCopyImageToBuffer",
            "vkCmdCopyBufferToImage2",
            "vkCmdCopyImageToBuffer2",
        ],
    ),
    (
        "draw",
        &[
            "vkCmdBindPipeline",
            "vkCmdBindDescriptorSets",
            "vkCmdBindDescriptorSets2",
            "vkCmdPushDescriptorSet",
            "vkCmdPushDescriptorSet2",
            "vkCmdPushDescriptorSetWithTemplate",
            "vkCmdPushDescriptorSetWithTemplate2",
            "vkCmdBindVertexBuffers",
            "vkCmdBindVertexBuffers2",
            "vkCmdBindIndexBuffer",
            "vkCmdBindIndexBuffer2",
            "vkCmdDispatch",
            "vkCmdDispatchBase",
            "vkCmdDispatchIndirect",
            "vkCmdDraw",
            "vkCmdDrawIndexed",
            "vkCmdDrawIndirect",
            "vkCmdDrawIndexedIndirect",
            "vkCmdDrawIndirectCount",
            "vkCmdDrawIndexedIndirectCount",
            "vkCmdDrawMultiEXT",
            "vkCmdDrawMultiIndexedEXT",
            "vkCmdBindShadersEXT",
        ],
    ),
    (
        "descriptor",
        &[
            "vkUpdateDescriptorSets",
            "vkCreateShaderModule",
            "vkDestroyShaderModule",
            "vkCreateComputePipelines",
            "vkCreateGraphicsPipelines",
            "vkDestroyPipeline",
            "vkCreateShadersEXT",
            "vkDestroyShaderEXT",
            "vkAllocateDescriptorSets",
            "vkCreatePipelineLayout",
            "vkCreateDescriptorSetLayout",
            "vkCreateDescriptorUpdateTemplate",
            "vkDestroyDescriptorUpdateTemplate",
            "vkUpdateDescriptorSetWithTemplate",
        ],
    ),
    (
        "queue",
        &[
            "vkGetDeviceQueue",
            "vkGetDeviceQueue2",
            "vkQueueSubmit",
            "vkQueueSubmit2",
            "vkQueueWaitIdle",
            "vkDeviceWaitIdle",
        ],
    ),
    (
        "sync",
        &[
            "vkWaitForFences",
            "vkGetFenceStatus",
            "vkResetFences",
            "vkWaitSemaphores",
            "vkGetSemaphoreCounterValue",
            "vkSignalSemaphore",
            "vkCmdPipelineBarrier",
            "vkCmdPipelineBarrier2",
            "vkCmdWaitEvents",
            "vkCmdWaitEvents2",
            "vkCmdSetEvent2",
        ],
    ),
];

/// Handles through which a command reaches a buffer's bytes.
pub const REACH_HANDLES: &[&str] = &[
    "VkBuffer",
    "VkBufferView",
    "VkDeviceMemory",
    "VkDescriptorSet",
    // `pData` of a template update is decoded by the template: buffers travel in untyped bytes
    "VkDescriptorUpdateTemplate",
    "VkAccelerationStructureKHR",
    "VkAccelerationStructureNV",
    "VkMicromapEXT",
];

/// Handles an aside hook can name precisely (the others make it step aside from everything).
pub const NAMEABLE: &[&str] = &[
    "VkBuffer",
    "VkBufferView",
    "VkDeviceMemory",
    "VkDescriptorSet",
];

/// The address type.
pub const REACH_ADDRESS: &str = "VkDeviceAddress";

/// Action commands that touch only the objects they name (copies, fills, clears, queries,
/// markers, render-pass boundaries): no bound state. Every other action command reaches what is
/// bound to its command buffer.
pub const NAMES_ONLY: &[&str] = &[
    "vkCmdCopyBuffer",
    "vkCmdCopyBuffer2",
    "vkCmdCopyImage",
    "vkCmdCopyImage2",
    "vkCmdBlitImage",
    "vkCmdBlitImage2",
    "vkCmdResolveImage",
    "vkCmdResolveImage2",
    "vkCmdCopyBufferToImage",
    "vkCmdCopyBufferToImage2",
    "vkCmdCopyImageToBuffer",
    "vkCmdCopyImageToBuffer2",
    "vkCmdUpdateBuffer",
    "vkCmdFillBuffer",
    "vkCmdClearColorImage",
    "vkCmdClearDepthStencilImage",
    "vkCmdClearAttachments",
    "vkCmdBeginQuery",
    "vkCmdEndQuery",
    "vkCmdBeginQueryIndexedEXT",
    "vkCmdEndQueryIndexedEXT",
    "vkCmdResetQueryPool",
    "vkCmdWriteTimestamp",
    "vkCmdWriteTimestamp2",
    "vkCmdCopyQueryPoolResults",
    "vkCmdWriteBufferMarkerAMD",
    "vkCmdWriteBufferMarker2AMD",
    "vkCmdBeginRenderPass",
    "vkCmdBeginRenderPass2",
    "vkCmdNextSubpass",
    "vkCmdNextSubpass2",
    "vkCmdEndRenderPass",
    "vkCmdEndRenderPass2",
    "vkCmdBeginRendering",
    "vkCmdEndRendering",
    "vkCmdEndRendering2KHR",
    "vkCmdSetCheckpointNV",
    "vkCmdEndConditionalRenderingEXT",
    "vkCmdBeginConditionalRenderingEXT",
    "vkCmdBeginConditionalRendering2EXT",
    "vkCmdBeginVideoCodingKHR",
    "vkCmdControlVideoCodingKHR",
    "vkCmdEndVideoCodingKHR",
    "vkCmdCopyMemoryKHR",
    "vkCmdCopyMemoryToImageKHR",
    "vkCmdCopyImageToMemoryKHR",
    "vkCmdUpdateMemoryKHR",
    "vkCmdFillMemoryKHR",
    "vkCmdCopyQueryPoolResultsToMemoryKHR",
    "vkCmdWriteMarkerToMemoryAMD",
    "vkCmdCopyMemoryIndirectNV",
    "vkCmdCopyMemoryIndirectKHR",
    "vkCmdCopyMemoryToImageIndirectNV",
    "vkCmdCopyMemoryToImageIndirectKHR",
    "vkCmdCopyTensorARM",
    "vkCmdSetPerformanceMarkerINTEL",
    "vkCmdSetPerformanceStreamMarkerINTEL",
];

/// Commands that can name a buffer, its memory or a descriptor set but can neither read nor
/// write the bytes, nor make them reachable to something echo does not see — with the reason.
/// None of them may take `VkDeviceMemory` (enforce hands out its own memory handles for
/// allocations it does not make; a test checks).
pub const INERT: &[(&str, &str)] = &[
    (
        "vkGetPipelineExecutablePropertiesKHR",
        "asks for a pipeline's executables and their statistics; runs nothing",
    ),
    (
        "vkGetPipelineExecutableStatisticsKHR",
        "asks for a pipeline's executables and their statistics; runs nothing",
    ),
    (
        "vkGetPipelineExecutableInternalRepresentationsKHR",
        "asks for a pipeline's compiled forms as text or bytes; runs nothing",
    ),
    (
        "vkGetPipelinePropertiesEXT",
        "asks for a pipeline's identifier; runs nothing",
    ),
    (
        "vkGetShaderInfoAMD",
        "asks for a compiled shader's statistics or disassembly; runs nothing",
    ),
    (
        "vkGetShaderBinaryDataEXT",
        "copies a shader object's binary to host memory; runs nothing (a shader made from a binary is unknown code, descriptor.rs)",
    ),
    (
        "vkGetShaderModuleIdentifierEXT",
        "asks for a module's identifier (a pipeline made from an identifier is unknown code, descriptor.rs)",
    ),
    (
        "vkGetRayTracingShaderGroupHandlesKHR",
        "copies shader group handles to host memory; tracing rays is stepped aside from",
    ),
    (
        "vkGetRayTracingCaptureReplayShaderGroupHandlesKHR",
        "copies shader group handles to host memory; tracing rays is stepped aside from",
    ),
    (
        "vkGetRayTracingShaderGroupStackSizeKHR",
        "asks for a stack size; tracing rays is stepped aside from",
    ),
    (
        "vkCreatePipelineBinariesKHR",
        "makes binaries from a pipeline or a key; a pipeline made from binaries is unknown code (descriptor.rs)",
    ),
    (
        "vkGetPipelineBinaryDataKHR",
        "copies a pipeline binary to host memory; runs nothing",
    ),
    (
        "vkDestroyPipelineBinaryKHR",
        "destroys a pipeline binary; pipelines made from it are unknown code already",
    ),
    (
        "vkReleaseCapturedPipelineDataKHR",
        "releases the data a pipeline kept for vkCreatePipelineBinariesKHR; runs nothing",
    ),
    (
        "vkGetGeneratedCommandsMemoryRequirementsEXT",
        "asks for the size of preprocess memory; executing generated commands is stepped aside from",
    ),
    (
        "vkGetGeneratedCommandsMemoryRequirementsNV",
        "asks for the size of preprocess memory; executing generated commands is stepped aside from",
    ),
    (
        "vkGetExecutionGraphPipelineScratchSizeAMDX",
        "asks for a scratch size; dispatching a graph is stepped aside from",
    ),
    (
        "vkGetExecutionGraphPipelineNodeIndexAMDX",
        "asks for a node index; dispatching a graph is stepped aside from",
    ),
    (
        "vkGetBufferMemoryRequirements",
        "asks the driver for a buffer's size and alignment needs; touches no bytes and needs no memory bound",
    ),
    (
        "vkGetBufferMemoryRequirements2",
        "asks the driver for a buffer's size and alignment needs; touches no bytes and needs no memory bound",
    ),
    (
        "vkGetDeviceBufferMemoryRequirements",
        "asks for the needs of a buffer described by a create info; names no buffer",
    ),
    (
        "vkFreeDescriptorSets",
        "frees descriptor sets; a freed set can no longer be bound, and echo forgets its contents when the handle is allocated again",
    ),
    (
        "vkGetAccelerationStructureBuildSizesKHR",
        "asks for build sizes from a geometry description; no buffer is read or written",
    ),
    (
        "vkGetMicromapBuildSizesEXT",
        "asks for build sizes from a description; no buffer is read or written",
    ),
    (
        "vkQueuePresentKHR",
        "presents swapchain images; the only buffers it can name are those of VkFrameBoundaryEXT, a hint for capture tools that reads and writes no bytes",
    ),
];

/// Handle types reviewed as unable to change what the GPU reads or writes of a buffer's bytes,
/// with the reason. A command naming only these (after its first parameter, and through every
/// structure it reaches) and no [`REACH_HANDLES`] is marked or left unhooked; any other handle
/// type makes a command followed, inert or stepped aside from (see the module's documentation).
/// A handle type missing here is unknown, and unknown fails closed.
pub const REVIEWED_HANDLES: &[(&str, &str)] = &[
    ("VkInstance", "the instance: names no GPU work"),
    ("VkPhysicalDevice", "a physical device: names no GPU work"),
    ("VkDevice", "the device every command belongs to: names no GPU work by itself"),
    (
        "VkFence",
        "a completion signal for the host; waits on it are followed where they end a window (vkWaitForFences, vkGetFenceStatus)",
    ),
    (
        "VkSemaphore",
        "orders submissions echo follows; it carries no bytes (its waits and signals are followed: vkWaitSemaphores, vkSignalSemaphore)",
    ),
    (
        "VkEvent",
        "orders work inside the queue; recorded sets and waits are followed or marked, and an event carries no bytes",
    ),
    (
        "VkQueryPool",
        "query results reach a buffer only through vkCmdCopyQueryPoolResults, which names the buffer",
    ),
    (
        "VkImage",
        "an image reaches a buffer's bytes only when bound over its memory, and every image bind is followed",
    ),
    ("VkImageView", "a view of an image (see VkImage)"),
    ("VkSampler", "sampling state: no bytes of its own"),
    ("VkSamplerYcbcrConversion", "sampling state: no bytes of its own"),
    ("VkRenderPass", "attachments are images (see VkImage)"),
    ("VkFramebuffer", "attachments are image views (see VkImage)"),
    (
        "VkPipelineCache",
        "compiled code keyed by a create info whose stages echo reads; a pipeline made through it still names its code",
    ),
    (
        "VkPipelineLayout",
        "the shape of what is bound (set layouts, push-constant ranges), not the code nor the buffers",
    ),
    (
        "VkDescriptorSetLayout",
        "the shape of a set (its flags are read at vkCreateDescriptorSetLayout, which is followed)",
    ),
    (
        "VkDescriptorPool",
        "sets are allocated from it (followed); resetting it frees its sets, which can then not be bound, and a recycled set handle starts empty",
    ),
    (
        "VkCommandPool",
        "command buffers come from it; resetting and destroying it are followed, trimming frees no recorded work",
    ),
    ("VkSurfaceKHR", "a window-system surface: presentation images are images"),
    ("VkSwapchainKHR", "presentation images are images (see VkImage)"),
    ("VkDisplayKHR", "a display: no GPU work"),
    ("VkDisplayModeKHR", "a display mode: no GPU work"),
    ("VkDebugUtilsMessengerEXT", "a debug callback: no GPU work"),
    ("VkDebugReportCallbackEXT", "a debug callback: no GPU work"),
    ("VkValidationCacheEXT", "the validation layer's cache: no GPU work"),
    ("VkPrivateDataSlot", "application data attached to a handle on the host: no GPU work"),
    (
        "VkDeferredOperationKHR",
        "a host-side handle for deferred work; the commands that defer name what they build (acceleration structures, ray-tracing pipelines), and those are followed or stepped aside from",
    ),
    (
        "VkPerformanceConfigurationINTEL",
        "a performance-counter configuration: no bytes of a buffer",
    ),
];

/// Commands that name only [`REVIEWED_HANDLES`] (or nothing) and still change what the bound
/// descriptors or code of a command buffer mean: stepped aside from (everything) until followed.
pub const CHANGES_BOUND: &[(&str, &str)] = &[
    (
        "vkCmdSetDescriptorBufferOffsetsEXT",
        "points bound sets at other descriptors inside descriptor buffers, naming no buffer",
    ),
    (
        "vkCmdSetDescriptorBufferOffsets2EXT",
        "points bound sets at other descriptors inside descriptor buffers, naming no buffer",
    ),
];

/// `vkCmdBind*` commands that are neither followed nor stepped aside from, reviewed: what they
/// bind cannot change which buffer bytes the GPU reads or writes.
pub const REVIEWED_BINDS: &[(&str, &str)] = &[
    (
        "vkCmdBindDescriptorBufferEmbeddedSamplersEXT",
        "binds immutable samplers: sampling state, no buffer",
    ),
    (
        "vkCmdBindDescriptorBufferEmbeddedSamplers2EXT",
        "binds immutable samplers: sampling state, no buffer",
    ),
    (
        "vkCmdBindShadingRateImageNV",
        "binds an image view as the shading-rate image (see VkImage)",
    ),
    (
        "vkCmdBindInvocationMaskHUAWEI",
        "binds an image view as the invocation mask (see VkImage)",
    ),
];

/// Platforms whose extensions no Linux driver exposes: their commands are classified but no
/// hook is generated (their parameter types are the platform's own).
pub const NOT_LINUX: &[&str] = &[
    "win32", "android", "fuchsia", "ggp", "vi", "ios", "macos", "metal", "screen", "sci", "ohos",
];
