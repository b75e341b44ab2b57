/* Per-call cost microbenchmark (issue 15), for instruction counts under callgrind:
 *
 *   c_calls create N [BYTES]   vkCreateBuffer + vkDestroyBuffer of a 4 KiB (or BYTES) buffer, N times
 *   c_calls submit N   an empty vkQueueSubmit with a fence, vkWaitForFences, vkResetFences
 *   c_calls record N   vkBeginCommandBuffer, one 4 KiB vkCmdCopyBuffer, vkEndCommandBuffer
 *   c_calls run N      vkQueueSubmit of a command buffer recorded once (one 4 KiB copy) with a
 *                      fence, vkWaitForFences, vkResetFences: a submission with GPU work
 *   c_calls where      for each device command the layer can hook, the shared object that the
 *                      device's dispatch pointer (vkGetDeviceProcAddr) lives in: "NAME OBJECT".
 *                      A command whose pointer is not in echo runs no echo instruction at all.
 *
 * Only `bench_loop` is meant to be counted (`valgrind --tool=callgrind
 * --toggle-collect=bench_loop`): instance and device creation stay out, and the difference of two
 * loop lengths gives the cost of one iteration on the calling thread. Prints "done N".
 *
 * The validation gate (scripts/validate-all.sh) runs it with these arguments:
 * gate-args: create 10
 * gate-args: submit 10
 * gate-args: record 10
 * gate-args: run 10
 */
#define _GNU_SOURCE /* dladdr */
#include "common.h"

#include <dlfcn.h>

enum what { CREATE, SUBMIT, RECORD, RUN };

struct ctx {
    struct gpu *g;
    VkFence fence;
    VkCommandBuffer cmd;
    VkBuffer src, dst;
};

static VkDeviceSize create_size = 4096;

static VkBufferCreateInfo small_buffer(void)
{
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = create_size,
        .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    return bci;
}

/* The measured loop: kept out of line so callgrind can toggle on it by name. */
__attribute__((noinline)) static void bench_loop(struct ctx *c, enum what w, uint32_t n)
{
    VkBufferCreateInfo bci = small_buffer();
    VkCommandBufferBeginInfo begin = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    VkBufferCopy region = {.size = 4096};
    VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
    VkSubmitInfo work = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &c->cmd,
    };
    for (uint32_t i = 0; i < n; i++) {
        switch (w) {
        case CREATE: {
            VkBuffer b;
            CHECK(vkCreateBuffer(c->g->dev, &bci, NULL, &b));
            vkDestroyBuffer(c->g->dev, b, NULL);
            break;
        }
        case SUBMIT:
            CHECK(vkQueueSubmit(c->g->queue, 1, &submit, c->fence));
            CHECK(vkWaitForFences(c->g->dev, 1, &c->fence, VK_TRUE, UINT64_MAX));
            CHECK(vkResetFences(c->g->dev, 1, &c->fence));
            break;
        case RECORD:
            CHECK(vkBeginCommandBuffer(c->cmd, &begin));
            vkCmdCopyBuffer(c->cmd, c->src, c->dst, 1, &region);
            CHECK(vkEndCommandBuffer(c->cmd));
            break;
        case RUN:
            CHECK(vkQueueSubmit(c->g->queue, 1, &work, c->fence));
            CHECK(vkWaitForFences(c->g->dev, 1, &c->fence, VK_TRUE, UINT64_MAX));
            CHECK(vkResetFences(c->g->dev, 1, &c->fence));
            break;
        }
    }
}

/* The shared object (its file name alone) that holds `f`, or "?" when dladdr cannot tell. */
static const char *object_of(PFN_vkVoidFunction f)
{
    Dl_info info;
    if (!f)
        return "(none)";
    if (!dladdr((void *)f, &info) || !info.dli_fname)
        return "?";
    const char *slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

static int where(void)
{
    static const char *const names[] = {
        "vkAllocateMemory", "vkFreeMemory", "vkMapMemory", "vkUnmapMemory",
        "vkCreateBuffer", "vkDestroyBuffer", "vkBindBufferMemory", "vkGetBufferMemoryRequirements",
        "vkBeginCommandBuffer", "vkEndCommandBuffer", "vkCmdCopyBuffer", "vkCmdDispatch",
        "vkCmdPipelineBarrier", "vkCmdBindDescriptorSets", "vkUpdateDescriptorSets",
        "vkQueueSubmit", "vkQueueWaitIdle", "vkWaitForFences", "vkResetFences", "vkDeviceWaitIdle",
    };
    VkInstance inst = create_instance(VK_API_VERSION_1_1, NULL, 0, NULL, 0, NULL);
    struct gpu g = gpu_create(inst);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        printf("%s %s\n", names[i], object_of(vkGetDeviceProcAddr(g.dev, names[i])));
    vkDestroyDevice(g.dev, NULL);
    vkDestroyInstance(inst, NULL);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "where"))
        return where();
    if (argc < 3) {
        fprintf(stderr, "usage: c_calls create|submit|record|run N [BYTES]\n");
        return 2;
    }
    enum what w = !strcmp(argv[1], "create") ? CREATE
                  : !strcmp(argv[1], "submit") ? SUBMIT
                  : !strcmp(argv[1], "run")    ? RUN
                                               : RECORD;
    uint32_t n = parse_iters(argv[2]);
    if (argc > 3)
        create_size = strtoull(argv[3], NULL, 10);
    VkInstance inst = create_instance(VK_API_VERSION_1_1, NULL, 0, NULL, 0, NULL);
    struct gpu g = gpu_create(inst);
    struct ctx c = {.g = &g};

    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    CHECK(vkCreateFence(g.dev, &fci, NULL, &c.fence));
    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = g.family,
    };
    VkCommandPool pool;
    CHECK(vkCreateCommandPool(g.dev, &pci, NULL, &pool));
    VkCommandBufferAllocateInfo cai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    CHECK(vkAllocateCommandBuffers(g.dev, &cai, &c.cmd));
    struct buffer src = buffer_create(&g, 4096, VK_BUFFER_USAGE_TRANSFER_SRC_BIT, MEM_STAGING);
    struct buffer dst = buffer_create(&g, 4096, VK_BUFFER_USAGE_TRANSFER_DST_BIT, MEM_STAGING);
    c.src = src.buf;
    c.dst = dst.buf;
    if (w == RUN) {
        /* Recorded once, submitted every iteration. */
        VkCommandBufferBeginInfo once = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        VkBufferCopy region = {.size = 4096};
        CHECK(vkBeginCommandBuffer(c.cmd, &once));
        vkCmdCopyBuffer(c.cmd, c.src, c.dst, 1, &region);
        CHECK(vkEndCommandBuffer(c.cmd));
    }

    bench_loop(&c, w, n);

    buffer_destroy(&g, &src);
    buffer_destroy(&g, &dst);
    vkDestroyCommandPool(g.dev, pool, NULL);
    vkDestroyFence(g.dev, c.fence, NULL);
    vkDestroyDevice(g.dev, NULL);
    vkDestroyInstance(inst, NULL);
    printf("done %u\n", n);
    return 0;
}
