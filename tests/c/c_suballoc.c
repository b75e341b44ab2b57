/* (issue 12) c_suballoc loop|race|zero ITERS [SPV]: a block allocator's pattern. ONE host-visible
 * allocation, mapped once and kept mapped (as VMA, gpu-allocator and wgpu do on a device whose
 * every memory type is host-visible), holds both roles: an upload staging buffer `h`, the device
 * buffers `d` (input) and `o` (output), and a readback staging buffer `r`, each in its own
 * sub-range. Each iteration: copy h -> d (submit, wait), then dispatch d -> o and copy o -> r
 * (submit, wait), the host folds r into the checksum and writes the next input into h.
 *
 * `race` (the negative twin) writes the next input into h while the second submission, which
 * reads d but not h, is still in flight: legal and deterministic as written (the GPU never reads
 * h then), but with h and d sharing memory the GPU would read the new input. The analyzer must
 * refuse that pair for S2.
 *
 * `zero` is the zero-copy twin (the bound for what echo can recover): the dispatch reads h and
 * writes r directly, no copies; same output.
 *
 * The validation gate (scripts/validate-all.sh) runs it with these arguments:
 * gate-args: loop 3
 * gate-args: race 3
 */
#include "common.h"

enum { H, D, O, R, NBUF };

struct block {
    VkDeviceMemory mem;
    uint8_t *map;
    VkBuffer buf[NBUF];
    VkDeviceSize off[NBUF];
};

static void write_input(uint8_t *p, VkDeviceSize size, uint32_t seed)
{
    uint32_t *w = (uint32_t *)p;
    for (VkDeviceSize i = 0; i < size / 4; i++)
        w[i] = seed * 2654435761u + (uint32_t)i * 7u;
}

/* FNV-1a over 64-bit words, each product rotated so that high bits reach the low ones; not
 * common.h's byte-wise fnv1a: the fold must not dwarf the copies bench/allocators.sh measures.
 * The same in every mode, so outputs compare byte for byte. */
static uint64_t fold(uint64_t h, const uint8_t *p, VkDeviceSize size)
{
    const uint64_t *w = (const uint64_t *)p;
    for (VkDeviceSize i = 0; i < size / 8; i++) {
        h ^= w[i];
        h *= 0x100000001b3ull;
        h = h << 27 | h >> 37;
    }
    return h;
}

static uint32_t parse_size_mib(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 1 || v > 15) {
        fprintf(stderr, "bad ECHO_SIZE_MIB %s\n", s);
        exit(1);
    }
    return (uint32_t)v;
}

static void submit_wait(const struct gpu *g, VkCommandBuffer cmd, VkFence fence, int wait)
{
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &cmd,
    };
    CHECK(vkResetFences(g->dev, 1, &fence));
    CHECK(vkQueueSubmit(g->queue, 1, &si, fence));
    if (wait)
        CHECK(vkWaitForFences(g->dev, 1, &fence, VK_TRUE, UINT64_MAX));
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "loop") != 0 && strcmp(argv[1], "race") != 0 &&
                     strcmp(argv[1], "zero") != 0)) {
        fprintf(stderr, "usage: c_suballoc loop|race|zero ITERS [SPV]\n");
        return 1;
    }
    const int race = strcmp(argv[1], "race") == 0;
    const int zero = strcmp(argv[1], "zero") == 0;
    const uint32_t iters = parse_iters(argv[2]);
    const char *spv = spv_path(argc, argv, 3);
    /* 4 MiB per buffer, or $ECHO_SIZE_MIB MiB (bench/allocators.sh uses larger): 1 to 15, as one
     * dispatch of 64-invocation groups covers at most maxComputeWorkGroupCount[0] = 65535 groups
     * (lavapipe), just under 16 MiB. */
    const char *mib = getenv("ECHO_SIZE_MIB");
    const VkDeviceSize size = (mib && *mib ? (VkDeviceSize)parse_size_mib(mib) : 4) * MIB;

    VkInstance inst = create_instance(VK_API_VERSION_1_1, NULL, 0, NULL, 0, NULL);
    struct gpu g = gpu_create(inst);

    /* The buffers first, then one block for all of them, as an allocator sizes its block. */
    const VkBufferUsageFlags src = VK_BUFFER_USAGE_TRANSFER_SRC_BIT;
    const VkBufferUsageFlags dst = VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    const VkBufferUsageFlags ssbo = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    /* h and r are storage buffers too: the zero-copy twin's shader uses them. */
    const VkBufferUsageFlags usage[NBUF] = {src | ssbo, dst | ssbo, src | ssbo, dst | ssbo};
    struct block b;
    memset(&b, 0, sizeof b);
    uint32_t bits = ~0u;
    VkDeviceSize at = 0;
    for (int i = 0; i < NBUF; i++) {
        VkBufferCreateInfo bci = {
            .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
            .size = size,
            .usage = usage[i],
            .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
        };
        CHECK(vkCreateBuffer(g.dev, &bci, NULL, &b.buf[i]));
        VkMemoryRequirements req;
        vkGetBufferMemoryRequirements(g.dev, b.buf[i], &req);
        bits &= req.memoryTypeBits;
        /* 64 KiB apart: no two buffers share a page. */
        VkDeviceSize align = req.alignment > 65536 ? req.alignment : 65536;
        at = (at + align - 1) / align * align;
        b.off[i] = at;
        at += req.size;
    }
    REQUIRE(bits != 0);
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = at,
        .memoryTypeIndex = find_memory_type(&g, bits, MEM_STAGING),
    };
    CHECK(vkAllocateMemory(g.dev, &ai, NULL, &b.mem));
    /* Test knob ECHO_C_MAP_AFTER_BIND=1: bind every buffer first, then map the block (the
     * profiler must arm what the map makes reachable before the host can touch it). */
    const char *late = getenv("ECHO_C_MAP_AFTER_BIND");
    const int map_late = late && *late && strcmp(late, "0") != 0;
    void *p;
    if (!map_late)
        CHECK(vkMapMemory(g.dev, b.mem, 0, VK_WHOLE_SIZE, 0, &p));
    for (int i = 0; i < NBUF; i++)
        CHECK(vkBindBufferMemory(g.dev, b.buf[i], b.mem, b.off[i]));
    if (map_late)
        CHECK(vkMapMemory(g.dev, b.mem, 0, VK_WHOLE_SIZE, 0, &p));
    b.map = p;

    struct buffer d = {b.buf[zero ? H : D], b.mem, size}, o = {b.buf[zero ? R : O], b.mem, size};
    struct pipeline pl = pipeline_create(&g, spv, &d, &o);
    struct cmds cb = cmds_create(&g, 2);
    VkCommandBuffer *cmd = cb.cmd;
    VkFence fence = cb.fence;

    const VkPipelineStageFlags xfer = VK_PIPELINE_STAGE_TRANSFER_BIT;
    const VkPipelineStageFlags cs = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
    const VkBufferCopy region = {0, 0, size};
    uint64_t checksum = FNV_OFFSET;
    write_input(b.map + b.off[H], size, 1);
    for (uint32_t it = 0; it < iters; it++) {
        if (zero) {
            /* The zero-copy twin: one submission, the shader reads h and writes r. */
            cmd_begin(cmd[1]);
            vkCmdBindPipeline(cmd[1], VK_PIPELINE_BIND_POINT_COMPUTE, pl.pipe);
            vkCmdBindDescriptorSets(cmd[1], VK_PIPELINE_BIND_POINT_COMPUTE, pl.layout, 0, 1,
                                    &pl.set, 0, NULL);
            vkCmdPushConstants(cmd[1], pl.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &it);
            vkCmdDispatch(cmd[1], (uint32_t)(size / 4 / 64), 1, 1);
            buffer_barrier(cmd[1], b.buf[R], VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT,
                           cs, VK_PIPELINE_STAGE_HOST_BIT);
            CHECK(vkEndCommandBuffer(cmd[1]));
            submit_wait(&g, cmd[1], fence, 1);
            write_input(b.map + b.off[H], size, it + 2);
            checksum = fold(checksum, b.map + b.off[R], size);
            continue;
        }
        /* Upload: h -> d (after the previous dispatch's reads of d). */
        cmd_begin(cmd[0]);
        buffer_barrier(cmd[0], b.buf[D], VK_ACCESS_SHADER_READ_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                       cs, xfer);
        vkCmdCopyBuffer(cmd[0], b.buf[H], b.buf[D], 1, &region);
        CHECK(vkEndCommandBuffer(cmd[0]));
        submit_wait(&g, cmd[0], fence, 1);

        /* Dispatch d -> o, readback o -> r. */
        cmd_begin(cmd[1]);
        buffer_barrier(cmd[1], b.buf[D], VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT,
                       xfer, cs);
        buffer_barrier(cmd[1], b.buf[O], VK_ACCESS_TRANSFER_READ_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                       xfer, cs);
        vkCmdBindPipeline(cmd[1], VK_PIPELINE_BIND_POINT_COMPUTE, pl.pipe);
        vkCmdBindDescriptorSets(cmd[1], VK_PIPELINE_BIND_POINT_COMPUTE, pl.layout, 0, 1, &pl.set,
                                0, NULL);
        vkCmdPushConstants(cmd[1], pl.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &it);
        vkCmdDispatch(cmd[1], (uint32_t)(size / 4 / 64), 1, 1);
        buffer_barrier(cmd[1], b.buf[O], VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_TRANSFER_READ_BIT,
                       cs, xfer);
        vkCmdCopyBuffer(cmd[1], b.buf[O], b.buf[R], 1, &region);
        buffer_barrier(cmd[1], b.buf[R], VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT,
                       xfer, VK_PIPELINE_STAGE_HOST_BIT);
        CHECK(vkEndCommandBuffer(cmd[1]));
        submit_wait(&g, cmd[1], fence, 0);
        if (race) /* the GPU still reads d: h is not in use, so this is legal as written */
            write_input(b.map + b.off[H], size, it + 2);
        CHECK(vkWaitForFences(g.dev, 1, &fence, VK_TRUE, UINT64_MAX));
        if (!race)
            write_input(b.map + b.off[H], size, it + 2);
        checksum = fold(checksum, b.map + b.off[R], size);
    }
    printf("iterations %u\nchecksum %016llx\n", iters, (unsigned long long)checksum);

    cmds_destroy(&g, &cb);
    pipeline_destroy(&g, &pl);
    for (int i = 0; i < NBUF; i++)
        vkDestroyBuffer(g.dev, b.buf[i], NULL);
    vkUnmapMemory(g.dev, b.mem);
    vkFreeMemory(g.dev, b.mem, NULL);
    vkDestroyDevice(g.dev, NULL);
    vkDestroyInstance(inst, NULL);
    return 0;
}
