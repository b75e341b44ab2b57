/* (issue 12) c_download ok|clear [RESULTS] [SPV]: one-time downloads, as a test program that computes
 * several results (an FFT's spectra, a solver's fields) and reads each back once. RESULTS (digits
 * only, default 3) is how many; a second argument that is not a number is the SPIR-V path, as
 * before RESULTS existed (issue 24: a plan profiled at N results applies at 2N).
 *
 * The input is uploaded once: a staging buffer `u` written by the host, copied into the device
 * buffer `in`, and kept until the end. Then for each of NRES results j: a dispatch of
 * c_double.comp writes device buffer d[j] (d[j][i] = in[i] * 2 + 1 + j), submitted and waited
 * for; then a *fresh* readback staging buffer r with its own allocation is created, mapped, the
 * copy d[j] -> r submitted and waited for, the host folds r into the checksum, and r is unmapped,
 * destroyed and its memory freed. Each pair (r, d[j]) is a single download of SIZE bytes after
 * which the staging buffer is destroyed: a one-time download, to be taken like a one-time upload
 * (r bound into d[j]'s memory, its map redirected, the copy dropped).
 *
 * `clear` (the negative twin) fills r with a poison pattern on the host after mapping it, before
 * the copy (programs clear a result buffer before reading into it): legal and deterministic as
 * written, since the copy overwrites it; but with r inside d[j]'s memory the host's fill would
 * overwrite the result the dropped copy was to deliver. The analyzer must refuse those pairs.
 *
 * The validation gate (scripts/validate-all.sh) runs it with these arguments:
 * gate-args: ok
 * gate-args: clear
 */
#include "common.h"

#define NRES_DEFAULT 3
#define SIZE (2 * MIB)

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "ok") != 0 && strcmp(argv[1], "clear") != 0)) {
        fprintf(stderr, "usage: c_download ok|clear [RESULTS] [SPV]\n");
        return 1;
    }
    const int clear = strcmp(argv[1], "clear") == 0;
    int spv_arg = 2;
    uint32_t NRES = NRES_DEFAULT;
    if (argc > 2 && argv[2][0] && strspn(argv[2], "0123456789") == strlen(argv[2])) {
        NRES = parse_iters(argv[2]);
        spv_arg = 3;
    }
    const char *spv = spv_path(argc, argv, spv_arg);
    VkInstance inst = create_instance(VK_API_VERSION_1_1, NULL, 0, NULL, 0, NULL);
    struct gpu g = gpu_create(inst);

    const VkBufferUsageFlags src = VK_BUFFER_USAGE_TRANSFER_SRC_BIT;
    const VkBufferUsageFlags dst = VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    const VkBufferUsageFlags ssbo = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    const VkPipelineStageFlags xfer = VK_PIPELINE_STAGE_TRANSFER_BIT;
    const VkPipelineStageFlags cs = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;

    /* The input: uploaded once through u, which lives until the end. */
    struct buffer u = buffer_create(&g, SIZE, src, MEM_STAGING);
    fill_pattern(&g, u.mem, SIZE, 7);
    struct buffer in = buffer_create(&g, SIZE, dst | ssbo, MEM_DEVICE);
    struct buffer *d = calloc(NRES, sizeof *d);
    struct pipeline *pl = calloc(NRES, sizeof *pl);
    if (!d || !pl) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (uint32_t j = 0; j < NRES; j++) {
        d[j] = buffer_create(&g, SIZE, src | ssbo, MEM_DEVICE);
        pl[j] = pipeline_create(&g, spv, &in, &d[j]);
    }

    VkCommandPoolCreateInfo cpci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = g.family,
    };
    VkCommandPool pool;
    CHECK(vkCreateCommandPool(g.dev, &cpci, NULL, &pool));
    VkCommandBuffer cmd;
    VkCommandBufferAllocateInfo cbai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    CHECK(vkAllocateCommandBuffers(g.dev, &cbai, &cmd));
    VkFence fence;
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    CHECK(vkCreateFence(g.dev, &fci, NULL, &fence));
    const VkBufferCopy region = {0, 0, SIZE};

    /* The upload, once. */
    cmd_begin(cmd);
    vkCmdCopyBuffer(cmd, u.buf, in.buf, 1, &region);
    buffer_barrier(cmd, in.buf, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT, xfer, cs);
    cmd_submit_wait(&g, cmd, fence);

    uint64_t checksum = FNV_OFFSET;
    for (uint32_t j = 0; j < NRES; j++) {
        /* Result j on the device. */
        cmd_begin(cmd);
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pl[j].pipe);
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pl[j].layout, 0, 1,
                                &pl[j].set, 0, NULL);
        vkCmdPushConstants(cmd, pl[j].layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &j);
        vkCmdDispatch(cmd, (uint32_t)(SIZE / 4 / 64), 1, 1);
        cmd_submit_wait(&g, cmd, fence);

        /* Read it back once through a fresh staging buffer, then drop that buffer. */
        struct buffer r = buffer_create(&g, SIZE, dst, MEM_READBACK);
        void *p;
        CHECK(vkMapMemory(g.dev, r.mem, 0, VK_WHOLE_SIZE, 0, &p));
        if (clear)
            memset(p, 0xa5, (size_t)SIZE);
        cmd_begin(cmd);
        buffer_barrier(cmd, d[j].buf, VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_TRANSFER_READ_BIT, cs,
                       xfer);
        vkCmdCopyBuffer(cmd, d[j].buf, r.buf, 1, &region);
        buffer_barrier(cmd, r.buf, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT, xfer,
                       VK_PIPELINE_STAGE_HOST_BIT);
        cmd_submit_wait(&g, cmd, fence);
        checksum = fnv1a(checksum, p, (size_t)SIZE);
        vkUnmapMemory(g.dev, r.mem);
        buffer_destroy(&g, &r);
    }
    printf("results %u\nchecksum %016llx\n", NRES, (unsigned long long)checksum);

    vkDestroyFence(g.dev, fence, NULL);
    vkDestroyCommandPool(g.dev, pool, NULL);
    for (uint32_t j = 0; j < NRES; j++) {
        pipeline_destroy(&g, &pl[j]);
        buffer_destroy(&g, &d[j]);
    }
    free(pl);
    free(d);
    buffer_destroy(&g, &in);
    buffer_destroy(&g, &u);
    vkDestroyDevice(g.dev, NULL);
    vkDestroyInstance(inst, NULL);
    return 0;
}
