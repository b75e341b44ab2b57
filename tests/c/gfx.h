/* Graphics helpers of the C corpus (issue 44): what c_draw.c and c_draw_race.c share, so that
 * each program shows only its own pattern. Vulkan 1.3 instance; a device with one graphics queue.
 *
 * The workload (struct gfx): five inputs, each a host-visible staging buffer h_* the host writes
 * through a persistent mapping and a device-local buffer d_* filled from it with vkCmdCopyBuffer —
 * vertices (64 KiB), indices (64 KiB), a uniform table (16 KiB), a storage input (64 KiB) and
 * indirect draw parameters (16 KiB); one output, a device-local storage buffer d_out (64 KiB)
 * the vertex shader writes and vkCmdCopyBuffer copies into the readback buffer h_out; a 64x64
 * R8G8B8A8_UINT colour attachment copied into the readback buffer img_rb; and a host-visible
 * storage buffer `hits` the fragment shader counts into and the host reads through its mapping.
 *
 * The draw (shaders/c_draw.vert, c_draw.frag, compiled into headers by tests/build.rs): one
 * 1-pixel point per vertex at the centre of the pixel its attribute names, with a flat integer
 * colour: every value the programs print is exact, the same on every driver.
 *
 * Recording is split in parts (gfx_record's `parts`) so that a program can put them in one
 * submission or spread them over several:
 *   GFX_UPLOAD     every h_* -> d_* copy, and d_out cleared (vkCmdFillBuffer)
 *   GFX_RENDER     the draw, in a render pass (vkCmdBeginRenderPass) or with dynamic rendering
 *                  (vkCmdBeginRendering, or vkCmdBeginRenderingKHR before 1.3), as vkCmdDraw, vkCmdDrawIndexed, vkCmdDrawIndirect or
 *                  vkCmdDrawIndexedIndirect
 *   GFX_READ_IMAGE the colour attachment -> img_rb
 *   GFX_READ_OUT   d_out -> h_out
 * Each part starts with the barrier that orders it after whatever came before it in submission
 * order (the previous iteration included), so any split is correctly synchronized. */
#ifndef ECHO_C_GFX_H
#define ECHO_C_GFX_H

#include "common.h"
#include "c_draw_frag.h"
#include "c_draw_vert.h"

#define GFX_W 64u
#define GFX_H 64u
#define GFX_VERTS 4096u                 /* uvec4 each: 64 KiB */
#define GFX_INDICES 16384u              /* uint32 each: 64 KiB */
#define GFX_UNIFORM_BYTES (16u * 1024u) /* uvec4 tab[1024] */
#define GFX_STORAGE_BYTES (64u * 1024u) /* uint s[16384] */
#define GFX_INDIRECT_BYTES (16u * 1024u)
#define GFX_INDEXED_AT 256u             /* offset of the VkDrawIndexedIndirectCommand */
#define GFX_OUT_BYTES (64u * 1024u)     /* uvec4 o[4096] */
#define GFX_HITS_BYTES 4096u            /* uint hits[1024] */
#define GFX_IMAGE_BYTES (GFX_W * GFX_H * 4u)

enum render_kind { RENDER_PASS, RENDER_DYNAMIC };
enum draw_kind { DRAW, DRAW_INDEXED, DRAW_INDIRECT, DRAW_INDEXED_INDIRECT };
enum { GFX_UPLOAD = 1, GFX_RENDER = 2, GFX_READ_IMAGE = 4, GFX_READ_OUT = 8 };
/* What gfx_write_inputs writes: each input's staging buffer, and the fragment counters (zeroed). */
enum { IN_VTX = 1, IN_IDX = 2, IN_UNI = 4, IN_STO = 8, IN_IND = 16, IN_HITS = 32, IN_ALL = 63 };

struct gfx {
    struct gpu g;
    /* vkCmdBeginRendering / vkCmdEndRendering, or their KHR forms on a device older than 1.3. */
    PFN_vkCmdBeginRendering begin_rendering;
    PFN_vkCmdEndRendering end_rendering;
    enum render_kind render;
    enum draw_kind draw;
    struct buffer h_vtx, d_vtx, h_idx, d_idx, h_uni, d_uni, h_sto, d_sto, h_ind, d_ind;
    struct buffer d_out, h_out, hits, img_rb;
    void *m_vtx, *m_idx, *m_uni, *m_sto, *m_ind, *m_out, *m_hits, *m_img;
    VkImage image;
    VkDeviceMemory image_mem;
    VkImageView view;
    VkRenderPass pass;
    VkFramebuffer fb;
    VkShaderModule vs, fs;
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    VkPipeline pipe;
    VkDescriptorPool pool;
    VkDescriptorSet set;
};

/* Parses RENDER (`pass` | `dynamic`) and DRAW (`draw` | `indexed` | `indirect` |
 * `indexed-indirect`); exits 1 on anything else. */
static inline enum render_kind parse_render(const char *s)
{
    if (strcmp(s, "pass") == 0)
        return RENDER_PASS;
    if (strcmp(s, "dynamic") == 0)
        return RENDER_DYNAMIC;
    fprintf(stderr, "RENDER is pass or dynamic, not %s\n", s);
    exit(1);
}

static inline enum draw_kind parse_draw(const char *s)
{
    const char *names[] = {"draw", "indexed", "indirect", "indexed-indirect"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0)
            return (enum draw_kind)i;
    fprintf(stderr, "DRAW is draw, indexed, indirect or indexed-indirect, not %s\n", s);
    exit(1);
}

/* Prints why the program cannot run here and ends it with status 0: the same line in every
 * mode, so a driver without the feature is a visible skip, not a failure. */
static inline void skip(const char *why)
{
    printf("skip: %s\n", why);
    exit(0);
}

/* Whether the device has the extension `name`. */
static inline int has_device_extension(VkPhysicalDevice phys, const char *name)
{
    uint32_t n = 0;
    CHECK(vkEnumerateDeviceExtensionProperties(phys, NULL, &n, NULL));
    VkExtensionProperties *e = calloc(n ? n : 1, sizeof *e);
    REQUIRE(e != NULL);
    CHECK(vkEnumerateDeviceExtensionProperties(phys, NULL, &n, e));
    int found = 0;
    for (uint32_t i = 0; i < n && !found; i++)
        found = strcmp(e[i].extensionName, name) == 0;
    free(e);
    return found;
}

/* A device with one graphics queue and what the draw needs: vertex and fragment shader stores,
 * plus dynamic rendering (Vulkan 1.3, or VK_KHR_dynamic_rendering on an older device: the
 * Jetson Nano's table is Vulkan 1.2) and timeline semaphores (1.2) when asked for. */
static inline struct gpu gfx_gpu_create(VkInstance inst, int dynamic, int timeline)
{
    struct gpu g;
    memset(&g, 0, sizeof g);
    g.phys = first_physical_device(inst);
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(g.phys, &props);
    memcpy(g.name, props.deviceName, sizeof g.name);
    vkGetPhysicalDeviceMemoryProperties(g.phys, &g.mem);
    const char *ext = VK_KHR_DYNAMIC_RENDERING_EXTENSION_NAME;
    int dynamic_ext = dynamic && props.apiVersion < VK_API_VERSION_1_3;
    if (dynamic_ext && !has_device_extension(g.phys, ext))
        skip("dynamic rendering needs a Vulkan 1.3 device or VK_KHR_dynamic_rendering");
    if (timeline && props.apiVersion < VK_API_VERSION_1_2)
        skip("timeline semaphores need a Vulkan 1.2 device");

    /* The feature structs of the extensions (core in 1.2 and 1.3 under the same layout). */
    VkPhysicalDeviceDynamicRenderingFeatures dr = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DYNAMIC_RENDERING_FEATURES};
    VkPhysicalDeviceTimelineSemaphoreFeatures ts = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES};
    VkPhysicalDeviceFeatures2 f2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    if (timeline) {
        ts.pNext = f2.pNext;
        f2.pNext = &ts;
    }
    if (dynamic) {
        dr.pNext = f2.pNext;
        f2.pNext = &dr;
    }
    vkGetPhysicalDeviceFeatures2(g.phys, &f2);
    if (!f2.features.vertexPipelineStoresAndAtomics || !f2.features.fragmentStoresAndAtomics)
        skip("no vertexPipelineStoresAndAtomics / fragmentStoresAndAtomics");
    if (dynamic && !dr.dynamicRendering)
        skip("no dynamicRendering");
    if (timeline && !ts.timelineSemaphore)
        skip("no timelineSemaphore");
    /* Enable only what the programs use: the same chain, every other feature off. */
    memset(&f2.features, 0, sizeof f2.features);
    f2.features.vertexPipelineStoresAndAtomics = VK_TRUE;
    f2.features.fragmentStoresAndAtomics = VK_TRUE;

    uint32_t nf = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(g.phys, &nf, NULL);
    REQUIRE(nf >= 1 && nf <= 64);
    VkQueueFamilyProperties fams[64];
    vkGetPhysicalDeviceQueueFamilyProperties(g.phys, &nf, fams);
    g.family = UINT32_MAX;
    for (uint32_t i = 0; i < nf && g.family == UINT32_MAX; i++)
        if (fams[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)
            g.family = i;
    if (g.family == UINT32_MAX)
        skip("no graphics queue");
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = g.family,
        .queueCount = 1,
        .pQueuePriorities = &prio,
    };
    VkDeviceCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = &f2,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &qci,
        .enabledExtensionCount = dynamic_ext ? 1 : 0,
        .ppEnabledExtensionNames = &ext,
    };
    CHECK(vkCreateDevice(g.phys, &dci, NULL, &g.dev));
    vkGetDeviceQueue(g.dev, g.family, 0, &g.queue);
    return g;
}

/* A buffer of `kind` with its own allocation; host-visible ones are mapped for good into *map. */
static inline struct buffer gfx_buffer(const struct gpu *g, VkDeviceSize size,
                                       VkBufferUsageFlags usage, enum mem_kind kind, void **map)
{
    struct buffer b = buffer_create(g, size, usage, kind);
    if (map)
        CHECK(vkMapMemory(g->dev, b.mem, 0, VK_WHOLE_SIZE, 0, map));
    return b;
}

static inline VkShaderModule gfx_module(const struct gpu *g, const uint32_t *code, size_t bytes)
{
    VkShaderModuleCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = bytes,
        .pCode = code,
    };
    VkShaderModule m;
    CHECK(vkCreateShaderModule(g->dev, &ci, NULL, &m));
    return m;
}

/* The colour attachment, its render pass and framebuffer (RENDER_PASS only), the descriptor set
 * and the points pipeline. */
static inline void gfx_pipeline(struct gfx *x)
{
    const struct gpu *g = &x->g;
    const VkFormat fmt = VK_FORMAT_R8G8B8A8_UINT;
    VkImageCreateInfo ici = {
        .sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO,
        .imageType = VK_IMAGE_TYPE_2D,
        .format = fmt,
        .extent = {GFX_W, GFX_H, 1},
        .mipLevels = 1,
        .arrayLayers = 1,
        .samples = VK_SAMPLE_COUNT_1_BIT,
        .tiling = VK_IMAGE_TILING_OPTIMAL,
        .usage = VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | VK_IMAGE_USAGE_TRANSFER_SRC_BIT,
        .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
    };
    CHECK(vkCreateImage(g->dev, &ici, NULL, &x->image));
    VkMemoryRequirements req;
    vkGetImageMemoryRequirements(g->dev, x->image, &req);
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = find_memory_type(g, req.memoryTypeBits, MEM_DEVICE),
    };
    CHECK(vkAllocateMemory(g->dev, &ai, NULL, &x->image_mem));
    CHECK(vkBindImageMemory(g->dev, x->image, x->image_mem, 0));
    VkImageViewCreateInfo vci = {
        .sType = VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO,
        .image = x->image,
        .viewType = VK_IMAGE_VIEW_TYPE_2D,
        .format = fmt,
        .subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1},
    };
    CHECK(vkCreateImageView(g->dev, &vci, NULL, &x->view));

    if (x->render == RENDER_PASS) {
        /* Cleared at the start, left in TRANSFER_SRC_OPTIMAL for the copy to img_rb; the
         * dependencies order it after the previous iteration's copy and before this one's. */
        VkAttachmentDescription att = {
            .format = fmt,
            .samples = VK_SAMPLE_COUNT_1_BIT,
            .loadOp = VK_ATTACHMENT_LOAD_OP_CLEAR,
            .storeOp = VK_ATTACHMENT_STORE_OP_STORE,
            .stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE,
            .stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
            .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
            .finalLayout = VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
        };
        VkAttachmentReference ref = {0, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
        VkSubpassDescription sub = {
            .pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS,
            .colorAttachmentCount = 1,
            .pColorAttachments = &ref,
        };
        VkSubpassDependency deps[2] = {
            {VK_SUBPASS_EXTERNAL, 0, VK_PIPELINE_STAGE_TRANSFER_BIT,
             VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, VK_ACCESS_TRANSFER_READ_BIT,
             VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT, 0},
            {0, VK_SUBPASS_EXTERNAL, VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
             VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
             VK_ACCESS_TRANSFER_READ_BIT, 0},
        };
        VkRenderPassCreateInfo rpci = {
            .sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO,
            .attachmentCount = 1,
            .pAttachments = &att,
            .subpassCount = 1,
            .pSubpasses = &sub,
            .dependencyCount = 2,
            .pDependencies = deps,
        };
        CHECK(vkCreateRenderPass(g->dev, &rpci, NULL, &x->pass));
        VkFramebufferCreateInfo fci = {
            .sType = VK_STRUCTURE_TYPE_FRAMEBUFFER_CREATE_INFO,
            .renderPass = x->pass,
            .attachmentCount = 1,
            .pAttachments = &x->view,
            .width = GFX_W,
            .height = GFX_H,
            .layers = 1,
        };
        CHECK(vkCreateFramebuffer(g->dev, &fci, NULL, &x->fb));
    }

    const VkShaderStageFlags vs = VK_SHADER_STAGE_VERTEX_BIT, fs = VK_SHADER_STAGE_FRAGMENT_BIT;
    VkDescriptorSetLayoutBinding b[4] = {
        {0, VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, 1, vs, NULL},
        {1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, vs, NULL},
        {2, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, vs, NULL},
        {3, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, fs, NULL},
    };
    VkDescriptorSetLayoutCreateInfo dslci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = 4,
        .pBindings = b,
    };
    CHECK(vkCreateDescriptorSetLayout(g->dev, &dslci, NULL, &x->dsl));
    VkPipelineLayoutCreateInfo plci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &x->dsl,
    };
    CHECK(vkCreatePipelineLayout(g->dev, &plci, NULL, &x->layout));
    VkDescriptorPoolSize ps[2] = {{VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, 1},
                                  {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 3}};
    VkDescriptorPoolCreateInfo dpci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
        .maxSets = 1,
        .poolSizeCount = 2,
        .pPoolSizes = ps,
    };
    CHECK(vkCreateDescriptorPool(g->dev, &dpci, NULL, &x->pool));
    VkDescriptorSetAllocateInfo dsai = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        .descriptorPool = x->pool,
        .descriptorSetCount = 1,
        .pSetLayouts = &x->dsl,
    };
    CHECK(vkAllocateDescriptorSets(g->dev, &dsai, &x->set));
    VkDescriptorBufferInfo bi[4] = {{x->d_uni.buf, 0, VK_WHOLE_SIZE},
                                    {x->d_sto.buf, 0, VK_WHOLE_SIZE},
                                    {x->d_out.buf, 0, VK_WHOLE_SIZE},
                                    {x->hits.buf, 0, VK_WHOLE_SIZE}};
    VkWriteDescriptorSet w[4];
    for (uint32_t i = 0; i < 4; i++)
        w[i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = x->set,
            .dstBinding = i,
            .descriptorCount = 1,
            .descriptorType = b[i].descriptorType,
            .pBufferInfo = &bi[i],
        };
    vkUpdateDescriptorSets(g->dev, 4, w, 0, NULL);

    x->vs = gfx_module(g, c_draw_vert, sizeof c_draw_vert);
    x->fs = gfx_module(g, c_draw_frag, sizeof c_draw_frag);
    VkPipelineShaderStageCreateInfo stages[2] = {
        {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, NULL, 0, VK_SHADER_STAGE_VERTEX_BIT,
         x->vs, "main", NULL},
        {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, NULL, 0,
         VK_SHADER_STAGE_FRAGMENT_BIT, x->fs, "main", NULL},
    };
    /* pixel (x, y), colour, value: the last vertex's value is the buffer's last 4 bytes. */
    VkVertexInputBindingDescription vb = {0, 16, VK_VERTEX_INPUT_RATE_VERTEX};
    VkVertexInputAttributeDescription va[3] = {{0, 0, VK_FORMAT_R32G32_UINT, 0},
                                               {1, 0, VK_FORMAT_R32_UINT, 8},
                                               {2, 0, VK_FORMAT_R32_UINT, 12}};
    VkPipelineVertexInputStateCreateInfo vi = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO,
        .vertexBindingDescriptionCount = 1,
        .pVertexBindingDescriptions = &vb,
        .vertexAttributeDescriptionCount = 3,
        .pVertexAttributeDescriptions = va,
    };
    VkPipelineInputAssemblyStateCreateInfo ia = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO,
        .topology = VK_PRIMITIVE_TOPOLOGY_POINT_LIST,
    };
    VkViewport vp = {0, 0, (float)GFX_W, (float)GFX_H, 0, 1};
    VkRect2D sc = {{0, 0}, {GFX_W, GFX_H}};
    VkPipelineViewportStateCreateInfo vps = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO,
        .viewportCount = 1,
        .pViewports = &vp,
        .scissorCount = 1,
        .pScissors = &sc,
    };
    VkPipelineRasterizationStateCreateInfo rs = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO,
        .polygonMode = VK_POLYGON_MODE_FILL,
        .cullMode = VK_CULL_MODE_NONE,
        .frontFace = VK_FRONT_FACE_COUNTER_CLOCKWISE,
        .lineWidth = 1.0f,
    };
    VkPipelineMultisampleStateCreateInfo ms = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO,
        .rasterizationSamples = VK_SAMPLE_COUNT_1_BIT,
    };
    VkPipelineColorBlendAttachmentState cba = {.colorWriteMask = 0xf};
    VkPipelineColorBlendStateCreateInfo cb = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO,
        .attachmentCount = 1,
        .pAttachments = &cba,
    };
    VkPipelineRenderingCreateInfo rci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO,
        .colorAttachmentCount = 1,
        .pColorAttachmentFormats = &fmt,
    };
    VkGraphicsPipelineCreateInfo gpci = {
        .sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO,
        .pNext = x->render == RENDER_DYNAMIC ? &rci : NULL,
        .stageCount = 2,
        .pStages = stages,
        .pVertexInputState = &vi,
        .pInputAssemblyState = &ia,
        .pViewportState = &vps,
        .pRasterizationState = &rs,
        .pMultisampleState = &ms,
        .pColorBlendState = &cb,
        .layout = x->layout,
        .renderPass = x->pass,
    };
    CHECK(vkCreateGraphicsPipelines(g->dev, VK_NULL_HANDLE, 1, &gpci, NULL, &x->pipe));
}

/* Every buffer, the attachment and the pipeline. */
static inline void gfx_create(struct gfx *x, VkInstance inst, enum render_kind render,
                              enum draw_kind draw, int timeline)
{
    memset(x, 0, sizeof *x);
    x->render = render;
    x->draw = draw;
    x->g = gfx_gpu_create(inst, render == RENDER_DYNAMIC, timeline);
    const struct gpu *g = &x->g;
    if (render == RENDER_DYNAMIC) {
        VkPhysicalDeviceProperties props;
        vkGetPhysicalDeviceProperties(g->phys, &props);
        int core = props.apiVersion >= VK_API_VERSION_1_3;
        x->begin_rendering = (PFN_vkCmdBeginRendering)vkGetDeviceProcAddr(
            g->dev, core ? "vkCmdBeginRendering" : "vkCmdBeginRenderingKHR");
        x->end_rendering = (PFN_vkCmdEndRendering)vkGetDeviceProcAddr(
            g->dev, core ? "vkCmdEndRendering" : "vkCmdEndRenderingKHR");
        REQUIRE(x->begin_rendering && x->end_rendering);
    }
    const VkBufferUsageFlags src = VK_BUFFER_USAGE_TRANSFER_SRC_BIT;
    const VkBufferUsageFlags dst = VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    x->h_vtx = gfx_buffer(g, GFX_VERTS * 16, src, MEM_STAGING, &x->m_vtx);
    x->d_vtx = gfx_buffer(g, GFX_VERTS * 16, dst | VK_BUFFER_USAGE_VERTEX_BUFFER_BIT, MEM_DEVICE,
                          NULL);
    x->h_idx = gfx_buffer(g, GFX_INDICES * 4, src, MEM_STAGING, &x->m_idx);
    x->d_idx = gfx_buffer(g, GFX_INDICES * 4, dst | VK_BUFFER_USAGE_INDEX_BUFFER_BIT, MEM_DEVICE,
                          NULL);
    x->h_uni = gfx_buffer(g, GFX_UNIFORM_BYTES, src, MEM_STAGING, &x->m_uni);
    x->d_uni = gfx_buffer(g, GFX_UNIFORM_BYTES, dst | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT,
                          MEM_DEVICE, NULL);
    x->h_sto = gfx_buffer(g, GFX_STORAGE_BYTES, src, MEM_STAGING, &x->m_sto);
    x->d_sto = gfx_buffer(g, GFX_STORAGE_BYTES, dst | VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                          MEM_DEVICE, NULL);
    x->h_ind = gfx_buffer(g, GFX_INDIRECT_BYTES, src, MEM_STAGING, &x->m_ind);
    x->d_ind = gfx_buffer(g, GFX_INDIRECT_BYTES, dst | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT,
                          MEM_DEVICE, NULL);
    x->d_out = gfx_buffer(g, GFX_OUT_BYTES, src | dst | VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                          MEM_DEVICE, NULL);
    x->h_out = gfx_buffer(g, GFX_OUT_BYTES, dst, MEM_READBACK, &x->m_out);
    x->hits = gfx_buffer(g, GFX_HITS_BYTES, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, MEM_READBACK,
                         &x->m_hits);
    x->img_rb = gfx_buffer(g, GFX_IMAGE_BYTES, dst, MEM_READBACK, &x->m_img);
    gfx_pipeline(x);
}

/* The draw's parameters in iteration `it` (also what the indirect buffer holds): a few
 * vertices or indices fewer and further on each time, so every iteration draws differently. */
static inline VkDrawIndirectCommand gfx_draw_params(uint32_t it)
{
    uint32_t k = it % 8;
    return (VkDrawIndirectCommand){4000 - 64 * k, 1, 16 * k, 0};
}

static inline VkDrawIndexedIndirectCommand gfx_indexed_params(uint32_t it)
{
    uint32_t k = it % 8;
    return (VkDrawIndexedIndirectCommand){12000 - 500 * k, 1, 100 * k, 0, 0};
}

/* The host writes iteration `it`'s inputs (those in `which`) into the staging buffers and zeroes
 * the fragment counters (IN_HITS). Only while no GPU work that reads them is in flight — except
 * where a program says otherwise. */
static inline void gfx_write_inputs(struct gfx *x, uint32_t it, unsigned which)
{
    if (which & IN_VTX) {
        uint32_t *v = x->m_vtx;
        for (uint32_t i = 0; i < GFX_VERTS; i++) {
            uint32_t p = (i * 97u + it * 13u) & (GFX_W * GFX_H - 1); /* a permutation of pixels */
            v[4 * i + 0] = p % GFX_W;
            v[4 * i + 1] = p / GFX_W;
            v[4 * i + 2] = (i * 2654435761u) ^ (it * 40503u);
            v[4 * i + 3] = i + it * 1000u;
        }
    }
    if (which & IN_IDX) {
        uint32_t *ix = x->m_idx;
        for (uint32_t k = 0; k < GFX_INDICES; k++)
            ix[k] = (k * 7u + it) & (GFX_VERTS - 1);
    }
    if (which & IN_UNI) {
        uint32_t *u = x->m_uni;
        for (uint32_t j = 0; j < GFX_UNIFORM_BYTES / 4; j++)
            u[j] = j * 3u + it * 7919u;
    }
    if (which & IN_STO) {
        uint32_t *s = x->m_sto;
        for (uint32_t k = 0; k < GFX_STORAGE_BYTES / 4; k++)
            s[k] = k ^ (it << 8);
    }
    if (which & IN_IND) {
        uint32_t *w = x->m_ind;
        for (uint32_t k = 0; k < GFX_INDIRECT_BYTES / 4; k++)
            w[k] = k * 31u + it; /* filler around the two commands */
        VkDrawIndirectCommand d = gfx_draw_params(it);
        VkDrawIndexedIndirectCommand di = gfx_indexed_params(it);
        memcpy(w, &d, sizeof d);
        memcpy((char *)x->m_ind + GFX_INDEXED_AT, &di, sizeof di);
    }
    if (which & IN_HITS)
        memset(x->m_hits, 0, GFX_HITS_BYTES);
}

static inline void gfx_memory_barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage,
                                      VkAccessFlags src, VkPipelineStageFlags dst_stage,
                                      VkAccessFlags dst)
{
    VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, src, dst};
    vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &mb, 0, NULL, 0, NULL);
}

static inline void gfx_image_barrier(VkCommandBuffer cmd, VkImage image, VkImageLayout from,
                                     VkImageLayout to, VkPipelineStageFlags src_stage,
                                     VkAccessFlags src, VkPipelineStageFlags dst_stage,
                                     VkAccessFlags dst)
{
    VkImageMemoryBarrier b = {
        .sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER,
        .srcAccessMask = src,
        .dstAccessMask = dst,
        .oldLayout = from,
        .newLayout = to,
        .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
        .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
        .image = image,
        .subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1},
    };
    vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 0, NULL, 0, NULL, 1, &b);
}

/* Every stage of the workload, and the accesses that write. */
#define GFX_STAGES                                                                                 \
    (VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT |                        \
     VK_PIPELINE_STAGE_VERTEX_INPUT_BIT | VK_PIPELINE_STAGE_VERTEX_SHADER_BIT |                   \
     VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT | VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT)
#define GFX_WRITES                                                                                 \
    (VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT |                                   \
     VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT)

/* Records `parts` of iteration `it` into `cmd` (begun by the caller). */
static inline void gfx_record(struct gfx *x, VkCommandBuffer cmd, uint32_t it, unsigned parts)
{
    const VkPipelineStageFlags xfer = VK_PIPELINE_STAGE_TRANSFER_BIT;
    if (parts & GFX_UPLOAD) {
        /* After everything earlier (the previous iteration's draw read these buffers). */
        gfx_memory_barrier(cmd, GFX_STAGES, GFX_WRITES, xfer,
                           VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
        struct {
            const struct buffer *h, *d;
            VkDeviceSize size;
        } up[5] = {{&x->h_vtx, &x->d_vtx, GFX_VERTS * 16},
                   {&x->h_idx, &x->d_idx, GFX_INDICES * 4},
                   {&x->h_uni, &x->d_uni, GFX_UNIFORM_BYTES},
                   {&x->h_sto, &x->d_sto, GFX_STORAGE_BYTES},
                   {&x->h_ind, &x->d_ind, GFX_INDIRECT_BYTES}};
        for (int i = 0; i < 5; i++) {
            VkBufferCopy r = {0, 0, up[i].size};
            vkCmdCopyBuffer(cmd, up[i].h->buf, up[i].d->buf, 1, &r);
        }
        vkCmdFillBuffer(cmd, x->d_out.buf, 0, VK_WHOLE_SIZE, 0);
    }
    if (parts & GFX_RENDER) {
        gfx_memory_barrier(cmd, GFX_STAGES, GFX_WRITES,
                           VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT |
                               VK_PIPELINE_STAGE_VERTEX_INPUT_BIT |
                               VK_PIPELINE_STAGE_VERTEX_SHADER_BIT |
                               VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT,
                           VK_ACCESS_INDIRECT_COMMAND_READ_BIT | VK_ACCESS_INDEX_READ_BIT |
                               VK_ACCESS_VERTEX_ATTRIBUTE_READ_BIT | VK_ACCESS_UNIFORM_READ_BIT |
                               VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
        VkClearValue clear = {.color = {.uint32 = {0, 0, 0, 0}}};
        VkRect2D area = {{0, 0}, {GFX_W, GFX_H}};
        if (x->render == RENDER_PASS) {
            VkRenderPassBeginInfo rpbi = {
                .sType = VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO,
                .renderPass = x->pass,
                .framebuffer = x->fb,
                .renderArea = area,
                .clearValueCount = 1,
                .pClearValues = &clear,
            };
            vkCmdBeginRenderPass(cmd, &rpbi, VK_SUBPASS_CONTENTS_INLINE);
        } else {
            gfx_image_barrier(cmd, x->image, VK_IMAGE_LAYOUT_UNDEFINED,
                              VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, xfer,
                              VK_ACCESS_TRANSFER_READ_BIT,
                              VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                              VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT);
            VkRenderingAttachmentInfo att = {
                .sType = VK_STRUCTURE_TYPE_RENDERING_ATTACHMENT_INFO,
                .imageView = x->view,
                .imageLayout = VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
                .loadOp = VK_ATTACHMENT_LOAD_OP_CLEAR,
                .storeOp = VK_ATTACHMENT_STORE_OP_STORE,
                .clearValue = clear,
            };
            VkRenderingInfo ri = {
                .sType = VK_STRUCTURE_TYPE_RENDERING_INFO,
                .renderArea = area,
                .layerCount = 1,
                .colorAttachmentCount = 1,
                .pColorAttachments = &att,
            };
            x->begin_rendering(cmd, &ri);
        }
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, x->pipe);
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, x->layout, 0, 1, &x->set, 0,
                                NULL);
        VkDeviceSize zero = 0;
        vkCmdBindVertexBuffers(cmd, 0, 1, &x->d_vtx.buf, &zero);
        if (x->draw == DRAW_INDEXED || x->draw == DRAW_INDEXED_INDIRECT)
            vkCmdBindIndexBuffer(cmd, x->d_idx.buf, 0, VK_INDEX_TYPE_UINT32);
        VkDrawIndirectCommand d = gfx_draw_params(it);
        VkDrawIndexedIndirectCommand di = gfx_indexed_params(it);
        switch (x->draw) {
        case DRAW:
            vkCmdDraw(cmd, d.vertexCount, d.instanceCount, d.firstVertex, d.firstInstance);
            break;
        case DRAW_INDEXED:
            vkCmdDrawIndexed(cmd, di.indexCount, di.instanceCount, di.firstIndex, di.vertexOffset,
                             di.firstInstance);
            break;
        case DRAW_INDIRECT:
            vkCmdDrawIndirect(cmd, x->d_ind.buf, 0, 1, sizeof d);
            break;
        case DRAW_INDEXED_INDIRECT:
            vkCmdDrawIndexedIndirect(cmd, x->d_ind.buf, GFX_INDEXED_AT, 1, sizeof di);
            break;
        }
        if (x->render == RENDER_PASS) {
            vkCmdEndRenderPass(cmd);
        } else {
            x->end_rendering(cmd);
            gfx_image_barrier(cmd, x->image, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
                              VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                              VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                              VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT, xfer,
                              VK_ACCESS_TRANSFER_READ_BIT);
        }
        /* The shaders' stores: d_out for its copy, hits for the host. */
        gfx_memory_barrier(cmd,
                           VK_PIPELINE_STAGE_VERTEX_SHADER_BIT |
                               VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT,
                           VK_ACCESS_SHADER_WRITE_BIT, xfer | VK_PIPELINE_STAGE_HOST_BIT,
                           VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_HOST_READ_BIT);
    }
    if (parts & GFX_READ_IMAGE) {
        VkBufferImageCopy r = {0, 0, 0, {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1}, {0, 0, 0},
                               {GFX_W, GFX_H, 1}};
        vkCmdCopyImageToBuffer(cmd, x->image, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, x->img_rb.buf,
                               1, &r);
    }
    if (parts & GFX_READ_OUT) {
        /* After the draw that wrote d_out, wherever it was recorded. */
        gfx_memory_barrier(cmd, VK_PIPELINE_STAGE_VERTEX_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                           xfer, VK_ACCESS_TRANSFER_READ_BIT);
        VkBufferCopy r = {0, 0, GFX_OUT_BYTES};
        vkCmdCopyBuffer(cmd, x->d_out.buf, x->h_out.buf, 1, &r);
    }
    if (parts & (GFX_READ_IMAGE | GFX_READ_OUT))
        gfx_memory_barrier(cmd, xfer, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                           VK_ACCESS_HOST_READ_BIT);
}

/* Submits `cmd` (ended here) with `fence`, optionally waiting for timeline semaphore `sem` to
 * reach `value` first; does not wait for the fence. */
static inline void gfx_submit(const struct gpu *g, VkCommandBuffer cmd, VkFence fence,
                              VkSemaphore sem, uint64_t value)
{
    CHECK(vkEndCommandBuffer(cmd));
    VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
    VkTimelineSemaphoreSubmitInfo tsi = {
        .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
        .waitSemaphoreValueCount = 1,
        .pWaitSemaphoreValues = &value,
    };
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .pNext = sem ? &tsi : NULL,
        .waitSemaphoreCount = sem ? 1 : 0,
        .pWaitSemaphores = &sem,
        .pWaitDstStageMask = &stage,
        .commandBufferCount = 1,
        .pCommandBuffers = &cmd,
    };
    CHECK(vkResetFences(g->dev, 1, &fence));
    CHECK(vkQueueSubmit(g->queue, 1, &si, fence));
}

static inline void gfx_wait(const struct gpu *g, VkFence fence)
{
    CHECK(vkWaitForFences(g->dev, 1, &fence, VK_TRUE, UINT64_MAX));
}

/* What the host reads: h_out (copied from d_out), img_rb (copied from the attachment) and hits
 * (the fragment shader's counts, read through the mapping), each folded into its checksum. */
struct gfx_sums {
    uint64_t out, image, hits;
};

static inline void gfx_fold(const struct gfx *x, struct gfx_sums *s)
{
    s->out = fnv1a(s->out, x->m_out, GFX_OUT_BYTES);
    s->image = fnv1a(s->image, x->m_img, GFX_IMAGE_BYTES);
    s->hits = fnv1a(s->hits, x->m_hits, GFX_HITS_BYTES);
}

static inline void gfx_destroy(struct gfx *x)
{
    const struct gpu *g = &x->g;
    CHECK(vkDeviceWaitIdle(g->dev));
    vkDestroyPipeline(g->dev, x->pipe, NULL);
    vkDestroyDescriptorPool(g->dev, x->pool, NULL);
    vkDestroyPipelineLayout(g->dev, x->layout, NULL);
    vkDestroyDescriptorSetLayout(g->dev, x->dsl, NULL);
    vkDestroyShaderModule(g->dev, x->vs, NULL);
    vkDestroyShaderModule(g->dev, x->fs, NULL);
    if (x->fb)
        vkDestroyFramebuffer(g->dev, x->fb, NULL);
    if (x->pass)
        vkDestroyRenderPass(g->dev, x->pass, NULL);
    vkDestroyImageView(g->dev, x->view, NULL);
    vkDestroyImage(g->dev, x->image, NULL);
    vkFreeMemory(g->dev, x->image_mem, NULL);
    struct buffer *all[] = {&x->h_vtx, &x->d_vtx, &x->h_idx, &x->d_idx, &x->h_uni,
                            &x->d_uni, &x->h_sto, &x->d_sto, &x->h_ind, &x->d_ind,
                            &x->d_out, &x->h_out, &x->hits,  &x->img_rb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buffer_destroy(g, all[i]);
    vkDestroyDevice(g->dev, NULL);
}

#endif
