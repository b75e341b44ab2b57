/* (issue 26) c_vkfft staging|zero ITERS [small|large]: VkFFT (Debian libvkfft-dev, header-only,
 * its Vulkan backend compiles its shaders at run time with glslang: Debian glslang-dev) used the
 * way VkFFT's own sample code (benchmark_scripts/vkFFT_scripts/src/utils_VkFFT.cpp) does it.
 *
 * Cases: 1D C2C with a batch, a 2D C2C, and a larger 1D batch (sizes below). For each case, one
 * device buffer `buffer` (STORAGE|TRANSFER_SRC|TRANSFER_DST, DEVICE_LOCAL) and one VkFFT
 * application (normalize = 1). One iteration of a case:
 *   transferDataFromCPU: a fresh staging buffer (HOST_VISIBLE|HOST_COHERENT, TRANSFER_SRC) is
 *     created, mapped, filled with this iteration's input, copied to `buffer` in a one-time
 *     command buffer (submit, fence wait), and destroyed;
 *   performVulkanFFT: forward FFT, submit, wait; inverse FFT, submit, wait (as the sample's
 *     performVulkanFFT: a command buffer per launch);
 *   transferDataToCPU: a fresh staging buffer (TRANSFER_DST) receives a copy of `buffer`, is
 *     mapped and read, and destroyed.
 * `zero` is the zero-copy twin: `buffer` is allocated HOST_VISIBLE|HOST_COHERENT (DEVICE_LOCAL
 * too where a type has both), written and read through its own mapping; no staging, no copies.
 *
 * Test knob ECHO_C_PLANT_FILL=1 (issue 35): every transfer's command buffer also records real
 * work beside its copy, a vkCmdFillBuffer of a small readback buffer `plant` (before the copy in
 * an upload, after it in a download), read after the fence; stdout gets one more line, the
 * checksum of every fill. Echo elides the copies but must run those command buffers.
 *
 * stderr: `loop_ms T`, the wall time of the iterations without the host's checks
 * (scripts/real-libs.sh reads it). stdout: per case, the FNV-1a checksum of every iteration's result bytes and the largest
 * |inverse(forward(x)) - x| over the case ("roundtrip ok" below 1e-3); identical in every mode and
 * in both variants. The gate runs it small:
 * gate-args: staging 2 small
 * gate-args: zero 2 small
 *
 * cc-args: -std=gnu11 -O0 -g
 * (-O0: the 1.5 MB header takes 70 s at -O1 on this 2-core machine, 9 s at -O0; the FFT itself
 * runs in the driver. -g: `vkecho lint` names this file's lines, tests/tests/lint.rs.)
 * link-args: -lglslang -lMachineIndependent -lOSDependent -lGenericCodeGen -lOGLCompiler -lSPIRV -lSPIRV-Tools-opt -lSPIRV-Tools
 * link-args: -lglslang-default-resource-limits -lstdc++ -lm -lpthread
 */
#define VKFFT_BACKEND 0
#include <glslang/Public/resource_limits_c.h>
#include <math.h>
#include <vkFFT.h>

#include "common.h"
#include <time.h>

struct fft_case {
    const char *name;
    uint64_t dim, nx, ny, batch;
};

static const struct fft_case SMALL[] = {
    {"1d-1024x16", 1, 1024, 1, 16},
    {"2d-256x256", 2, 256, 256, 1},
    {"1d-4096x64", 1, 4096, 1, 64},
};
static const struct fft_case LARGE[] = {
    {"1d-4096x512", 1, 4096, 1, 512},
    {"2d-1024x1024", 2, 1024, 1024, 1},
    {"2d-2048x2048", 2, 2048, 2048, 1},
};

static int zero_copy;
/* ECHO_C_PLANT_FILL: the fill beside each transfer's copy, its buffer and its checksum. */
static int plant_on;
static struct buffer plant;
static uint32_t plant_seq;
static uint64_t plant_sum = FNV_OFFSET;
/* Wall time of the timed part (transfers and FFTs; the checks excluded), all cases. */
static double loop_ms;

static VkCommandBuffer begin_one(const struct gpu *g, VkCommandPool pool)
{
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    VkCommandBuffer cmd;
    CHECK(vkAllocateCommandBuffers(g->dev, &ai, &cmd));
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    CHECK(vkBeginCommandBuffer(cmd, &bi));
    return cmd;
}

static void end_submit_wait(const struct gpu *g, VkCommandPool pool, VkCommandBuffer cmd,
                            VkFence fence)
{
    CHECK(vkEndCommandBuffer(cmd));
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &cmd,
    };
    CHECK(vkQueueSubmit(g->queue, 1, &si, fence));
    CHECK(vkWaitForFences(g->dev, 1, &fence, VK_TRUE, UINT64_MAX));
    CHECK(vkResetFences(g->dev, 1, &fence));
    vkFreeCommandBuffers(g->dev, pool, 1, &cmd);
}

/* The sample's transferDataFromCPU / transferDataToCPU: a staging buffer per transfer. */
static void transfer(const struct gpu *g, VkCommandPool pool, VkFence fence, VkBuffer buffer,
                     float *host, VkDeviceSize size, int to_device)
{
    VkBufferUsageFlags usage =
        to_device ? VK_BUFFER_USAGE_TRANSFER_SRC_BIT : VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    struct buffer s = buffer_create(g, size, usage, to_device ? MEM_STAGING : MEM_READBACK);
    void *p;
    if (to_device) {
        CHECK(vkMapMemory(g->dev, s.mem, 0, size, 0, &p));
        memcpy(p, host, (size_t)size);
        vkUnmapMemory(g->dev, s.mem);
    }
    VkCommandBuffer cmd = begin_one(g, pool);
    VkBufferCopy region = {0, 0, size};
    if (plant_on && to_device)
        vkCmdFillBuffer(cmd, plant.buf, 0, plant.size, 0x9e3779b9u * ++plant_seq);
    if (to_device)
        vkCmdCopyBuffer(cmd, s.buf, buffer, 1, &region);
    else
        vkCmdCopyBuffer(cmd, buffer, s.buf, 1, &region);
    if (plant_on && !to_device)
        vkCmdFillBuffer(cmd, plant.buf, 0, plant.size, 0x9e3779b9u * ++plant_seq);
    end_submit_wait(g, pool, cmd, fence);
    if (plant_on) {
        void *q;
        CHECK(vkMapMemory(g->dev, plant.mem, 0, plant.size, 0, &q));
        plant_sum = fnv1a(plant_sum, q, (size_t)plant.size);
        vkUnmapMemory(g->dev, plant.mem);
    }
    if (!to_device) {
        CHECK(vkMapMemory(g->dev, s.mem, 0, size, 0, &p));
        memcpy(host, p, (size_t)size);
        vkUnmapMemory(g->dev, s.mem);
    }
    buffer_destroy(g, &s);
}

/* The sample's performVulkanFFT: one launch in its own command buffer. */
static void perform(const struct gpu *g, VkCommandPool pool, VkFence fence, VkFFTApplication *app,
                    int inverse)
{
    VkCommandBuffer cmd = begin_one(g, pool);
    VkFFTLaunchParams lp;
    memset(&lp, 0, sizeof lp);
    lp.commandBuffer = &cmd;
    VkFFTResult r = VkFFTAppend(app, inverse, &lp);
    if (r != VKFFT_SUCCESS)
        die_at(__FILE__, __LINE__, "VkFFTAppend", (long)r);
    end_submit_wait(g, pool, cmd, fence);
}

static void run_case(struct gpu *g, VkCommandPool pool, VkFence fence, const struct fft_case *c,
                     uint32_t iters)
{
    uint64_t n = c->nx * c->ny * c->batch;
    VkDeviceSize size = n * 2 * sizeof(float);
    struct buffer b = buffer_create(g,
                                    size,
                                    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                        VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                        VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                    zero_copy ? MEM_STAGING : MEM_DEVICE);
    float *mapped = NULL;
    if (zero_copy)
        CHECK(vkMapMemory(g->dev, b.mem, 0, size, 0, (void **)&mapped));

    VkFFTConfiguration conf;
    memset(&conf, 0, sizeof conf);
    conf.FFTdim = c->dim;
    conf.size[0] = c->nx;
    conf.size[1] = c->ny;
    conf.numberBatches = c->batch;
    conf.normalize = 1;
    conf.physicalDevice = &g->phys;
    conf.device = &g->dev;
    conf.queue = &g->queue;
    conf.commandPool = &pool;
    conf.fence = &fence;
    conf.isCompilerInitialized = 1;
    conf.buffer = &b.buf;
    uint64_t bsize = size;
    conf.bufferSize = &bsize;
    VkFFTApplication app;
    memset(&app, 0, sizeof app);
    VkFFTResult r = initializeVkFFT(&app, conf);
    if (r != VKFFT_SUCCESS)
        die_at(__FILE__, __LINE__, "initializeVkFFT", (long)r);

    float *in = malloc((size_t)size), *out = malloc((size_t)size);
    REQUIRE(in && out);
    uint64_t sum = FNV_OFFSET;
    double max_err = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint32_t it = 0; it < iters; it++) {
        iteration_mark(it);
        for (uint64_t i = 0; i < 2 * n; i++)
            in[i] = (float)((i * 7 + it * 13) % 1024) / 512.0f - 1.0f;
        if (zero_copy)
            memcpy(mapped, in, (size_t)size);
        else
            transfer(g, pool, fence, b.buf, in, size, 1);
        perform(g, pool, fence, &app, -1);
        perform(g, pool, fence, &app, 1);
        if (zero_copy)
            memcpy(out, mapped, (size_t)size);
        else
            transfer(g, pool, fence, b.buf, out, size, 0);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        loop_ms += (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        sum = fnv1a(sum, out, (size_t)size);
        for (uint64_t i = 0; i < 2 * n; i++) {
            double e = fabs((double)out[i] - (double)in[i]);
            if (e > max_err)
                max_err = e;
        }
        clock_gettime(CLOCK_MONOTONIC, &t0);
    }
    printf("%s %llu bytes: checksum %016llx roundtrip %s\n", c->name, (unsigned long long)size,
           (unsigned long long)sum, max_err < 1e-3 ? "ok" : "FAILED");
    fprintf(stderr, "%s: max |ifft(fft(x)) - x| = %.3g\n", c->name, max_err);
    deleteVkFFT(&app);
    free(in);
    free(out);
    if (zero_copy)
        vkUnmapMemory(g->dev, b.mem);
    buffer_destroy(g, &b);
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "staging") && strcmp(argv[1], "zero"))) {
        fprintf(stderr, "usage: c_vkfft staging|zero ITERS [small|large]\n");
        return 1;
    }
    zero_copy = strcmp(argv[1], "zero") == 0;
    uint32_t iters = parse_iters(argv[2]);
    int large = argc > 3 && strcmp(argv[3], "large") == 0;
    VkInstance inst = create_instance(VK_API_VERSION_1_1, NULL, 0, NULL, 0, NULL);
    struct gpu g = gpu_create(inst);
    VkCommandPoolCreateInfo cpci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = g.family,
    };
    VkCommandPool pool;
    CHECK(vkCreateCommandPool(g.dev, &cpci, NULL, &pool));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    CHECK(vkCreateFence(g.dev, &fci, NULL, &fence));
    const char *pf = getenv("ECHO_C_PLANT_FILL");
    plant_on = pf && *pf && strcmp(pf, "0") != 0;
    if (plant_on)
        plant = buffer_create(&g, 4096, VK_BUFFER_USAGE_TRANSFER_DST_BIT, MEM_READBACK);
    glslang_initialize_process();
    const struct fft_case *cases = large ? LARGE : SMALL;
    for (int i = 0; i < 3; i++)
        run_case(&g, pool, fence, &cases[i], iters);
    glslang_finalize_process();
    if (plant_on) {
        printf("plant: %u fills, checksum %016llx\n", plant_seq, (unsigned long long)plant_sum);
        buffer_destroy(&g, &plant);
    }
    fprintf(stderr, "loop_ms %.3f\n", loop_ms);
    vkDestroyFence(g.dev, fence, NULL);
    vkDestroyCommandPool(g.dev, pool, NULL);
    vkDestroyDevice(g.dev, NULL);
    vkDestroyInstance(inst, NULL);
    return 0;
}
