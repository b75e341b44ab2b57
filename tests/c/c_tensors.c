/* (issue 26) c_tensors staging|zero ITERS MIB: a compute-framework program with Kompute's object
 * layout (kp::Tensor, kp::Algorithm, kp::Sequence with OpTensorSyncDevice / OpAlgoDispatch /
 * OpTensorSyncLocal), written in C because Kompute's PyPI package `kp` 0.9.0 is a source
 * distribution whose CMake build fetches Vulkan-Headers, fmt and pybind11 from GitHub at build
 * time (no network for that here, and none on a fresh test machine's build step).
 *
 * Tensors a, b (inputs) and out, MIB MiB each. A kp::Tensor of type eDevice is two buffers with
 * their own memory: the primary buffer (DEVICE_LOCAL; STORAGE|TRANSFER_SRC|TRANSFER_DST) and the
 * staging buffer (HOST_VISIBLE|HOST_COHERENT; TRANSFER_SRC|TRANSFER_DST), which stays mapped for
 * the tensor's life (Tensor::mapRawData); tensor->data() is that mapping. One iteration, as
 * `mgr.sequence()->record<OpTensorSyncDevice>({a, b})->record<OpAlgoDispatch>(algo)
 * ->record<OpTensorSyncLocal>({out})->eval()` after the host set a and b's data:
 *   OpTensorSyncDevice: copy staging -> primary, barrier transfer write -> shader read;
 *   OpAlgoDispatch: a barrier per tensor (transfer write -> shader read), bind, push the
 *     iteration, dispatch c_tensors.comp (out = a * 3 + b + iter; no binding readonly/writeonly);
 *   OpTensorSyncLocal: barrier shader write -> transfer read, copy primary -> staging, barrier
 *     transfer write -> host read; one submit, fence wait; the host reads out's data.
 * `zero` is the zero-copy twin, Kompute's eHost tensors: one host-visible buffer per tensor,
 * mapped and used directly; OpTensorSyncDevice/Local record no copy (OpTensorSyncLocal keeps its
 * shader write -> host read barrier).
 *
 * stderr: `loop_ms T`, the wall time of the loop (scripts/real-libs.sh reads it).
 * stdout: the FNV-1a checksum over every iteration's out bytes, identical in every mode and in
 * both variants. SPIR-V: argv[4], else c_tensors.spv beside $ECHO_C_SPV.
 *
 * gate-args: staging 2 1
 * gate-args: zero 2 1 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */
#include "common.h"
#include <time.h>

struct tensor {
    VkDeviceSize size;
    struct buffer primary, staging; /* eHost: staging unused */
    uint32_t *data;                 /* the mapped staging (eDevice) or primary (eHost) memory */
};

static int host_tensors;

static struct tensor tensor_create(const struct gpu *g, VkDeviceSize size)
{
    struct tensor t;
    memset(&t, 0, sizeof t);
    t.size = size;
    const VkBufferUsageFlags all = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                   VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                   VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    if (host_tensors) {
        t.primary = buffer_create(g, size, all, MEM_STAGING);
        CHECK(vkMapMemory(g->dev, t.primary.mem, 0, size, 0, (void **)&t.data));
    } else {
        t.primary = buffer_create(g, size, all, MEM_DEVICE);
        t.staging = buffer_create(g, size,
                                  VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                  MEM_STAGING);
        CHECK(vkMapMemory(g->dev, t.staging.mem, 0, size, 0, (void **)&t.data));
    }
    return t;
}

static void tensor_destroy(const struct gpu *g, struct tensor *t)
{
    if (host_tensors) {
        vkUnmapMemory(g->dev, t->primary.mem);
    } else {
        vkUnmapMemory(g->dev, t->staging.mem);
        buffer_destroy(g, &t->staging);
    }
    buffer_destroy(g, &t->primary);
}

static void sync_device(VkCommandBuffer cmd, struct tensor *t)
{
    if (host_tensors)
        return;
    VkBufferCopy region = {0, 0, t->size};
    vkCmdCopyBuffer(cmd, t->staging.buf, t->primary.buf, 1, &region);
    buffer_barrier(cmd, t->primary.buf, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT,
                   VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
}

static void sync_local(VkCommandBuffer cmd, struct tensor *t)
{
    const VkPipelineStageFlags cs = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
    const VkPipelineStageFlags xfer = VK_PIPELINE_STAGE_TRANSFER_BIT;
    if (host_tensors) {
        buffer_barrier(cmd, t->primary.buf, VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT,
                       cs, VK_PIPELINE_STAGE_HOST_BIT);
        return;
    }
    buffer_barrier(cmd, t->primary.buf, VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_TRANSFER_READ_BIT,
                   cs, xfer);
    VkBufferCopy region = {0, 0, t->size};
    vkCmdCopyBuffer(cmd, t->primary.buf, t->staging.buf, 1, &region);
    buffer_barrier(cmd, t->staging.buf, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT, xfer,
                   VK_PIPELINE_STAGE_HOST_BIT);
}

int main(int argc, char **argv)
{
    if (argc < 4 || (strcmp(argv[1], "staging") && strcmp(argv[1], "zero"))) {
        fprintf(stderr, "usage: c_tensors staging|zero ITERS MIB [SPV]\n");
        return 1;
    }
    host_tensors = strcmp(argv[1], "zero") == 0;
    uint32_t iters = parse_iters(argv[2]);
    long mib = strtol(argv[3], NULL, 10);
    REQUIRE(mib >= 1 && mib <= 1024);
    char spv[4096];
    if (argc > 4) {
        snprintf(spv, sizeof spv, "%s", argv[4]);
    } else {
        const char *e = getenv("ECHO_C_SPV");
        REQUIRE(e && *e);
        const char *slash = strrchr(e, '/');
        int dir = slash ? (int)(slash - e) : 1;
        snprintf(spv, sizeof spv, "%.*s/c_tensors.spv", dir, slash ? e : ".");
    }
    VkDeviceSize size = (VkDeviceSize)mib * MIB;

    VkInstance inst = create_instance(VK_API_VERSION_1_1, NULL, 0, NULL, 0, NULL);
    struct gpu g = gpu_create(inst);
    struct tensor a = tensor_create(&g, size), b = tensor_create(&g, size),
                  out = tensor_create(&g, size);

    /* kp::Algorithm: three storage buffers (bindings 0, 1, 2 = a, b, out), a push constant. */
    struct tensor *ts[3] = {&a, &b, &out};
    VkBuffer bufs[3] = {a.primary.buf, b.primary.buf, out.primary.buf};
    struct pipeline alg = pipeline_create_n(&g, spv, bufs, 3);

    /* kp::Sequence: one command buffer and fence, re-recorded for every eval. */
    VkCommandPoolCreateInfo cpi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = g.family,
    };
    VkCommandPool pool;
    CHECK(vkCreateCommandPool(g.dev, &cpi, NULL, &pool));
    VkCommandBufferAllocateInfo cbai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    VkCommandBuffer cmd;
    CHECK(vkAllocateCommandBuffers(g.dev, &cbai, &cmd));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    CHECK(vkCreateFence(g.dev, &fci, NULL, &fence));

    uint64_t sum = FNV_OFFSET;
    const VkDeviceSize words = size / 4;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint32_t it = 0; it < iters; it++) {
        for (VkDeviceSize i = 0; i < words; i++) { /* tensor->data() = ... */
            a.data[i] = (uint32_t)i * 7u + it;
            b.data[i] = (uint32_t)i ^ (it * 2654435761u);
        }
        CHECK(vkResetCommandBuffer(cmd, 0));
        VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        CHECK(vkBeginCommandBuffer(cmd, &cbi));
        /* The previous eval's transfer read of out and shader reads of a, b are complete: the
         * fence wait ordered them before this submission's commands. */
        sync_device(cmd, &a); /* OpTensorSyncDevice({a, b}) */
        sync_device(cmd, &b);
        for (int i = 0; i < 3; i++) /* OpAlgoDispatch: Algorithm::recordDispatch's barriers */
            buffer_barrier(cmd, ts[i]->primary.buf, VK_ACCESS_TRANSFER_WRITE_BIT,
                           VK_ACCESS_SHADER_READ_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                           VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, alg.pipe);
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, alg.layout, 0, 1, &alg.set, 0,
                                NULL);
        vkCmdPushConstants(cmd, alg.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &it);
        vkCmdDispatch(cmd, (uint32_t)(words / 64), 1, 1);
        sync_local(cmd, &out); /* OpTensorSyncLocal({out}) */
        CHECK(vkEndCommandBuffer(cmd));
        VkSubmitInfo si = {
            .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
            .commandBufferCount = 1,
            .pCommandBuffers = &cmd,
        };
        CHECK(vkResetFences(g.dev, 1, &fence));
        CHECK(vkQueueSubmit(g.queue, 1, &si, fence));
        CHECK(vkWaitForFences(g.dev, 1, &fence, VK_TRUE, UINT64_MAX));
        sum = fnv1a(sum, out.data, (size_t)size); /* out->vector() */
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* stderr (not compared between modes): the loop's wall time, for scripts/real-libs.sh */
    fprintf(stderr, "loop_ms %.3f\n",
            (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    printf("tensors 3 x %ld MiB, %u iterations: checksum %016llx\n", mib, iters,
           (unsigned long long)sum);

    vkDestroyFence(g.dev, fence, NULL);
    vkDestroyCommandPool(g.dev, pool, NULL);
    pipeline_destroy(&g, &alg);
    for (int i = 0; i < 3; i++)
        tensor_destroy(&g, ts[i]);
    vkDestroyDevice(g.dev, NULL);
    vkDestroyInstance(inst, NULL);
    return 0;
}
