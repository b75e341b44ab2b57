/* (issue 36) c_mapped_upload persistent|remap [ITERS] [SPV]: one device buffer d with two staging
 * partners, an upload buffer u and a readback buffer r (the h_in -> d -> h_out group of DESIGN §5).
 *
 * u's memory is allocated and mapped at once ("mapped at creation", as allocators that map every
 * host-visible block do), before d even exists; u is bound, then d is created and bound, then r.
 * Each of ITERS (default 3) iterations: the host writes the input into u, then one submission
 * copies u -> d, runs c_double.comp in place on d (binding 0 and binding 1 both d:
 * d[i] = d[i] * 2 + 1 + iter), copies d -> r; after the fence the host maps r, folds it into the
 * checksum and unmaps it.
 *
 * `persistent` keeps u mapped from its allocation to the end: the pointer the host writes through
 * was handed out before d was bound, so echo cannot serve it from d's memory, and u cannot share
 * d's memory (r still can). `remap` (the twin) unmaps u before d is bound and maps it again for
 * every iteration's write: both partners can share d's memory.
 *
 * The validation gate (scripts/validate-all.sh) runs it with these arguments:
 * gate-args: persistent
 * gate-args: remap
 */
#include "common.h"

#define SIZE (4 * MIB)

static void write_input(uint32_t *w, uint32_t iter)
{
    for (VkDeviceSize i = 0; i < SIZE / 4; i++)
        w[i] = (iter + 1) * 2654435761u + (uint32_t)i * 7u;
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "persistent") != 0 && strcmp(argv[1], "remap") != 0)) {
        fprintf(stderr, "usage: c_mapped_upload persistent|remap [ITERS] [SPV]\n");
        return 1;
    }
    const int persistent = strcmp(argv[1], "persistent") == 0;
    int spv_arg = 2;
    uint32_t iters = 3;
    if (argc > 2 && argv[2][0] && strspn(argv[2], "0123456789") == strlen(argv[2])) {
        iters = parse_iters(argv[2]);
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

    /* u: allocated and mapped at once, before d exists; then bound. */
    struct buffer u = buffer_unbound(&g, SIZE, src, MEM_STAGING);
    void *up = NULL;
    CHECK(vkMapMemory(g.dev, u.mem, 0, VK_WHOLE_SIZE, 0, &up));
    write_input(up, 0);
    buffer_bind(&g, &u);
    if (!persistent) {
        vkUnmapMemory(g.dev, u.mem);
        up = NULL;
    }
    struct buffer d = buffer_create(&g, SIZE, src | dst | ssbo, MEM_DEVICE);
    struct buffer r = buffer_create(&g, SIZE, dst, MEM_READBACK);
    VkBuffer bufs[2] = {d.buf, d.buf};
    struct pipeline p = pipeline_create_n(&g, spv, bufs, 2);
    struct cmds c = cmds_create(&g, 1);

    uint64_t sum = FNV_OFFSET;
    for (uint32_t it = 0; it < iters; it++) {
        iteration_mark(it);
        if (persistent) {
            write_input(up, it);
        } else {
            void *w;
            CHECK(vkMapMemory(g.dev, u.mem, 0, VK_WHOLE_SIZE, 0, &w));
            write_input(w, it);
            vkUnmapMemory(g.dev, u.mem);
        }
        VkCommandBuffer cmd = c.cmd[0];
        cmd_begin(cmd);
        VkBufferCopy region = {0, 0, SIZE};
        vkCmdCopyBuffer(cmd, u.buf, d.buf, 1, &region);
        buffer_barrier(cmd, d.buf, VK_ACCESS_TRANSFER_WRITE_BIT,
                       VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT, xfer, cs);
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipe);
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &p.set, 0,
                                NULL);
        vkCmdPushConstants(cmd, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &it);
        vkCmdDispatch(cmd, (uint32_t)(SIZE / 4 / 64), 1, 1);
        buffer_barrier(cmd, d.buf, VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_TRANSFER_READ_BIT, cs,
                       xfer);
        vkCmdCopyBuffer(cmd, d.buf, r.buf, 1, &region);
        buffer_barrier(cmd, r.buf, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT, xfer,
                       VK_PIPELINE_STAGE_HOST_BIT);
        /* The next iteration's copy into d waits for this one's reads of d. */
        buffer_barrier(cmd, d.buf, VK_ACCESS_TRANSFER_READ_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, xfer,
                       xfer);
        cmd_submit_wait(&g, cmd, c.fence);
        void *rp;
        CHECK(vkMapMemory(g.dev, r.mem, 0, SIZE, 0, &rp));
        sum = fnv1a(sum, rp, (size_t)SIZE);
        vkUnmapMemory(g.dev, r.mem);
    }
    printf("iterations %u\nchecksum %016llx\n", iters, (unsigned long long)sum);

    if (persistent)
        vkUnmapMemory(g.dev, u.mem);
    cmds_destroy(&g, &c);
    pipeline_destroy(&g, &p);
    buffer_destroy(&g, &u);
    buffer_destroy(&g, &d);
    buffer_destroy(&g, &r);
    vkDestroyDevice(g.dev, NULL);
    vkDestroyInstance(inst, NULL);
    return 0;
}
