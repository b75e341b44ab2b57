/* Shared helpers of the C test corpus (issue 11, DESIGN §8 "real-program patterns"): small C
 * programs linked with plain -lvulkan (the loader's vkGetInstanceProcAddr in the global symbol
 * scope, unlike Rust programs that dlopen libvulkan), Vulkan 1.0 core unless a program says
 * otherwise. Every failure prints where it happened and exits 1; results go to stdout as
 * deterministic checksums so that runs with and without the layer compare byte for byte.
 *
 * The workload (struct work): a staging buffer h (HOST_VISIBLE|HOST_COHERENT) holding a pattern, a
 * device-local buffer d, an output buffer o (device-local) and a readback buffer r (host-visible).
 * One iteration: copy h->d, dispatch c_double.comp (o[i] = d[i]*2 + 1 + iter), copy o->r, submit,
 * wait on a fence, fold r into an FNV-1a checksum. The shader's SPIR-V path comes from argv or from
 * the environment variable ECHO_C_SPV. */
#ifndef ECHO_C_COMMON_H
#define ECHO_C_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

#define MIB ((VkDeviceSize)1 << 20)

static inline void die_at(const char *file, int line, const char *what, long code)
{
    fprintf(stderr, "%s:%d: %s failed (%ld)\n", file, line, what, code);
    exit(1);
}

/* CHECK(vkCall(...)): anything but VK_SUCCESS ends the program with status 1. */
#define CHECK(expr)                                                                                \
    do {                                                                                           \
        VkResult check_r_ = (expr);                                                                \
        if (check_r_ != VK_SUCCESS)                                                                \
            die_at(__FILE__, __LINE__, #expr, (long)check_r_);                                     \
    } while (0)

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond))                                                                               \
            die_at(__FILE__, __LINE__, #cond, 0);                                                  \
    } while (0)

/* ---- checksum ---------------------------------------------------------------------------- */

#define FNV_OFFSET 0xcbf29ce484222325ull

static inline uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* ---- per-iteration marker ----------------------------------------------------------------- */

/* Called at the start of every timed iteration. It does nothing; callgrind's
 * `--dump-before=iteration_mark` writes a count at each call, so each dump file holds exactly one
 * iteration (scripts/real-libs.sh, scripts/agreement.sh): start-up and teardown stay out without
 * differencing two runs (whose start-ups differ by thousands of instructions). */
__attribute__((noinline, unused)) static void iteration_mark(uint32_t it)
{
    __asm__ volatile("" : : "r"(it) : "memory");
}

/* ---- instance, device, queue -------------------------------------------------------------- */

/* A VkInstance with apiVersion `api` (0: no VkApplicationInfo at all), the given layers and
 * extensions, and `next` chained into VkInstanceCreateInfo::pNext. */
static inline VkInstance create_instance(uint32_t api, const char *const *layers, uint32_t nlayers,
                                         const char *const *exts, uint32_t nexts, const void *next)
{
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "echo-c-corpus",
        .applicationVersion = 1,
        .pEngineName = "none",
        .apiVersion = api,
    };
    VkInstanceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = next,
        .pApplicationInfo = api ? &app : NULL,
        .enabledLayerCount = nlayers,
        .ppEnabledLayerNames = layers,
        .enabledExtensionCount = nexts,
        .ppEnabledExtensionNames = exts,
    };
    VkInstance inst;
    CHECK(vkCreateInstance(&ci, NULL, &inst));
    return inst;
}

static inline VkPhysicalDevice first_physical_device(VkInstance inst)
{
    uint32_t n = 1;
    VkPhysicalDevice pd = VK_NULL_HANDLE;
    VkResult r = vkEnumeratePhysicalDevices(inst, &n, &pd);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE)
        die_at(__FILE__, __LINE__, "vkEnumeratePhysicalDevices", (long)r);
    REQUIRE(n >= 1 && pd != VK_NULL_HANDLE);
    return pd;
}

/* One logical device with one compute queue, and what the programs need to know about it. */
struct gpu {
    VkPhysicalDevice phys;
    VkPhysicalDeviceMemoryProperties mem;
    VkDevice dev;
    uint32_t family;
    VkQueue queue;
    char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
};

static inline struct gpu gpu_create(VkInstance inst)
{
    struct gpu g;
    memset(&g, 0, sizeof g);
    g.phys = first_physical_device(inst);
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(g.phys, &props);
    memcpy(g.name, props.deviceName, sizeof g.name);
    vkGetPhysicalDeviceMemoryProperties(g.phys, &g.mem);

    uint32_t nf = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(g.phys, &nf, NULL);
    REQUIRE(nf >= 1 && nf <= 64);
    VkQueueFamilyProperties fams[64];
    vkGetPhysicalDeviceQueueFamilyProperties(g.phys, &nf, fams);
    g.family = UINT32_MAX;
    for (uint32_t i = 0; i < nf && g.family == UINT32_MAX; i++)
        if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            g.family = i;
    REQUIRE(g.family != UINT32_MAX);

    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = g.family,
        .queueCount = 1,
        .pQueuePriorities = &prio,
    };
    VkDeviceCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &qci,
    };
    CHECK(vkCreateDevice(g.phys, &dci, NULL, &g.dev));
    vkGetDeviceQueue(g.dev, g.family, 0, &g.queue);
    return g;
}

/* ---- memory types and buffers ------------------------------------------------------------ */

enum mem_kind {
    MEM_STAGING,  /* HOST_VISIBLE|HOST_COHERENT: the app writes it */
    MEM_DEVICE,   /* DEVICE_LOCAL, preferably not HOST_VISIBLE (a discrete GPU's VRAM) */
    MEM_READBACK, /* HOST_VISIBLE|HOST_COHERENT: the app reads it */
};

/* The memory type a discrete-GPU program would pick: among `bits`, the first type with every
 * `want` flag and no `avoid` flag, else the first with every `want` flag. */
static inline uint32_t find_memory_type(const struct gpu *g, uint32_t bits, enum mem_kind kind)
{
    VkMemoryPropertyFlags want = kind == MEM_DEVICE
                                     ? VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
                                     : VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                           VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    VkMemoryPropertyFlags avoid = kind == MEM_DEVICE ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT : 0;
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < g->mem.memoryTypeCount; i++) {
            VkMemoryPropertyFlags f = g->mem.memoryTypes[i].propertyFlags;
            if ((bits & (1u << i)) && (f & want) == want && (pass == 1 || !(f & avoid)))
                return i;
        }
    die_at(__FILE__, __LINE__, "find_memory_type", (long)kind);
    return 0;
}

struct buffer {
    VkBuffer buf;
    VkDeviceMemory mem;
    VkDeviceSize size;
};

/* Creates the buffer and allocates its own memory, without binding it. */
static inline struct buffer buffer_unbound(const struct gpu *g, VkDeviceSize size,
                                           VkBufferUsageFlags usage, enum mem_kind kind)
{
    struct buffer b = {.size = size};
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = usage,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    CHECK(vkCreateBuffer(g->dev, &bci, NULL, &b.buf));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(g->dev, b.buf, &req);
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = find_memory_type(g, req.memoryTypeBits, kind),
    };
    CHECK(vkAllocateMemory(g->dev, &ai, NULL, &b.mem));
    return b;
}

static inline void buffer_bind(const struct gpu *g, const struct buffer *b)
{
    CHECK(vkBindBufferMemory(g->dev, b->buf, b->mem, 0));
}

static inline struct buffer buffer_create(const struct gpu *g, VkDeviceSize size,
                                          VkBufferUsageFlags usage, enum mem_kind kind)
{
    struct buffer b = buffer_unbound(g, size, usage, kind);
    buffer_bind(g, &b);
    return b;
}

static inline void buffer_destroy(const struct gpu *g, struct buffer *b)
{
    vkDestroyBuffer(g->dev, b->buf, NULL);
    vkFreeMemory(g->dev, b->mem, NULL);
}

/* A command pool whose buffers can be reset, `n` (1 to 4) primary command buffers from it and a
 * fence: what the test programs record and submit with. */
struct cmds {
    VkCommandPool pool;
    VkCommandBuffer cmd[4];
    VkFence fence;
};

static inline struct cmds cmds_create(const struct gpu *g, uint32_t n)
{
    REQUIRE(n >= 1 && n <= 4);
    struct cmds c;
    memset(&c, 0, sizeof c);
    VkCommandPoolCreateInfo cpci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = g->family,
    };
    CHECK(vkCreateCommandPool(g->dev, &cpci, NULL, &c.pool));
    VkCommandBufferAllocateInfo cbai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = c.pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = n,
    };
    CHECK(vkAllocateCommandBuffers(g->dev, &cbai, c.cmd));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    CHECK(vkCreateFence(g->dev, &fci, NULL, &c.fence));
    return c;
}

/* Resets `cmd` and begins it for one submission. */
static inline void cmd_begin(VkCommandBuffer cmd)
{
    CHECK(vkResetCommandBuffer(cmd, 0));
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    CHECK(vkBeginCommandBuffer(cmd, &bi));
}

/* Ends `cmd`, submits it alone with `fence` (reset first) and waits for the fence. */
static inline void cmd_submit_wait(const struct gpu *g, VkCommandBuffer cmd, VkFence fence)
{
    CHECK(vkEndCommandBuffer(cmd));
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &cmd,
    };
    CHECK(vkResetFences(g->dev, 1, &fence));
    CHECK(vkQueueSubmit(g->queue, 1, &si, fence));
    CHECK(vkWaitForFences(g->dev, 1, &fence, VK_TRUE, UINT64_MAX));
}

static inline void cmds_destroy(const struct gpu *g, struct cmds *c)
{
    vkDestroyFence(g->dev, c->fence, NULL);
    vkDestroyCommandPool(g->dev, c->pool, NULL);
}

/* Fills mapped memory with pattern `seed`: word i = seed * 2654435761 + i * 7. */
static inline void fill_pattern(const struct gpu *g, VkDeviceMemory mem, VkDeviceSize size,
                                uint32_t seed)
{
    void *p;
    CHECK(vkMapMemory(g->dev, mem, 0, size, 0, &p));
    uint32_t *w = p;
    for (VkDeviceSize i = 0; i < size / 4; i++)
        w[i] = seed * 2654435761u + (uint32_t)i * 7u;
    vkUnmapMemory(g->dev, mem);
}

/* ---- compute pipeline -------------------------------------------------------------------- */

/* The SPIR-V path: argv[index] when given, else $ECHO_C_SPV. */
static inline const char *spv_path(int argc, char **argv, int index)
{
    if (index < argc)
        return argv[index];
    const char *e = getenv("ECHO_C_SPV");
    if (!e || !*e) {
        fprintf(stderr, "usage: pass the SPIR-V path of c_double.comp or set ECHO_C_SPV\n");
        exit(1);
    }
    return e;
}

struct pipeline {
    VkShaderModule module;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
    VkPipeline pipe;
    VkDescriptorPool pool;
    VkDescriptorSet set;
};

/* A compute pipeline of `spv` with one descriptor set of `n` (at most 8) storage buffers, binding
 * i = bufs[i], and a 4-byte push constant. */
static inline struct pipeline pipeline_create_n(const struct gpu *g, const char *spv,
                                                const VkBuffer *bufs, uint32_t n_bufs)
{
    REQUIRE(n_bufs >= 1 && n_bufs <= 8);
    struct pipeline p;
    FILE *f = fopen(spv, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", spv);
        exit(1);
    }
    REQUIRE(fseek(f, 0, SEEK_END) == 0);
    long n = ftell(f);
    REQUIRE(n > 0 && n % 4 == 0);
    rewind(f);
    uint32_t *code = malloc((size_t)n);
    REQUIRE(code && fread(code, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    VkShaderModuleCreateInfo smci = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = (size_t)n,
        .pCode = code,
    };
    CHECK(vkCreateShaderModule(g->dev, &smci, NULL, &p.module));
    free(code);

    VkDescriptorSetLayoutBinding b[8];
    for (uint32_t i = 0; i < n_bufs; i++)
        b[i] = (VkDescriptorSetLayoutBinding){
            .binding = i,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
    VkDescriptorSetLayoutCreateInfo dslci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = n_bufs,
        .pBindings = b,
    };
    CHECK(vkCreateDescriptorSetLayout(g->dev, &dslci, NULL, &p.set_layout));
    VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 4};
    VkPipelineLayoutCreateInfo plci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &p.set_layout,
        .pushConstantRangeCount = 1,
        .pPushConstantRanges = &pcr,
    };
    CHECK(vkCreatePipelineLayout(g->dev, &plci, NULL, &p.layout));
    VkComputePipelineCreateInfo cpci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage =
            {
                .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = p.module,
                .pName = "main",
            },
        .layout = p.layout,
    };
    CHECK(vkCreateComputePipelines(g->dev, VK_NULL_HANDLE, 1, &cpci, NULL, &p.pipe));

    VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, n_bufs};
    VkDescriptorPoolCreateInfo dpci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
        .maxSets = 1,
        .poolSizeCount = 1,
        .pPoolSizes = &ps,
    };
    CHECK(vkCreateDescriptorPool(g->dev, &dpci, NULL, &p.pool));
    VkDescriptorSetAllocateInfo dsai = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        .descriptorPool = p.pool,
        .descriptorSetCount = 1,
        .pSetLayouts = &p.set_layout,
    };
    CHECK(vkAllocateDescriptorSets(g->dev, &dsai, &p.set));
    VkDescriptorBufferInfo bi[8];
    VkWriteDescriptorSet w[8];
    for (uint32_t i = 0; i < n_bufs; i++) {
        bi[i] = (VkDescriptorBufferInfo){bufs[i], 0, VK_WHOLE_SIZE};
        w[i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = p.set,
            .dstBinding = i,
            .descriptorCount = 1,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .pBufferInfo = &bi[i],
        };
    }
    vkUpdateDescriptorSets(g->dev, n_bufs, w, 0, NULL);
    return p;
}

/* The c_double.comp pipeline with one descriptor set: binding 0 = `in`, binding 1 = `out`. */
static inline struct pipeline pipeline_create(const struct gpu *g, const char *spv,
                                              const struct buffer *in, const struct buffer *out)
{
    VkBuffer bufs[2] = {in->buf, out->buf};
    return pipeline_create_n(g, spv, bufs, 2);
}

static inline void pipeline_destroy(const struct gpu *g, struct pipeline *p)
{
    vkDestroyDescriptorPool(g->dev, p->pool, NULL);
    vkDestroyPipeline(g->dev, p->pipe, NULL);
    vkDestroyPipelineLayout(g->dev, p->layout, NULL);
    vkDestroyDescriptorSetLayout(g->dev, p->set_layout, NULL);
    vkDestroyShaderModule(g->dev, p->module, NULL);
}

/* ---- the upload -> dispatch -> readback workload ------------------------------------------ */

enum staging_order {
    BIND_THEN_WRITE,  /* bind h, then map -> write -> unmap */
    WRITE_THEN_BIND,  /* map -> write -> unmap, and only then vkBindBufferMemory(h) (renderers) */
};

struct work {
    VkDeviceSize size;
    struct buffer h, d, o, r;
    struct pipeline p;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkFence fence;
    uint32_t iter;
    uint64_t checksum;
};

static inline struct work work_create(const struct gpu *g, const char *spv, VkDeviceSize size,
                                      uint32_t seed, enum staging_order order)
{
    struct work w;
    memset(&w, 0, sizeof w);
    w.size = size;
    w.checksum = FNV_OFFSET;
    const VkBufferUsageFlags src = VK_BUFFER_USAGE_TRANSFER_SRC_BIT;
    const VkBufferUsageFlags dst = VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    const VkBufferUsageFlags ssbo = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    w.h = buffer_unbound(g, size, src, MEM_STAGING);
    if (order == BIND_THEN_WRITE)
        buffer_bind(g, &w.h);
    fill_pattern(g, w.h.mem, size, seed);
    if (order == WRITE_THEN_BIND)
        buffer_bind(g, &w.h);
    w.d = buffer_create(g, size, dst | ssbo, MEM_DEVICE);
    w.o = buffer_create(g, size, src | ssbo, MEM_DEVICE);
    w.r = buffer_create(g, size, dst, MEM_READBACK);
    w.p = pipeline_create(g, spv, &w.d, &w.o);

    VkCommandPoolCreateInfo cpci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = g->family,
    };
    CHECK(vkCreateCommandPool(g->dev, &cpci, NULL, &w.pool));
    VkCommandBufferAllocateInfo cbai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = w.pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    CHECK(vkAllocateCommandBuffers(g->dev, &cbai, &w.cmd));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    CHECK(vkCreateFence(g->dev, &fci, NULL, &w.fence));
    return w;
}

/* Test knob ECHO_C_NO_BARRIERS=1: record no barriers at all, a hazard synchronization validation
 * must report (the tests' proof that they hear the validation layer). */
static inline void buffer_barrier(VkCommandBuffer cmd, VkBuffer buf, VkAccessFlags src_access,
                                  VkAccessFlags dst_access, VkPipelineStageFlags src_stage,
                                  VkPipelineStageFlags dst_stage)
{
    const char *skip = getenv("ECHO_C_NO_BARRIERS");
    if (skip && *skip && strcmp(skip, "0") != 0)
        return;
    VkBufferMemoryBarrier b = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER,
        .srcAccessMask = src_access,
        .dstAccessMask = dst_access,
        .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
        .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
        .buffer = buf,
        .offset = 0,
        .size = VK_WHOLE_SIZE,
    };
    vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 0, NULL, 1, &b, 0, NULL);
}

/* One iteration: copy h->d, dispatch, copy o->r, submit, wait, fold r into the checksum. */
static inline void work_iterate(const struct gpu *g, struct work *w)
{
    CHECK(vkResetCommandBuffer(w->cmd, 0));
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    CHECK(vkBeginCommandBuffer(w->cmd, &bi));
    const VkPipelineStageFlags xfer = VK_PIPELINE_STAGE_TRANSFER_BIT;
    const VkPipelineStageFlags cs = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
    /* The previous iteration's dispatch read d and wrote o: order the copies after it. */
    buffer_barrier(w->cmd, w->d.buf, VK_ACCESS_SHADER_READ_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, cs,
                   xfer);
    VkBufferCopy region = {0, 0, w->size};
    vkCmdCopyBuffer(w->cmd, w->h.buf, w->d.buf, 1, &region);
    buffer_barrier(w->cmd, w->d.buf, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT, xfer,
                   cs);
    buffer_barrier(w->cmd, w->o.buf, VK_ACCESS_TRANSFER_READ_BIT, VK_ACCESS_SHADER_WRITE_BIT, xfer,
                   cs);
    vkCmdBindPipeline(w->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, w->p.pipe);
    vkCmdBindDescriptorSets(w->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, w->p.layout, 0, 1, &w->p.set,
                            0, NULL);
    vkCmdPushConstants(w->cmd, w->p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &w->iter);
    vkCmdDispatch(w->cmd, (uint32_t)(w->size / 4 / 64), 1, 1);
    buffer_barrier(w->cmd, w->o.buf, VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_TRANSFER_READ_BIT, cs,
                   xfer);
    vkCmdCopyBuffer(w->cmd, w->o.buf, w->r.buf, 1, &region);
    buffer_barrier(w->cmd, w->r.buf, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT, xfer,
                   VK_PIPELINE_STAGE_HOST_BIT);
    CHECK(vkEndCommandBuffer(w->cmd));

    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &w->cmd,
    };
    CHECK(vkResetFences(g->dev, 1, &w->fence));
    CHECK(vkQueueSubmit(g->queue, 1, &si, w->fence));
    CHECK(vkWaitForFences(g->dev, 1, &w->fence, VK_TRUE, UINT64_MAX));

    void *p;
    CHECK(vkMapMemory(g->dev, w->r.mem, 0, w->size, 0, &p));
    w->checksum = fnv1a(w->checksum, p, (size_t)w->size);
    vkUnmapMemory(g->dev, w->r.mem);
    w->iter++;
}

static inline void work_destroy(const struct gpu *g, struct work *w)
{
    vkDestroyFence(g->dev, w->fence, NULL);
    vkDestroyCommandPool(g->dev, w->pool, NULL);
    pipeline_destroy(g, &w->p);
    buffer_destroy(g, &w->h);
    buffer_destroy(g, &w->d);
    buffer_destroy(g, &w->o);
    buffer_destroy(g, &w->r);
}

/* Parses a positive iteration count. */
static inline uint32_t parse_iters(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 1 || v > 1000) {
        fprintf(stderr, "bad iteration count %s\n", s);
        exit(1);
    }
    return (uint32_t)v;
}

/* The upload program of c_upload, c_api10 and c_validation: a 4 MiB workload with the
 * staging buffer written before it is bound, `iters` iterations, checksum on stdout. */
static inline void upload_run(VkInstance inst, const char *spv, uint32_t iters)
{
    struct gpu g = gpu_create(inst);
    struct work w = work_create(&g, spv, 4 * MIB, 1, WRITE_THEN_BIND);
    for (uint32_t i = 0; i < iters; i++)
        work_iterate(&g, &w);
    printf("iterations %u\nchecksum %016llx\n", iters, (unsigned long long)w.checksum);
    work_destroy(&g, &w);
    /* Valid no-ops that generic cleanup code makes (ffmpeg's Vulkan filters free null memory). */
    vkFreeMemory(g.dev, VK_NULL_HANDLE, NULL);
    vkDestroyBuffer(g.dev, VK_NULL_HANDLE, NULL);
    vkDestroyDevice(g.dev, NULL);
}

#endif
