/* (issue 23) c_deferred_ref early|late [ROUNDS]: a device buffer referenced in a recorded command buffer
 * BEFORE its readback partner exists (wgpu's pattern: create_buffer_with_data records the copy
 * into the device buffer and a barrier on it in its pending-writes command buffer; the MAP_READ
 * readback buffer is made later). Device buffers s (source, filled on the GPU) and d, each in its
 * own allocation; command buffer A fills s, copies s -> d and records a barrier on d. Only then
 * is the readback buffer r created, sub-allocated in one host-visible block next to a small
 * buffer x (so r's memory is not r's alone: a plan binds d into r's range, not r into d's);
 * command buffer B copies d -> r. Each round submits A and B, waits, folds r into a checksum.
 *
 * A plan that groups (r, d) binds d into r's memory, so enforce holds d's bind back until r is
 * bound, after A was recorded: A's copy and barrier would name a buffer with no memory bound
 * (VUID-vkCmdCopyBuffer-dstBuffer-00121, VUID-VkBufferMemoryBarrier-buffer-01931), which
 * lavapipe forgives and most drivers do not.
 *
 * `late` is the twin that records A only after r is bound (same buffers, same creation sites, so
 * the same buffer keys): its plan's group is fine, and forced onto `early` it shows the layer's
 * backstop (a held-back bind happens at the first command that names the buffer).
 *
 * gate-args: early 3
 * gate-args: late 3
 */
#include "common.h"

/* A: fill s on the GPU, copy s -> d, with barriers on d before and after. */
static void record_a(VkCommandBuffer cmd, const struct buffer *s, const struct buffer *d)
{
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    const VkPipelineStageFlags xfer = VK_PIPELINE_STAGE_TRANSFER_BIT;
    VkBufferCopy region = {0, 0, s->size};
    CHECK(vkBeginCommandBuffer(cmd, &bi));
    buffer_barrier(cmd, d->buf, VK_ACCESS_TRANSFER_READ_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, xfer,
                   xfer);
    vkCmdFillBuffer(cmd, s->buf, 0, s->size, 0x5eed1234u);
    buffer_barrier(cmd, s->buf, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_TRANSFER_READ_BIT, xfer,
                   xfer);
    vkCmdCopyBuffer(cmd, s->buf, d->buf, 1, &region);
    buffer_barrier(cmd, d->buf, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_TRANSFER_READ_BIT, xfer,
                   xfer);
    CHECK(vkEndCommandBuffer(cmd));
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "early") != 0 && strcmp(argv[1], "late") != 0)) {
        fprintf(stderr, "usage: c_deferred_ref early|late [ROUNDS]\n");
        return 1;
    }
    int early = strcmp(argv[1], "early") == 0;
    uint32_t rounds = argc > 2 ? parse_iters(argv[2]) : 3;
    VkInstance inst = create_instance(VK_API_VERSION_1_0, NULL, 0, NULL, 0, NULL);
    struct gpu g = gpu_create(inst);
    const VkDeviceSize size = 1 * MIB;
    const VkBufferUsageFlags src = VK_BUFFER_USAGE_TRANSFER_SRC_BIT;
    const VkBufferUsageFlags dst = VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    struct buffer s = buffer_create(&g, size, src | dst, MEM_DEVICE);
    struct buffer d = buffer_create(&g, size, src | dst, MEM_DEVICE);

    struct cmds cb = cmds_create(&g, 2);
    VkCommandBuffer *cmd = cb.cmd;
    VkFence fence = cb.fence;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    const VkPipelineStageFlags xfer = VK_PIPELINE_STAGE_TRANSFER_BIT;
    VkBufferCopy region = {0, 0, size};

    if (early) /* A recorded while d's readback partner does not exist yet */
        record_a(cmd[0], &s, &d);
    /* The readback buffer r, sub-allocated next to x in one mapped block. */
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = dst,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkBuffer r, x;
    CHECK(vkCreateBuffer(g.dev, &bci, NULL, &r));
    bci.size = 64 * 1024;
    CHECK(vkCreateBuffer(g.dev, &bci, NULL, &x));
    VkMemoryRequirements rr, rx, rd;
    vkGetBufferMemoryRequirements(g.dev, r, &rr);
    vkGetBufferMemoryRequirements(g.dev, x, &rx);
    vkGetBufferMemoryRequirements(g.dev, d.buf, &rd);
    VkDeviceSize al = rr.alignment > rx.alignment ? rr.alignment : rx.alignment;
    if (rd.alignment > al)
        al = rd.alignment;
    VkDeviceSize o_x = (rr.size + al - 1) / al * al;
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = o_x + rx.size,
        .memoryTypeIndex = find_memory_type(&g, rr.memoryTypeBits & rx.memoryTypeBits, MEM_READBACK),
    };
    VkDeviceMemory block;
    CHECK(vkAllocateMemory(g.dev, &ai, NULL, &block));
    CHECK(vkBindBufferMemory(g.dev, r, block, 0));
    CHECK(vkBindBufferMemory(g.dev, x, block, o_x));
    uint8_t *p;
    CHECK(vkMapMemory(g.dev, block, 0, VK_WHOLE_SIZE, 0, (void **)&p));

    if (!early)
        record_a(cmd[0], &s, &d);
    /* B: d -> r, then the host reads r. */
    CHECK(vkBeginCommandBuffer(cmd[1], &bi));
    vkCmdCopyBuffer(cmd[1], d.buf, r, 1, &region);
    buffer_barrier(cmd[1], r, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT, xfer,
                   VK_PIPELINE_STAGE_HOST_BIT);
    CHECK(vkEndCommandBuffer(cmd[1]));

    uint64_t h = FNV_OFFSET;
    for (uint32_t i = 0; i < rounds; i++) {
        VkSubmitInfo si = {
            .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
            .commandBufferCount = 2,
            .pCommandBuffers = cmd,
        };
        CHECK(vkResetFences(g.dev, 1, &fence));
        CHECK(vkQueueSubmit(g.queue, 1, &si, fence));
        CHECK(vkWaitForFences(g.dev, 1, &fence, VK_TRUE, UINT64_MAX));
        h = fnv1a(h, p, (size_t)size);
    }
    printf("rounds %u\nchecksum %016llx\n", rounds, (unsigned long long)h);
    vkUnmapMemory(g.dev, block);
    cmds_destroy(&g, &cb);
    vkDestroyBuffer(g.dev, r, NULL);
    vkDestroyBuffer(g.dev, x, NULL);
    vkFreeMemory(g.dev, block, NULL);
    buffer_destroy(&g, &s);
    buffer_destroy(&g, &d);
    vkDestroyDevice(g.dev, NULL);
    vkDestroyInstance(inst, NULL);
    return 0;
}
