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

/// Platforms whose extensions no Linux driver exposes: their commands are classified but no
/// hook is generated (their parameter types are the platform's own).
pub const NOT_LINUX: &[&str] = &[
    "win32", "android", "fuchsia", "ggp", "vi", "ios", "macos", "metal", "screen", "sci", "ohos",
];
