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
 * c_tensors interleave ITERS MIB (scripts/agreement.sh): three programs in one process, each with
 * its own VkInstance, device and tensors: `base` (staging, no layer), `echo` (staging, on an
 * instance that enables the explicit layer VK_LAYER_echo; the others do not) and `twin` (zero).
 * Round r runs one iteration of each, the order rotating, so that a slow change of the
 * machine's speed falls on all three alike (separate processes see it as noise larger than the
 * whole difference being measured). stderr: `round R base_ms echo_ms twin_ms` per round;
 * stdout: one checksum line per program, each equal to the staging run's.
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

static struct tensor tensor_create(const struct gpu *g, VkDeviceSize size, int host_tensors)
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

static void tensor_destroy(const struct gpu *g, struct tensor *t, int host_tensors)
{
    if (host_tensors) {
        vkUnmapMemory(g->dev, t->primary.mem);
    } else {
        vkUnmapMemory(g->dev, t->staging.mem);
        buffer_destroy(g, &t->staging);
    }
    buffer_destroy(g, &t->primary);
}

static void sync_device(VkCommandBuffer cmd, struct tensor *t, int host_tensors)
{
    if (host_tensors)
        return;
    VkBufferCopy region = {0, 0, t->size};
    vkCmdCopyBuffer(cmd, t->staging.buf, t->primary.buf, 1, &region);
    buffer_barrier(cmd, t->primary.buf, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT,
                   VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
}

static void sync_local(VkCommandBuffer cmd, struct tensor *t, int host_tensors)
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

/* One program: kp::Manager with three tensors, a kp::Algorithm and a kp::Sequence. */
struct world {
    int host_tensors; /* the zero-copy twin: eHost tensors */
    VkDeviceSize size;
    VkInstance inst;
    struct gpu g;
    struct tensor t[3]; /* a, b, out */
    struct pipeline alg;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkFence fence;
    uint64_t sum;
};

static void world_create(struct world *w, int host_tensors, const char *layer, VkDeviceSize size,
                         const char *spv)
{
    memset(w, 0, sizeof *w);
    w->host_tensors = host_tensors;
    w->size = size;
    w->sum = FNV_OFFSET;
    w->inst = create_instance(VK_API_VERSION_1_1, layer ? &layer : NULL, layer ? 1 : 0, NULL, 0,
                              NULL);
    w->g = gpu_create(w->inst);
    for (int i = 0; i < 3; i++)
        w->t[i] = tensor_create(&w->g, size, host_tensors);

    /* kp::Algorithm: three storage buffers (bindings 0, 1, 2 = a, b, out), a push constant. */
    VkBuffer bufs[3] = {w->t[0].primary.buf, w->t[1].primary.buf, w->t[2].primary.buf};
    w->alg = pipeline_create_n(&w->g, spv, bufs, 3);

    /* kp::Sequence: one command buffer and fence, re-recorded for every eval. */
    VkCommandPoolCreateInfo cpi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = w->g.family,
    };
    CHECK(vkCreateCommandPool(w->g.dev, &cpi, NULL, &w->pool));
    VkCommandBufferAllocateInfo cbai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = w->pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    CHECK(vkAllocateCommandBuffers(w->g.dev, &cbai, &w->cmd));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    CHECK(vkCreateFence(w->g.dev, &fci, NULL, &w->fence));
}

static double ms_since(const struct timespec *t0);

/* One eval: the host sets a and b, the sequence runs, the host reads out. `phase_ms`, when not
 * NULL, gets the three parts' times: host writes, record + submit + wait, host read. */
static void world_iterate(struct world *w, uint32_t it, double *phase_ms)
{
    struct timespec tp;
    clock_gettime(CLOCK_MONOTONIC, &tp);
    struct tensor *a = &w->t[0], *b = &w->t[1], *out = &w->t[2];
    const int host = w->host_tensors;
    VkCommandBuffer cmd = w->cmd;
    const VkDeviceSize words = w->size / 4;
    for (VkDeviceSize i = 0; i < words; i++) { /* tensor->data() = ... */
        a->data[i] = (uint32_t)i * 7u + it;
        b->data[i] = (uint32_t)i ^ (it * 2654435761u);
    }
    if (phase_ms) {
        phase_ms[0] = ms_since(&tp);
        clock_gettime(CLOCK_MONOTONIC, &tp);
    }
    CHECK(vkResetCommandBuffer(cmd, 0));
    VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    CHECK(vkBeginCommandBuffer(cmd, &cbi));
    /* The previous eval's transfer read of out and shader reads of a, b are complete: the
     * fence wait ordered them before this submission's commands. */
    sync_device(cmd, a, host); /* OpTensorSyncDevice({a, b}) */
    sync_device(cmd, b, host);
    for (int i = 0; i < 3; i++) /* OpAlgoDispatch: Algorithm::recordDispatch's barriers */
        buffer_barrier(cmd, w->t[i].primary.buf, VK_ACCESS_TRANSFER_WRITE_BIT,
                       VK_ACCESS_SHADER_READ_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, w->alg.pipe);
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, w->alg.layout, 0, 1, &w->alg.set,
                            0, NULL);
    vkCmdPushConstants(cmd, w->alg.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &it);
    vkCmdDispatch(cmd, (uint32_t)(words / 64), 1, 1);
    sync_local(cmd, out, host); /* OpTensorSyncLocal({out}) */
    CHECK(vkEndCommandBuffer(cmd));
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &cmd,
    };
    CHECK(vkResetFences(w->g.dev, 1, &w->fence));
    CHECK(vkQueueSubmit(w->g.queue, 1, &si, w->fence));
    CHECK(vkWaitForFences(w->g.dev, 1, &w->fence, VK_TRUE, UINT64_MAX));
    if (phase_ms) {
        phase_ms[1] = ms_since(&tp);
        clock_gettime(CLOCK_MONOTONIC, &tp);
    }
    w->sum = fnv1a(w->sum, out->data, (size_t)w->size); /* out->vector() */
    if (phase_ms)
        phase_ms[2] = ms_since(&tp);
}

static void world_destroy(struct world *w)
{
    vkDestroyFence(w->g.dev, w->fence, NULL);
    vkDestroyCommandPool(w->g.dev, w->pool, NULL);
    pipeline_destroy(&w->g, &w->alg);
    for (int i = 0; i < 3; i++)
        tensor_destroy(&w->g, &w->t[i], w->host_tensors);
    vkDestroyDevice(w->g.dev, NULL);
    vkDestroyInstance(w->inst, NULL);
}

static double ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

int main(int argc, char **argv)
{
    const int interleave = argc >= 4 && strcmp(argv[1], "interleave") == 0;
    if (argc < 4 || (strcmp(argv[1], "staging") && strcmp(argv[1], "zero") && !interleave)) {
        fprintf(stderr, "usage: c_tensors staging|zero|interleave ITERS MIB [SPV]\n");
        return 1;
    }
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

    if (!interleave) {
        struct world w;
        world_create(&w, strcmp(argv[1], "zero") == 0, NULL, size, spv);
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (uint32_t it = 0; it < iters; it++) {
            iteration_mark(it);
            world_iterate(&w, it, NULL);
        }
        /* stderr (not compared between modes): the loop's wall time, for scripts/real-libs.sh */
        fprintf(stderr, "loop_ms %.3f\n", ms_since(&t0));
        printf("tensors 3 x %ld MiB, %u iterations: checksum %016llx\n", mib, iters,
               (unsigned long long)w.sum);
        world_destroy(&w);
        return 0;
    }

    /* base, echo, twin: one process, an iteration of each per round, the order rotating. */
    static const char *const names[3] = {"base", "echo", "twin"};
    struct world ws[3];
    world_create(&ws[0], 0, NULL, size, spv);
    world_create(&ws[1], 0, "VK_LAYER_echo", size, spv);
    world_create(&ws[2], 1, NULL, size, spv);
    for (uint32_t it = 0; it < iters; it++) {
        double ms[3], ph[3][3];
        for (int k = 0; k < 3; k++) {
            int i = (int)((it + (uint32_t)k) % 3);
            struct timespec t0;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            world_iterate(&ws[i], it, ph[i]);
            ms[i] = ms_since(&t0);
        }
        fprintf(stderr, "round %u %.3f %.3f %.3f\n", it, ms[0], ms[1], ms[2]);
        fprintf(stderr, "phases %u", it);
        for (int i = 0; i < 3; i++)
            fprintf(stderr, " %.3f %.3f %.3f", ph[i][0], ph[i][1], ph[i][2]);
        fprintf(stderr, "\n");
    }
    for (int i = 0; i < 3; i++) {
        printf("%s: tensors 3 x %ld MiB, %u iterations: checksum %016llx\n", names[i], mib, iters,
               (unsigned long long)ws[i].sum);
        world_destroy(&ws[i]);
    }
    return 0;
}
