/* (issue 33 item 3) c_modern ITERS [core|khr] [set|push] [SPV]: the discrete-GPU upload of
 * c_upload written with the Vulkan 1.4 paths echo follows (maintenance5, maintenance6,
 * map_memory2), so that their pairs are taken and the staging allocation is left unmade on a
 * Vulkan 1.4 stack (scripts/modern-check.sh) as with the 1.0 calls.
 *
 * Four 4 MiB buffers, each created with VkBufferUsageFlags2CreateInfo (VkBufferCreateInfo::usage
 * 0, so the usage is only in the chained structure) and given its own allocation, bound at once,
 * in this order: a device-local d, a device-local o, a host-visible staging buffer h and a
 * host-visible readback buffer r (the device buffers exist before their staging allocations are
 * made, so echo can leave both staging allocations unmade). Each of ITERS iterations: the host maps h with vkMapMemory2, writes
 * the iteration's input and unmaps it with vkUnmapMemory2; one submission copies h -> d, runs
 * c_double.comp (o[i] = d[i] * 2 + 1 + iter) with the descriptors of d and o bound by
 * vkCmdBindDescriptorSets2 (`set`) or pushed by vkCmdPushDescriptorSet2 (`push`) and the
 * iteration pushed by vkCmdPushConstants2, copies o -> r; after the fence the host maps r with
 * vkMapMemory2 and folds it into the checksum.
 *
 * `core` (the default) asks for apiVersion 1.4 and uses the core commands and structures, with
 * VkPhysicalDeviceVulkan14Features' maintenance5, maintenance6 (and pushDescriptor for `push`)
 * enabled. `khr` asks for apiVersion 1.3 and enables VK_KHR_map_memory2, VK_KHR_maintenance5,
 * VK_KHR_maintenance6 (and VK_KHR_push_descriptor) with their features, and calls the KHR names.
 * On a device that has neither (Debian 12's lavapipe 22.3.6 is Vulkan 1.3 without these
 * extensions; the Jetson Nano's test table is Vulkan 1.2) the program makes the same work with
 * the Vulkan 1.0 calls (vkMapMemory, VkBufferCreateInfo::usage, vkCmdBindDescriptorSets,
 * vkCmdPushConstants), says so on its first line, and computes the same checksum.
 *
 * Debian 12's headers (1.3.239) have none of the 1.4 structures, so they are defined here with
 * the layouts and sType values of the registry (layer/registry/vk.xml, 1.4.359), and the
 * commands are loaded with vkGetDeviceProcAddr.
 *
 * Output: `calls: ...` (which paths ran), `iterations N`, `checksum X`.
 *
 * The validation gate (scripts/validate-all.sh) runs it with these arguments:
 * gate-args: 3 core set
 * gate-args: 3 khr push
 */
#include "common.h"

#define SIZE (4 * MIB)
#define API_1_4 VK_MAKE_API_VERSION(0, 1, 4, 0)

/* ---- Vulkan 1.4 definitions the 1.3.239 headers lack (vk.xml 1.4.359) -------------------- */

#define ST_PHYSICAL_DEVICE_VULKAN_1_4_FEATURES ((VkStructureType)55)
#define ST_MEMORY_MAP_INFO ((VkStructureType)1000271000)
#define ST_MEMORY_UNMAP_INFO ((VkStructureType)1000271001)
#define ST_PHYSICAL_DEVICE_MAINTENANCE_5_FEATURES ((VkStructureType)1000470000)
#define ST_BUFFER_USAGE_FLAGS_2_CREATE_INFO ((VkStructureType)1000470006)
#define ST_PHYSICAL_DEVICE_MAINTENANCE_6_FEATURES ((VkStructureType)1000545000)
#define ST_BIND_DESCRIPTOR_SETS_INFO ((VkStructureType)1000545003)
#define ST_PUSH_CONSTANTS_INFO ((VkStructureType)1000545004)
#define ST_PUSH_DESCRIPTOR_SET_INFO ((VkStructureType)1000545005)

/* VkBufferUsageFlagBits2: the low bits are VkBufferUsageFlagBits'. */
#define USAGE2_TRANSFER_SRC ((uint64_t)0x1)
#define USAGE2_TRANSFER_DST ((uint64_t)0x2)
#define USAGE2_STORAGE_BUFFER ((uint64_t)0x20)

typedef struct {
    VkStructureType sType;
    const void *pNext;
    VkFlags flags; /* VkMemoryMapFlags */
    VkDeviceMemory memory;
    VkDeviceSize offset;
    VkDeviceSize size;
} EchoMemoryMapInfo;

typedef struct {
    VkStructureType sType;
    const void *pNext;
    VkFlags flags; /* VkMemoryUnmapFlags */
    VkDeviceMemory memory;
} EchoMemoryUnmapInfo;

typedef struct {
    VkStructureType sType;
    const void *pNext;
    uint64_t usage; /* VkBufferUsageFlags2 */
} EchoBufferUsageFlags2CreateInfo;

typedef struct {
    VkStructureType sType;
    const void *pNext;
    VkShaderStageFlags stageFlags;
    VkPipelineLayout layout;
    uint32_t firstSet;
    uint32_t descriptorSetCount;
    const VkDescriptorSet *pDescriptorSets;
    uint32_t dynamicOffsetCount;
    const uint32_t *pDynamicOffsets;
} EchoBindDescriptorSetsInfo;

typedef struct {
    VkStructureType sType;
    const void *pNext;
    VkPipelineLayout layout;
    VkShaderStageFlags stageFlags;
    uint32_t offset;
    uint32_t size;
    const void *pValues;
} EchoPushConstantsInfo;

typedef struct {
    VkStructureType sType;
    const void *pNext;
    VkShaderStageFlags stageFlags;
    VkPipelineLayout layout;
    uint32_t set;
    uint32_t descriptorWriteCount;
    const VkWriteDescriptorSet *pDescriptorWrites;
} EchoPushDescriptorSetInfo;

typedef struct {
    VkStructureType sType;
    void *pNext;
    VkBool32 globalPriorityQuery;
    VkBool32 shaderSubgroupRotate;
    VkBool32 shaderSubgroupRotateClustered;
    VkBool32 shaderFloatControls2;
    VkBool32 shaderExpectAssume;
    VkBool32 rectangularLines;
    VkBool32 bresenhamLines;
    VkBool32 smoothLines;
    VkBool32 stippledRectangularLines;
    VkBool32 stippledBresenhamLines;
    VkBool32 stippledSmoothLines;
    VkBool32 vertexAttributeInstanceRateDivisor;
    VkBool32 vertexAttributeInstanceRateZeroDivisor;
    VkBool32 indexTypeUint8;
    VkBool32 dynamicRenderingLocalRead;
    VkBool32 maintenance5;
    VkBool32 maintenance6;
    VkBool32 pipelineProtectedAccess;
    VkBool32 pipelineRobustness;
    VkBool32 hostImageCopy;
    VkBool32 pushDescriptor;
} EchoPhysicalDeviceVulkan14Features;

typedef struct {
    VkStructureType sType;
    void *pNext;
    VkBool32 feature; /* maintenance5 / maintenance6 */
} EchoPhysicalDeviceMaintenanceFeatures;

typedef VkResult(VKAPI_PTR *PFN_EchoMapMemory2)(VkDevice, const EchoMemoryMapInfo *, void **);
typedef VkResult(VKAPI_PTR *PFN_EchoUnmapMemory2)(VkDevice, const EchoMemoryUnmapInfo *);
typedef void(VKAPI_PTR *PFN_EchoCmdBindDescriptorSets2)(VkCommandBuffer,
                                                        const EchoBindDescriptorSetsInfo *);
typedef void(VKAPI_PTR *PFN_EchoCmdPushConstants2)(VkCommandBuffer, const EchoPushConstantsInfo *);
typedef void(VKAPI_PTR *PFN_EchoCmdPushDescriptorSet2)(VkCommandBuffer,
                                                       const EchoPushDescriptorSetInfo *);

/* ---- which calls this run makes ----------------------------------------------------------- */

enum path { PATH_V10, PATH_CORE, PATH_KHR };

struct modern {
    enum path path;
    int push; /* descriptors pushed (vkCmdPushDescriptorSet2) instead of a bound set */
    PFN_EchoMapMemory2 map2;
    PFN_EchoUnmapMemory2 unmap2;
    PFN_EchoCmdBindDescriptorSets2 bind_sets2;
    PFN_EchoCmdPushConstants2 push_constants2;
    PFN_EchoCmdPushDescriptorSet2 push_set2;
};

static int has_extension(const VkExtensionProperties *exts, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(exts[i].extensionName, name) == 0)
            return 1;
    return 0;
}

/* Decides the path for physical device `pd` (the instance asked for `api`): the wanted one
 * when the device has what it needs, else the 1.0 calls (`why` says what was missing). */
static enum path choose_path(VkPhysicalDevice pd, uint32_t api, enum path want, int push,
                             const char **why)
{
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    uint32_t eff = props.apiVersion < api ? props.apiVersion : api;
    if (want == PATH_CORE) {
        if (eff < API_1_4) {
            *why = "the device is older than Vulkan 1.4";
            return PATH_V10;
        }
        EchoPhysicalDeviceVulkan14Features f14 = {.sType = ST_PHYSICAL_DEVICE_VULKAN_1_4_FEATURES};
        VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                        .pNext = &f14};
        vkGetPhysicalDeviceFeatures2(pd, &f2);
        if (!f14.maintenance5 || !f14.maintenance6 || (push && !f14.pushDescriptor)) {
            *why = "the device lacks maintenance5, maintenance6 or pushDescriptor";
            return PATH_V10;
        }
        return PATH_CORE;
    }
    /* khr: Vulkan 1.3 (maintenance5's dependencies core) and the extensions. */
    if (eff < VK_API_VERSION_1_3) {
        *why = "the device is older than Vulkan 1.3";
        return PATH_V10;
    }
    uint32_t n = 0;
    CHECK(vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL));
    VkExtensionProperties *exts = calloc(n ? n : 1, sizeof *exts);
    REQUIRE(exts);
    CHECK(vkEnumerateDeviceExtensionProperties(pd, NULL, &n, exts));
    int ok = has_extension(exts, n, "VK_KHR_map_memory2") &&
             has_extension(exts, n, "VK_KHR_maintenance5") &&
             has_extension(exts, n, "VK_KHR_maintenance6") &&
             (!push || has_extension(exts, n, "VK_KHR_push_descriptor"));
    free(exts);
    if (!ok) {
        *why = "the device lacks VK_KHR_map_memory2, VK_KHR_maintenance5, VK_KHR_maintenance6 or "
               "VK_KHR_push_descriptor";
        return PATH_V10;
    }
    EchoPhysicalDeviceMaintenanceFeatures m6 = {.sType = ST_PHYSICAL_DEVICE_MAINTENANCE_6_FEATURES};
    EchoPhysicalDeviceMaintenanceFeatures m5 = {.sType = ST_PHYSICAL_DEVICE_MAINTENANCE_5_FEATURES,
                                                .pNext = &m6};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = &m5};
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    if (!m5.feature || !m6.feature) {
        *why = "the device lacks the maintenance5 or maintenance6 feature";
        return PATH_V10;
    }
    return PATH_KHR;
}

static PFN_vkVoidFunction load(VkDevice dev, const char *name)
{
    PFN_vkVoidFunction f = vkGetDeviceProcAddr(dev, name);
    if (!f) {
        fprintf(stderr, "vkGetDeviceProcAddr(%s) returned NULL\n", name);
        exit(1);
    }
    return f;
}

/* The device, with what the path needs enabled, and the path's commands. */
static struct gpu device_create(VkInstance inst, struct modern *m)
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
    EchoPhysicalDeviceVulkan14Features f14 = {
        .sType = ST_PHYSICAL_DEVICE_VULKAN_1_4_FEATURES,
        .maintenance5 = VK_TRUE,
        .maintenance6 = VK_TRUE,
        .pushDescriptor = m->push ? VK_TRUE : VK_FALSE,
    };
    EchoPhysicalDeviceMaintenanceFeatures m6 = {.sType = ST_PHYSICAL_DEVICE_MAINTENANCE_6_FEATURES,
                                                .feature = VK_TRUE};
    EchoPhysicalDeviceMaintenanceFeatures m5 = {.sType = ST_PHYSICAL_DEVICE_MAINTENANCE_5_FEATURES,
                                                .pNext = &m6,
                                                .feature = VK_TRUE};
    const char *khr_exts[] = {"VK_KHR_map_memory2", "VK_KHR_maintenance5", "VK_KHR_maintenance6",
                              "VK_KHR_push_descriptor"};
    VkDeviceCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &qci,
    };
    if (m->path == PATH_CORE) {
        dci.pNext = &f14;
    } else if (m->path == PATH_KHR) {
        dci.pNext = &m5;
        dci.enabledExtensionCount = m->push ? 4 : 3;
        dci.ppEnabledExtensionNames = khr_exts;
    }
    CHECK(vkCreateDevice(g.phys, &dci, NULL, &g.dev));
    vkGetDeviceQueue(g.dev, g.family, 0, &g.queue);

    if (m->path == PATH_CORE) {
        m->map2 = (PFN_EchoMapMemory2)load(g.dev, "vkMapMemory2");
        m->unmap2 = (PFN_EchoUnmapMemory2)load(g.dev, "vkUnmapMemory2");
        m->bind_sets2 = (PFN_EchoCmdBindDescriptorSets2)load(g.dev, "vkCmdBindDescriptorSets2");
        m->push_constants2 = (PFN_EchoCmdPushConstants2)load(g.dev, "vkCmdPushConstants2");
        if (m->push)
            m->push_set2 = (PFN_EchoCmdPushDescriptorSet2)load(g.dev, "vkCmdPushDescriptorSet2");
    } else if (m->path == PATH_KHR) {
        m->map2 = (PFN_EchoMapMemory2)load(g.dev, "vkMapMemory2KHR");
        m->unmap2 = (PFN_EchoUnmapMemory2)load(g.dev, "vkUnmapMemory2KHR");
        m->bind_sets2 = (PFN_EchoCmdBindDescriptorSets2)load(g.dev, "vkCmdBindDescriptorSets2KHR");
        m->push_constants2 = (PFN_EchoCmdPushConstants2)load(g.dev, "vkCmdPushConstants2KHR");
        if (m->push)
            m->push_set2 =
                (PFN_EchoCmdPushDescriptorSet2)load(g.dev, "vkCmdPushDescriptorSet2KHR");
    }
    return g;
}

/* ---- the calls, by path ------------------------------------------------------------------- */

static void *map_memory(const struct gpu *g, const struct modern *m, VkDeviceMemory mem)
{
    void *p = NULL;
    if (m->path == PATH_V10) {
        CHECK(vkMapMemory(g->dev, mem, 0, VK_WHOLE_SIZE, 0, &p));
    } else {
        EchoMemoryMapInfo mi = {
            .sType = ST_MEMORY_MAP_INFO,
            .memory = mem,
            .offset = 0,
            .size = VK_WHOLE_SIZE,
        };
        CHECK(m->map2(g->dev, &mi, &p));
    }
    REQUIRE(p != NULL);
    return p;
}

static void unmap_memory(const struct gpu *g, const struct modern *m, VkDeviceMemory mem)
{
    if (m->path == PATH_V10) {
        vkUnmapMemory(g->dev, mem);
    } else {
        EchoMemoryUnmapInfo ui = {.sType = ST_MEMORY_UNMAP_INFO, .memory = mem};
        CHECK(m->unmap2(g->dev, &ui));
    }
}

/* A buffer with its own allocation, bound: usage in VkBufferUsageFlags2CreateInfo on the 1.4
 * paths (VkBufferCreateInfo::usage 0, which maintenance5 ignores), else in usage. */
static struct buffer make_buffer(const struct gpu *g, const struct modern *m, uint64_t usage,
                                 enum mem_kind kind)
{
    struct buffer b = {.size = SIZE};
    EchoBufferUsageFlags2CreateInfo u2 = {.sType = ST_BUFFER_USAGE_FLAGS_2_CREATE_INFO,
                                          .usage = usage};
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = SIZE,
        .usage = (VkBufferUsageFlags)usage,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    if (m->path != PATH_V10) {
        bci.pNext = &u2;
        bci.usage = 0;
    }
    CHECK(vkCreateBuffer(g->dev, &bci, NULL, &b.buf));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(g->dev, b.buf, &req);
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = find_memory_type(g, req.memoryTypeBits, kind),
    };
    CHECK(vkAllocateMemory(g->dev, &ai, NULL, &b.mem));
    CHECK(vkBindBufferMemory(g->dev, b.buf, b.mem, 0));
    return b;
}

/* c_double.comp with set 0 = {binding 0: in, binding 1: out}, pushed or from a pool. */
static struct pipeline make_pipeline(const struct gpu *g, const struct modern *m, const char *spv,
                                     const struct buffer *in, const struct buffer *out)
{
    struct pipeline p;
    memset(&p, 0, sizeof p);
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

    VkDescriptorSetLayoutBinding b[2];
    for (uint32_t i = 0; i < 2; i++)
        b[i] = (VkDescriptorSetLayoutBinding){
            .binding = i,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
    VkDescriptorSetLayoutCreateInfo dslci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        /* VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT (1.4) has the KHR bit's value. */
        .flags = m->push ? VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR : 0,
        .bindingCount = 2,
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
    if (m->push)
        return p; /* no pool, no set: written into the command buffer */

    VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 2};
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
    VkDescriptorBufferInfo bi[2] = {{in->buf, 0, VK_WHOLE_SIZE}, {out->buf, 0, VK_WHOLE_SIZE}};
    VkWriteDescriptorSet w[2];
    for (uint32_t i = 0; i < 2; i++)
        w[i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = p.set,
            .dstBinding = i,
            .descriptorCount = 1,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .pBufferInfo = &bi[i],
        };
    vkUpdateDescriptorSets(g->dev, 2, w, 0, NULL);
    return p;
}

/* The descriptors and the push constant of one dispatch. */
static void bind_for_dispatch(VkCommandBuffer cmd, const struct modern *m,
                              const struct pipeline *p, const struct buffer *in,
                              const struct buffer *out, const uint32_t *iter)
{
    if (m->path == PATH_V10) {
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &p->set, 0,
                                NULL);
        vkCmdPushConstants(cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, iter);
        return;
    }
    if (m->push) {
        VkDescriptorBufferInfo bi[2] = {{in->buf, 0, VK_WHOLE_SIZE}, {out->buf, 0, VK_WHOLE_SIZE}};
        VkWriteDescriptorSet w[2];
        for (uint32_t i = 0; i < 2; i++)
            w[i] = (VkWriteDescriptorSet){
                .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                .dstBinding = i,
                .descriptorCount = 1,
                .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                .pBufferInfo = &bi[i],
            };
        EchoPushDescriptorSetInfo pi = {
            .sType = ST_PUSH_DESCRIPTOR_SET_INFO,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
            .layout = p->layout,
            .set = 0,
            .descriptorWriteCount = 2,
            .pDescriptorWrites = w,
        };
        m->push_set2(cmd, &pi);
    } else {
        EchoBindDescriptorSetsInfo bi = {
            .sType = ST_BIND_DESCRIPTOR_SETS_INFO,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
            .layout = p->layout,
            .firstSet = 0,
            .descriptorSetCount = 1,
            .pDescriptorSets = &p->set,
        };
        m->bind_sets2(cmd, &bi);
    }
    EchoPushConstantsInfo pc = {
        .sType = ST_PUSH_CONSTANTS_INFO,
        .layout = p->layout,
        .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        .offset = 0,
        .size = 4,
        .pValues = iter,
    };
    m->push_constants2(cmd, &pc);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: c_modern ITERS [core|khr] [set|push] [SPV]\n");
        return 1;
    }
    uint32_t iters = parse_iters(argv[1]);
    struct modern m;
    memset(&m, 0, sizeof m);
    enum path want = PATH_CORE;
    int spv_arg = argc; /* none: $ECHO_C_SPV */
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "core") == 0)
            want = PATH_CORE;
        else if (strcmp(argv[i], "khr") == 0)
            want = PATH_KHR;
        else if (strcmp(argv[i], "set") == 0)
            m.push = 0;
        else if (strcmp(argv[i], "push") == 0)
            m.push = 1;
        else if (spv_arg == argc)
            spv_arg = i;
        else {
            fprintf(stderr, "c_modern: unexpected argument %s\n", argv[i]);
            return 1;
        }
    }
    const char *spv = spv_path(argc, argv, spv_arg);

    const uint32_t api = want == PATH_CORE ? API_1_4 : VK_API_VERSION_1_3;
    VkInstance inst = create_instance(api, NULL, 0, NULL, 0, NULL);
    const char *why = "";
    m.path = choose_path(first_physical_device(inst), api, want, m.push, &why);
    if (m.path == PATH_V10) {
        m.push = 0;
        printf("calls: Vulkan 1.0 (%s)\n", why);
    } else {
        printf("calls: %s: vkMapMemory2%s, VkBufferUsageFlags2CreateInfo, %s, "
               "vkCmdPushConstants2%s\n",
               m.path == PATH_CORE ? "Vulkan 1.4 core" : "KHR extensions on Vulkan 1.3",
               m.path == PATH_KHR ? "KHR" : "",
               m.push ? "vkCmdPushDescriptorSet2" : "vkCmdBindDescriptorSets2",
               m.path == PATH_KHR ? " (KHR names)" : "");
    }
    struct gpu g = device_create(inst, &m);

    /* The device-local buffers first, then the staging buffers that feed and drain them. */
    struct buffer d = make_buffer(&g, &m, USAGE2_TRANSFER_DST | USAGE2_STORAGE_BUFFER, MEM_DEVICE);
    struct buffer o = make_buffer(&g, &m, USAGE2_TRANSFER_SRC | USAGE2_STORAGE_BUFFER, MEM_DEVICE);
    struct buffer h = make_buffer(&g, &m, USAGE2_TRANSFER_SRC, MEM_STAGING);
    struct buffer r = make_buffer(&g, &m, USAGE2_TRANSFER_DST, MEM_READBACK);
    struct pipeline p = make_pipeline(&g, &m, spv, &d, &o);
    struct cmds c = cmds_create(&g, 1);
    VkCommandBuffer cmd = c.cmd[0];

    uint64_t checksum = FNV_OFFSET;
    const VkPipelineStageFlags xfer = VK_PIPELINE_STAGE_TRANSFER_BIT;
    const VkPipelineStageFlags cs = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
    for (uint32_t it = 0; it < iters; it++) {
        iteration_mark(it);
        uint32_t *w = map_memory(&g, &m, h.mem);
        for (VkDeviceSize i = 0; i < SIZE / 4; i++)
            w[i] = (it + 1) * 2654435761u + (uint32_t)i * 7u;
        unmap_memory(&g, &m, h.mem);

        cmd_begin(cmd);
        buffer_barrier(cmd, d.buf, VK_ACCESS_SHADER_READ_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, cs,
                       xfer);
        VkBufferCopy region = {0, 0, SIZE};
        vkCmdCopyBuffer(cmd, h.buf, d.buf, 1, &region);
        buffer_barrier(cmd, d.buf, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT, xfer,
                       cs);
        buffer_barrier(cmd, o.buf, VK_ACCESS_TRANSFER_READ_BIT, VK_ACCESS_SHADER_WRITE_BIT, xfer,
                       cs);
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipe);
        bind_for_dispatch(cmd, &m, &p, &d, &o, &it);
        vkCmdDispatch(cmd, (uint32_t)(SIZE / 4 / 64), 1, 1);
        buffer_barrier(cmd, o.buf, VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_TRANSFER_READ_BIT, cs,
                       xfer);
        vkCmdCopyBuffer(cmd, o.buf, r.buf, 1, &region);
        buffer_barrier(cmd, r.buf, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT, xfer,
                       VK_PIPELINE_STAGE_HOST_BIT);
        cmd_submit_wait(&g, cmd, c.fence);

        void *rp = map_memory(&g, &m, r.mem);
        checksum = fnv1a(checksum, rp, (size_t)SIZE);
        unmap_memory(&g, &m, r.mem);
    }
    printf("iterations %u\nchecksum %016llx\n", iters, (unsigned long long)checksum);

    cmds_destroy(&g, &c);
    pipeline_destroy(&g, &p);
    buffer_destroy(&g, &h);
    buffer_destroy(&g, &d);
    buffer_destroy(&g, &o);
    buffer_destroy(&g, &r);
    vkDestroyDevice(g.dev, NULL);
    vkDestroyInstance(inst, NULL);
    return 0;
}
