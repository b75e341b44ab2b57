/* (issue 24) c_writeonly_download write|read [CALLS]: a download per call, as a Python compute
 * framework that generates its SPIR-V does it.
 *
 * The input is uploaded once (staging u → device `in`). Then for each of CALLS calls j: a fresh
 * memory block is allocated from a host-visible type and mapped at once (allocators map every
 * block on a UMA device), a fresh device buffer d is bound into it, a dispatch writes d (d[i] =
 * in[i] * 2 + 1 + j), submitted and waited for; then a fresh host buffer r with its own
 * allocation is created and mapped, the copy d -> r submitted and waited for, the host folds r
 * into the checksum, and r, d and the block are freed. Each (r, d) is a one-time download pair.
 *
 * The shader's bindings carry no `readonly`/`writeonly`. `write` (c_writeonly_write.comp) only
 * stores to d: by instruction the dispatch writes d and never reads it, so nothing the host or the
 * GPU wrote before is read and the pair is accepted. `read` (c_writeonly_read.comp, the planted
 * fault) loads d's old bytes before it stores: the dispatch reads memory nothing in the program
 * wrote, which sharing memory could change, so the pair is refused for S1 (the output does not
 * depend on the value read, so it stays identical either way).
 *
 * The SPIR-V: argv[3] when given, else c_writeonly_<mode>.spv beside $ECHO_C_SPV.
 *
 * gate-args: write 3
 * gate-args: read 3 */
#include "common.h"

#define SIZE (2 * MIB)

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "write") != 0 && strcmp(argv[1], "read") != 0)) {
        fprintf(stderr, "usage: c_writeonly_download write|read [CALLS] [SPV]\n");
        return 1;
    }
    const uint32_t calls = argc > 2 ? parse_iters(argv[2]) : 3;
    char spv[4096];
    if (argc > 3) {
        snprintf(spv, sizeof spv, "%s", argv[3]);
    } else {
        const char *e = getenv("ECHO_C_SPV");
        if (!e || !*e) {
            fprintf(stderr, "pass the SPIR-V path or set ECHO_C_SPV\n");
            return 1;
        }
        const char *slash = strrchr(e, '/');
        int dir = slash ? (int)(slash - e) : 1;
        snprintf(spv, sizeof spv, "%.*s/c_writeonly_%s.spv", dir, slash ? e : ".", argv[1]);
    }
    VkInstance inst = create_instance(VK_API_VERSION_1_1, NULL, 0, NULL, 0, NULL);
    struct gpu g = gpu_create(inst);

    const VkBufferUsageFlags src = VK_BUFFER_USAGE_TRANSFER_SRC_BIT;
    const VkBufferUsageFlags dst = VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    const VkBufferUsageFlags ssbo = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    const VkPipelineStageFlags xfer = VK_PIPELINE_STAGE_TRANSFER_BIT;
    const VkPipelineStageFlags cs = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;

    struct buffer u = buffer_create(&g, SIZE, src, MEM_STAGING);
    fill_pattern(&g, u.mem, SIZE, 7);
    struct buffer in = buffer_create(&g, SIZE, dst | ssbo, MEM_DEVICE);

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

    cmd_begin(cmd);
    vkCmdCopyBuffer(cmd, u.buf, in.buf, 1, &region);
    buffer_barrier(cmd, in.buf, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT, xfer, cs);
    cmd_submit_wait(&g, cmd, fence);

    uint64_t checksum = FNV_OFFSET;
    for (uint32_t j = 0; j < calls; j++) {
        /* A fresh device buffer in a fresh block, mapped at once and never touched by the host. */
        struct buffer d = buffer_unbound(&g, SIZE, src | ssbo, MEM_STAGING);
        void *block;
        CHECK(vkMapMemory(g.dev, d.mem, 0, VK_WHOLE_SIZE, 0, &block));
        buffer_bind(&g, &d);
        struct pipeline pl = pipeline_create(&g, spv, &in, &d);
        cmd_begin(cmd);
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pl.pipe);
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pl.layout, 0, 1, &pl.set, 0,
                                NULL);
        vkCmdPushConstants(cmd, pl.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &j);
        vkCmdDispatch(cmd, (uint32_t)(SIZE / 4 / 64), 1, 1);
        cmd_submit_wait(&g, cmd, fence);

        /* The download into a fresh host buffer. */
        struct buffer r = buffer_create(&g, SIZE, dst, MEM_READBACK);
        void *p;
        CHECK(vkMapMemory(g.dev, r.mem, 0, VK_WHOLE_SIZE, 0, &p));
        cmd_begin(cmd);
        buffer_barrier(cmd, d.buf, VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_TRANSFER_READ_BIT, cs,
                       xfer);
        vkCmdCopyBuffer(cmd, d.buf, r.buf, 1, &region);
        buffer_barrier(cmd, r.buf, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT, xfer,
                       VK_PIPELINE_STAGE_HOST_BIT);
        cmd_submit_wait(&g, cmd, fence);
        checksum = fnv1a(checksum, p, (size_t)SIZE);
        vkUnmapMemory(g.dev, r.mem);
        buffer_destroy(&g, &r);
        pipeline_destroy(&g, &pl);
        vkUnmapMemory(g.dev, d.mem);
        buffer_destroy(&g, &d);
    }
    printf("calls %u\nchecksum %016llx\n", calls, (unsigned long long)checksum);

    vkDestroyFence(g.dev, fence, NULL);
    vkDestroyCommandPool(g.dev, pool, NULL);
    buffer_destroy(&g, &in);
    buffer_destroy(&g, &u);
    vkDestroyDevice(g.dev, NULL);
    vkDestroyInstance(inst, NULL);
    return 0;
}
