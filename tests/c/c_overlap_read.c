/* (issue 22) c_overlap_read ITERS K [once]: a persistent readback pair in which, in iteration K
 * only, the host also reads the staging buffer while the GPU works (Kompute's evalAsync /
 * evalAwait, a program that logs an intermediate result once). K = 0: never.
 *
 * Device buffer d (DEVICE_LOCAL) is filled by the GPU, then copied into the mapped readback
 * buffer r, and the host folds r after the fence. In iteration K the host also folds r between
 * the fill (event e1, set by the GPU) and the copy (which waits on event e2, set by the host):
 * without aliasing that read sees the previous iteration's result, legally. A layer that shares
 * d's and r's memory makes it see the new one, so the "early" checksum changes.
 *
 * `once`: the command buffer is recorded once and submitted ITERS times (the same fill value in
 * every iteration): bytes elided must count submissions, not recordings.
 * Prints "checksum <hex> early <hex>".
 *
 * gate-args: 4 0
 * gate-args: 4 3
 * gate-args: 4 0 once */
#include "common.h"

#define SIZE (4 * MIB)

static void record(VkCommandBuffer cmd, VkBuffer d, VkBuffer r, VkEvent e1, VkEvent e2,
                   uint32_t value, int once)
{
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = once ? 0 : VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    CHECK(vkResetCommandBuffer(cmd, 0));
    CHECK(vkBeginCommandBuffer(cmd, &bi));
    vkCmdFillBuffer(cmd, d, 0, SIZE, value);
    buffer_barrier(cmd, d, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_TRANSFER_READ_BIT,
                   VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT);
    vkCmdSetEvent(cmd, e1, VK_PIPELINE_STAGE_TRANSFER_BIT);
    /* The host's early read of r (between e1 and e2) happens before the copy writes r. */
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_HOST_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    vkCmdWaitEvents(cmd, 1, &e2, VK_PIPELINE_STAGE_HOST_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 1,
                    &mb, 0, NULL, 0, NULL);
    const VkBufferCopy region = {0, 0, SIZE};
    vkCmdCopyBuffer(cmd, d, r, 1, &region);
    buffer_barrier(cmd, r, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT,
                   VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT);
    CHECK(vkEndCommandBuffer(cmd));
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: c_overlap_read ITERS K [once]\n");
        return 1;
    }
    const uint32_t iters = parse_iters(argv[1]);
    const long k = strtol(argv[2], NULL, 10);
    const int once = argc > 3 && strcmp(argv[3], "once") == 0;
    VkInstance inst = create_instance(VK_API_VERSION_1_1, NULL, 0, NULL, 0, NULL);
    struct gpu g = gpu_create(inst);

    struct buffer d = buffer_create(&g, SIZE,
                                    VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                        VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                    MEM_DEVICE);
    struct buffer r = buffer_create(&g, SIZE, VK_BUFFER_USAGE_TRANSFER_DST_BIT, MEM_READBACK);
    uint8_t *p;
    CHECK(vkMapMemory(g.dev, r.mem, 0, VK_WHOLE_SIZE, 0, (void **)&p));
    memset(p, 0x5a, (size_t)SIZE); /* r's first "previous result" */

    struct cmds cb = cmds_create(&g, 1);
    VkCommandBuffer cmd = cb.cmd[0];
    VkFence fence = cb.fence;
    VkEventCreateInfo eci = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
    VkEvent e1, e2;
    CHECK(vkCreateEvent(g.dev, &eci, NULL, &e1));
    CHECK(vkCreateEvent(g.dev, &eci, NULL, &e2));

    if (once)
        record(cmd, d.buf, r.buf, e1, e2, 0x01010101u, 1);
    uint64_t checksum = FNV_OFFSET, early = FNV_OFFSET;
    for (uint32_t i = 1; i <= iters; i++) {
        CHECK(vkResetEvent(g.dev, e1));
        CHECK(vkResetEvent(g.dev, e2));
        if (!once)
            record(cmd, d.buf, r.buf, e1, e2, 0x01010101u * i, 0);
        VkSubmitInfo si = {
            .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
            .commandBufferCount = 1,
            .pCommandBuffers = &cmd,
        };
        CHECK(vkQueueSubmit(g.queue, 1, &si, fence));
        if ((long)i == k) { /* the one early read: r still holds the previous result */
            while (vkGetEventStatus(g.dev, e1) != VK_EVENT_SET)
                ;
            early = fnv1a(early, p, (size_t)SIZE);
        }
        CHECK(vkSetEvent(g.dev, e2));
        CHECK(vkWaitForFences(g.dev, 1, &fence, VK_TRUE, UINT64_MAX));
        CHECK(vkResetFences(g.dev, 1, &fence));
        checksum = fnv1a(checksum, p, (size_t)SIZE); /* the usual read after the fence */
    }
    printf("checksum %016llx early %016llx\n", (unsigned long long)checksum,
           (unsigned long long)early);

    vkUnmapMemory(g.dev, r.mem);
    vkDestroyEvent(g.dev, e1, NULL);
    vkDestroyEvent(g.dev, e2, NULL);
    cmds_destroy(&g, &cb);
    buffer_destroy(&g, &r);
    buffer_destroy(&g, &d);
    vkDestroyDevice(g.dev, NULL);
    vkDestroyInstance(inst, NULL);
    return 0;
}
