/* (issue 53) c_code_bound MODE [ITERS]: what runs is known — code bound outside a plain pipeline.
 *
 * An upload pair S (host-visible staging) -> D (device-local storage), 1 MiB, vkCmdCopyBuffer in
 * its own submission A. Iteration i: the host writes i into every word of S; A copies S -> D; the
 * host waits; submission B runs MODE's code over D; the host waits and reads S back. The
 * program's S holds i, so a correct run prints `MODE: 1 2 ... ITERS  => as the program means`.
 * Where MODE writes D, sharing S and D would show D's new bytes in S: echo must refuse the pair
 * (S1); where it only reads D, the pair is safe and echo applies it.
 *
 *   so        a compute pipeline reads D (into R), then a compute SHADER OBJECT
 *             (VK_EXT_shader_object, vkCmdBindShadersEXT) adds 100 to D — the round's first
 *             wrong byte: echo kept the pipeline's reflection for the shader object's dispatch
 *   so_pipe   control: the same adding shader in a second compute pipeline (refused, S1)
 *   so_read   control: the reading shader bound as a shader object, nothing writes D (applied)
 *   lib       a draw whose vertex shader (adds 100 to D) comes from a pre-rasterization
 *             pipeline LIBRARY (VK_EXT_graphics_pipeline_library); the link names its own
 *             fragment shader in pStages — the second wrong byte: echo reflected only pStages
 *   lib_mono  control: the same stages in one monolithic pipeline (refused, S1)
 *   lib_read  control: the library's vertex shader only reads D (applied)
 *
 * A driver without the extension (shader objects: Mesa 25 lavapipe only; pipeline libraries:
 * lavapipe 22.3, SwiftShader, Mesa 25) makes a plain device, prints `MODE: unsupported: …` and
 * exits 0 in every mode.
 * Debian 12's headers (1.3.239) lack VK_EXT_shader_object: its types are defined here from
 * vk.xml. The compute shaders are c_unfollowed_copy.h (d = s) and c_code_add_comp.h, made with
 * `glslangValidator -V --target-env vulkan1.2 --vn spv_add_comp` from
 *     layout(local_size_x = 64) in;
 *     layout(set = 0, binding = 0) buffer Src { uint s[]; };
 *     layout(set = 0, binding = 1) buffer Dst { uint d[]; };
 *     void main() { uint i = gl_GlobalInvocationID.x; s[i] = s[i] + 100u; }
 * the graphics ones tests/shaders/c_code_{add,read}.vert and c_code_color.frag.
 *
 * gate-args: so 3
 * gate-args: so_read 3
 * gate-args: lib 3
 * gate-args: lib_read 3
 */
#include <vulkan/vulkan.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "c_unfollowed_copy.h"
#include "c_code_add_comp.h"
#include "c_code_add_vert.h"
#include "c_code_read_vert.h"
#include "c_code_color_frag.h"

#define CHECK(x) do { VkResult r_ = (x); if (r_) { fprintf(stderr, "%s:%d: %s -> %d\n", __FILE__, __LINE__, #x, r_); exit(1); } } while (0)

#ifndef VK_EXT_shader_object /* Vulkan headers before 1.3.246; values from vk.xml */
VK_DEFINE_NON_DISPATCHABLE_HANDLE(VkShaderEXT)
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_OBJECT_FEATURES_EXT ((VkStructureType)1000482000)
#define VK_STRUCTURE_TYPE_SHADER_CREATE_INFO_EXT ((VkStructureType)1000482002)
typedef struct { VkStructureType sType; void *pNext; VkBool32 shaderObject; } VkPhysicalDeviceShaderObjectFeaturesEXT;
typedef struct {
    VkStructureType sType; const void *pNext; VkFlags flags; VkShaderStageFlagBits stage; VkShaderStageFlags nextStage;
    int codeType; size_t codeSize; const void *pCode; const char *pName; uint32_t setLayoutCount;
    const VkDescriptorSetLayout *pSetLayouts; uint32_t pushConstantRangeCount; const VkPushConstantRange *pPushConstantRanges;
    const VkSpecializationInfo *pSpecializationInfo;
} VkShaderCreateInfoEXT;
typedef VkResult (VKAPI_PTR *PFN_vkCreateShadersEXT)(VkDevice, uint32_t, const VkShaderCreateInfoEXT *, const VkAllocationCallbacks *, VkShaderEXT *);
typedef void (VKAPI_PTR *PFN_vkDestroyShaderEXT)(VkDevice, VkShaderEXT, const VkAllocationCallbacks *);
typedef void (VKAPI_PTR *PFN_vkCmdBindShadersEXT)(VkCommandBuffer, uint32_t, const VkShaderStageFlagBits *, const VkShaderEXT *);
#define VK_SHADER_CODE_TYPE_SPIRV_EXT 1
#endif

enum { WORDS = 512 * 512 };
static const VkDeviceSize N = (VkDeviceSize)WORDS * 4;
static VkDevice dev;
static VkPhysicalDeviceMemoryProperties mp;
static const char *mode;

static VkInstance instance;
static VkPhysicalDevice physical;

/* The driver lacks what MODE needs: a plain device is still made and destroyed (so a profile has
 * a trace and the gate a plan), the program says so and ends well. */
static void unsupported(const char *what)
{
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = { VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, NULL, 0, 0, 1, &prio };
    VkDeviceCreateInfo dci = { VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, NULL, 0, 1, &qci, 0, NULL, 0, NULL, NULL };
    CHECK(vkCreateDevice(physical, &dci, NULL, &dev));
    vkDestroyDevice(dev, NULL);
    vkDestroyInstance(instance, NULL);
    printf("%s: unsupported: %s\n", mode, what);
    exit(0);
}

static uint32_t mem_type(uint32_t bits, VkMemoryPropertyFlags want)
{
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) return i;
    fprintf(stderr, "no memory type\n");
    exit(1);
}

static VkBuffer buffer(VkBufferUsageFlags usage, VkMemoryPropertyFlags want, VkDeviceMemory *m)
{
    VkBufferCreateInfo bci = { VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, NULL, 0, N, usage, VK_SHARING_MODE_EXCLUSIVE, 0, NULL };
    VkBuffer b;
    CHECK(vkCreateBuffer(dev, &bci, NULL, &b));
    VkMemoryRequirements r;
    vkGetBufferMemoryRequirements(dev, b, &r);
    VkMemoryAllocateInfo mai = { VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, NULL, r.size, mem_type(r.memoryTypeBits, want) };
    CHECK(vkAllocateMemory(dev, &mai, NULL, m));
    CHECK(vkBindBufferMemory(dev, b, *m, 0));
    return b;
}

static void barrier(VkCommandBuffer c, VkPipelineStageFlags s, VkAccessFlags sa, VkPipelineStageFlags d, VkAccessFlags da)
{
    VkMemoryBarrier mb = { VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, sa, da };
    vkCmdPipelineBarrier(c, s, d, 0, 1, &mb, 0, NULL, 0, NULL);
}

static VkShaderModule module(const uint32_t *code, size_t bytes)
{
    VkShaderModuleCreateInfo ci = { VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, NULL, 0, bytes, code };
    VkShaderModule m;
    CHECK(vkCreateShaderModule(dev, &ci, NULL, &m));
    return m;
}

/* ---- the device, with what MODE needs ------------------------------------------------------ */

static VkPhysicalDevice pick(VkInstance inst)
{
    uint32_t n = 1;
    VkPhysicalDevice pd;
    VkResult er = vkEnumeratePhysicalDevices(inst, &n, &pd);
    if ((er && er != VK_INCOMPLETE) || !n) { fprintf(stderr, "no device\n"); exit(1); }
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    return pd;
}

static int has_ext(VkPhysicalDevice pd, const char *name)
{
    uint32_t n = 0;
    vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL);
    VkExtensionProperties *e = calloc(n ? n : 1, sizeof *e);
    vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e);
    int found = 0;
    for (uint32_t i = 0; i < n; i++) found |= !strcmp(e[i].extensionName, name);
    free(e);
    return found;
}

static void device_for_shader_objects(VkPhysicalDevice pd)
{
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    if (props.apiVersion < VK_API_VERSION_1_3 || !has_ext(pd, "VK_EXT_shader_object"))
        unsupported("VK_EXT_shader_object");
    VkPhysicalDeviceShaderObjectFeaturesEXT so = { VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_OBJECT_FEATURES_EXT, NULL, 0 };
    VkPhysicalDeviceFeatures2 f2 = { VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &so };
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    if (!so.shaderObject) unsupported("shaderObject");
    VkPhysicalDeviceVulkan13Features f13 = { VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES };
    f13.dynamicRendering = VK_TRUE; /* VK_EXT_shader_object needs dynamic rendering */
    VkPhysicalDeviceShaderObjectFeaturesEXT want = { VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_OBJECT_FEATURES_EXT, &f13, VK_TRUE };
    const char *ext = "VK_EXT_shader_object";
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = { VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, NULL, 0, 0, 1, &prio };
    VkDeviceCreateInfo dci = { VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &want, 0, 1, &qci, 0, NULL, 1, &ext, NULL };
    CHECK(vkCreateDevice(pd, &dci, NULL, &dev));
}

static void device_for_libraries(VkPhysicalDevice pd)
{
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    if (props.apiVersion < VK_API_VERSION_1_3 || !has_ext(pd, "VK_EXT_graphics_pipeline_library")
        || !has_ext(pd, "VK_KHR_pipeline_library"))
        unsupported("VK_EXT_graphics_pipeline_library");
    VkPhysicalDeviceGraphicsPipelineLibraryFeaturesEXT hg = { VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GRAPHICS_PIPELINE_LIBRARY_FEATURES_EXT };
    VkPhysicalDeviceVulkan13Features h13 = { VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES, &hg };
    VkPhysicalDeviceFeatures2 hf = { VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &h13 };
    vkGetPhysicalDeviceFeatures2(pd, &hf);
    if (!h13.dynamicRendering || !hf.features.vertexPipelineStoresAndAtomics || !hg.graphicsPipelineLibrary)
        unsupported("graphicsPipelineLibrary, dynamicRendering or vertexPipelineStoresAndAtomics");
    VkPhysicalDeviceGraphicsPipelineLibraryFeaturesEXT fg = { VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GRAPHICS_PIPELINE_LIBRARY_FEATURES_EXT, NULL, VK_TRUE };
    VkPhysicalDeviceVulkan13Features f13 = { VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES, &fg };
    f13.dynamicRendering = VK_TRUE;
    VkPhysicalDeviceFeatures2 f2 = { VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f13 };
    f2.features.vertexPipelineStoresAndAtomics = VK_TRUE;
    const char *exts[2] = { "VK_KHR_pipeline_library", "VK_EXT_graphics_pipeline_library" };
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = { VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, NULL, 0, 0, 1, &prio };
    VkDeviceCreateInfo dci = { VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &f2, 0, 1, &qci, 0, NULL, 2, exts, NULL };
    CHECK(vkCreateDevice(pd, &dci, NULL, &dev));
}

/* ---- submission B for the compute modes (so, so_pipe, so_read) -------------------------------- */

struct compute {
    VkDescriptorSetLayout dsl;
    VkPipelineLayout pl;
    VkDescriptorPool dp;
    VkDescriptorSet ds;
    VkShaderModule copy_m, add_m;
    VkPipeline copy_p, add_p;
    VkShaderEXT so;
    PFN_vkDestroyShaderEXT destroy_shader;
};

static void record_compute(struct compute *c, VkCommandBuffer B, VkBuffer D, VkBuffer R)
{
    VkDescriptorSetLayoutBinding lb[2] = { { 0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, NULL },
                                           { 1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, NULL } };
    VkDescriptorSetLayoutCreateInfo lci = { VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, NULL, 0, 2, lb };
    CHECK(vkCreateDescriptorSetLayout(dev, &lci, NULL, &c->dsl));
    VkPipelineLayoutCreateInfo plci = { VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, NULL, 0, 1, &c->dsl, 0, NULL };
    CHECK(vkCreatePipelineLayout(dev, &plci, NULL, &c->pl));
    VkDescriptorPoolSize psz = { VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 2 };
    VkDescriptorPoolCreateInfo dpi = { VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, NULL, 0, 1, 1, &psz };
    CHECK(vkCreateDescriptorPool(dev, &dpi, NULL, &c->dp));
    VkDescriptorSetAllocateInfo dai = { VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, NULL, c->dp, 1, &c->dsl };
    CHECK(vkAllocateDescriptorSets(dev, &dai, &c->ds));
    VkDescriptorBufferInfo bi[2] = { { D, 0, N }, { R, 0, N } };
    VkWriteDescriptorSet w[2] = { { VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, NULL, c->ds, 0, 0, 1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, NULL, &bi[0], NULL },
                                  { VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, NULL, c->ds, 1, 0, 1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, NULL, &bi[1], NULL } };
    vkUpdateDescriptorSets(dev, 2, w, 0, NULL);

    c->copy_m = module(spv_copy_comp, sizeof spv_copy_comp);
    VkComputePipelineCreateInfo cpi = { VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, NULL, 0,
        { VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, NULL, 0, VK_SHADER_STAGE_COMPUTE_BIT, c->copy_m, "main", NULL }, c->pl, VK_NULL_HANDLE, 0 };
    CHECK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpi, NULL, &c->copy_p));
    int objects = strcmp(mode, "so_pipe") != 0;
    if (objects) {
        PFN_vkCreateShadersEXT create_shaders = (PFN_vkCreateShadersEXT)vkGetDeviceProcAddr(dev, "vkCreateShadersEXT");
        c->destroy_shader = (PFN_vkDestroyShaderEXT)vkGetDeviceProcAddr(dev, "vkDestroyShaderEXT");
        int read = !strcmp(mode, "so_read");
        VkShaderCreateInfoEXT sci = { VK_STRUCTURE_TYPE_SHADER_CREATE_INFO_EXT, NULL, 0, VK_SHADER_STAGE_COMPUTE_BIT, 0,
            VK_SHADER_CODE_TYPE_SPIRV_EXT, read ? sizeof spv_copy_comp : sizeof spv_add_comp, read ? spv_copy_comp : spv_add_comp,
            "main", 1, &c->dsl, 0, NULL, NULL };
        CHECK(create_shaders(dev, 1, &sci, NULL, &c->so));
    } else {
        c->add_m = module(spv_add_comp, sizeof spv_add_comp);
        cpi.stage.module = c->add_m;
        CHECK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpi, NULL, &c->add_p));
    }

    VkCommandBufferBeginInfo cbi = { VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, NULL, 0, NULL };
    CHECK(vkBeginCommandBuffer(B, &cbi));
    barrier(B, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    vkCmdBindPipeline(B, VK_PIPELINE_BIND_POINT_COMPUTE, c->copy_p);
    vkCmdBindDescriptorSets(B, VK_PIPELINE_BIND_POINT_COMPUTE, c->pl, 0, 1, &c->ds, 0, NULL);
    vkCmdDispatch(B, WORDS / 64, 1, 1);
    barrier(B, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    if (objects) {
        PFN_vkCmdBindShadersEXT bind_shaders = (PFN_vkCmdBindShadersEXT)vkGetDeviceProcAddr(dev, "vkCmdBindShadersEXT");
        VkShaderStageFlagBits stage = VK_SHADER_STAGE_COMPUTE_BIT;
        bind_shaders(B, 1, &stage, &c->so);
    } else {
        vkCmdBindPipeline(B, VK_PIPELINE_BIND_POINT_COMPUTE, c->add_p);
    }
    vkCmdDispatch(B, WORDS / 64, 1, 1);
    barrier(B, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    CHECK(vkEndCommandBuffer(B));
}

static void destroy_compute(struct compute *c)
{
    if (c->so) c->destroy_shader(dev, c->so, NULL);
    vkDestroyPipeline(dev, c->copy_p, NULL);
    if (c->add_p) vkDestroyPipeline(dev, c->add_p, NULL);
    vkDestroyShaderModule(dev, c->copy_m, NULL);
    if (c->add_m) vkDestroyShaderModule(dev, c->add_m, NULL);
    vkDestroyDescriptorPool(dev, c->dp, NULL);
    vkDestroyPipelineLayout(dev, c->pl, NULL);
    vkDestroyDescriptorSetLayout(dev, c->dsl, NULL);
}

/* ---- submission B for the library modes (lib, lib_mono, lib_read) ----------------------------- */

struct graphics {
    VkDeviceMemory mi;
    VkImage img;
    VkImageView view;
    VkDescriptorSetLayout dsl;
    VkPipelineLayout pl;
    VkDescriptorPool dp;
    VkDescriptorSet ds;
    VkShaderModule vs, fs;
    VkPipeline pipe, lib;
};

static void record_graphics(struct graphics *g, VkCommandBuffer B, VkBuffer D)
{
    VkImageCreateInfo ii = { VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO, NULL, 0, VK_IMAGE_TYPE_2D, VK_FORMAT_R8G8B8A8_UNORM, { 1, 1, 1 }, 1, 1,
        VK_SAMPLE_COUNT_1_BIT, VK_IMAGE_TILING_OPTIMAL, VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT, VK_SHARING_MODE_EXCLUSIVE, 0, NULL, VK_IMAGE_LAYOUT_UNDEFINED };
    CHECK(vkCreateImage(dev, &ii, NULL, &g->img));
    VkMemoryRequirements ir;
    vkGetImageMemoryRequirements(dev, g->img, &ir);
    VkMemoryAllocateInfo imai = { VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, NULL, ir.size, mem_type(ir.memoryTypeBits, 0) };
    CHECK(vkAllocateMemory(dev, &imai, NULL, &g->mi));
    CHECK(vkBindImageMemory(dev, g->img, g->mi, 0));
    VkImageViewCreateInfo vci = { VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO, NULL, 0, g->img, VK_IMAGE_VIEW_TYPE_2D, VK_FORMAT_R8G8B8A8_UNORM,
        { 0, 0, 0, 0 }, { VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1 } };
    CHECK(vkCreateImageView(dev, &vci, NULL, &g->view));
    VkDescriptorSetLayoutBinding lb = { 0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_VERTEX_BIT, NULL };
    VkDescriptorSetLayoutCreateInfo lci = { VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, NULL, 0, 1, &lb };
    CHECK(vkCreateDescriptorSetLayout(dev, &lci, NULL, &g->dsl));
    VkPipelineLayoutCreateInfo plci = { VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, NULL, 0, 1, &g->dsl, 0, NULL };
    CHECK(vkCreatePipelineLayout(dev, &plci, NULL, &g->pl));
    VkDescriptorPoolSize psz = { VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1 };
    VkDescriptorPoolCreateInfo dpi = { VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, NULL, 0, 1, 1, &psz };
    CHECK(vkCreateDescriptorPool(dev, &dpi, NULL, &g->dp));
    VkDescriptorSetAllocateInfo dai = { VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, NULL, g->dp, 1, &g->dsl };
    CHECK(vkAllocateDescriptorSets(dev, &dai, &g->ds));
    VkDescriptorBufferInfo bi = { D, 0, N };
    VkWriteDescriptorSet w = { VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, NULL, g->ds, 0, 0, 1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, NULL, &bi, NULL };
    vkUpdateDescriptorSets(dev, 1, &w, 0, NULL);

    int read = !strcmp(mode, "lib_read");
    g->vs = read ? module(c_code_read_vert, sizeof c_code_read_vert) : module(c_code_add_vert, sizeof c_code_add_vert);
    g->fs = module(c_code_color_frag, sizeof c_code_color_frag);
    VkPipelineShaderStageCreateInfo st[2] = {
        { VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, NULL, 0, VK_SHADER_STAGE_VERTEX_BIT, g->vs, "main", NULL },
        { VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, NULL, 0, VK_SHADER_STAGE_FRAGMENT_BIT, g->fs, "main", NULL } };
    VkPipelineVertexInputStateCreateInfo vi = { VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO, NULL, 0, 0, NULL, 0, NULL };
    VkPipelineInputAssemblyStateCreateInfo ia = { VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO, NULL, 0, VK_PRIMITIVE_TOPOLOGY_POINT_LIST, VK_FALSE };
    VkViewport vp = { 0, 0, 1, 1, 0, 1 };
    VkRect2D sc = { { 0, 0 }, { 1, 1 } };
    VkPipelineViewportStateCreateInfo vps = { VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO, NULL, 0, 1, &vp, 1, &sc };
    VkPipelineRasterizationStateCreateInfo rs = { VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO, NULL, 0,
        VK_FALSE, VK_FALSE, VK_POLYGON_MODE_FILL, VK_CULL_MODE_NONE, VK_FRONT_FACE_COUNTER_CLOCKWISE, VK_FALSE, 0, 0, 0, 1.0f };
    VkPipelineMultisampleStateCreateInfo msi = { VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO, NULL, 0, VK_SAMPLE_COUNT_1_BIT, VK_FALSE, 0, NULL, VK_FALSE, VK_FALSE };
    VkPipelineColorBlendAttachmentState cba = { VK_FALSE, 0, 0, 0, 0, 0, 0, 0xf };
    VkPipelineColorBlendStateCreateInfo cbs = { VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO, NULL, 0, VK_FALSE, VK_LOGIC_OP_COPY, 1, &cba, { 0, 0, 0, 0 } };
    VkPipelineDepthStencilStateCreateInfo dss = { VK_STRUCTURE_TYPE_PIPELINE_DEPTH_STENCIL_STATE_CREATE_INFO };
    VkFormat cf = VK_FORMAT_R8G8B8A8_UNORM;
    VkPipelineRenderingCreateInfo pri = { VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO, NULL, 0, 1, &cf, VK_FORMAT_UNDEFINED, VK_FORMAT_UNDEFINED };
    if (!strcmp(mode, "lib_mono")) {
        VkGraphicsPipelineCreateInfo gpi = { VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO, &pri, 0, 2, st,
            &vi, &ia, NULL, &vps, &rs, &msi, &dss, &cbs, NULL, g->pl, VK_NULL_HANDLE, 0, VK_NULL_HANDLE, -1 };
        CHECK(vkCreateGraphicsPipelines(dev, VK_NULL_HANDLE, 1, &gpi, NULL, &g->pipe));
    } else {
        /* the pre-rasterization library holds the vertex shader; the link names the fragment one */
        VkGraphicsPipelineLibraryCreateInfoEXT gl = { VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_LIBRARY_CREATE_INFO_EXT, NULL,
            VK_GRAPHICS_PIPELINE_LIBRARY_PRE_RASTERIZATION_SHADERS_BIT_EXT };
        VkGraphicsPipelineCreateInfo lpi = { VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO, &gl, VK_PIPELINE_CREATE_LIBRARY_BIT_KHR, 1, &st[0],
            NULL, NULL, NULL, &vps, &rs, NULL, NULL, NULL, NULL, g->pl, VK_NULL_HANDLE, 0, VK_NULL_HANDLE, -1 };
        CHECK(vkCreateGraphicsPipelines(dev, VK_NULL_HANDLE, 1, &lpi, NULL, &g->lib));
        VkPipelineLibraryCreateInfoKHR li = { VK_STRUCTURE_TYPE_PIPELINE_LIBRARY_CREATE_INFO_KHR, NULL, 1, &g->lib };
        pri.pNext = &li;
        VkGraphicsPipelineLibraryCreateInfoEXT gr = { VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_LIBRARY_CREATE_INFO_EXT, &pri,
            VK_GRAPHICS_PIPELINE_LIBRARY_VERTEX_INPUT_INTERFACE_BIT_EXT | VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_SHADER_BIT_EXT
            | VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_OUTPUT_INTERFACE_BIT_EXT };
        VkGraphicsPipelineCreateInfo link = { VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO, &gr, 0, 1, &st[1],
            &vi, &ia, NULL, NULL, NULL, &msi, &dss, &cbs, NULL, g->pl, VK_NULL_HANDLE, 0, VK_NULL_HANDLE, -1 };
        CHECK(vkCreateGraphicsPipelines(dev, VK_NULL_HANDLE, 1, &link, NULL, &g->pipe));
    }

    VkCommandBufferBeginInfo cbi = { VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, NULL, 0, NULL };
    CHECK(vkBeginCommandBuffer(B, &cbi));
    barrier(B, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_VERTEX_SHADER_BIT,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    VkImageMemoryBarrier ib = { VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER, NULL, 0, VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
        VK_IMAGE_LAYOUT_UNDEFINED, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, VK_QUEUE_FAMILY_IGNORED, VK_QUEUE_FAMILY_IGNORED, g->img,
        { VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1 } };
    vkCmdPipelineBarrier(B, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, 0, 0, NULL, 0, NULL, 1, &ib);
    VkRenderingAttachmentInfo ca = { VK_STRUCTURE_TYPE_RENDERING_ATTACHMENT_INFO, NULL, g->view, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
        VK_RESOLVE_MODE_NONE, VK_NULL_HANDLE, VK_IMAGE_LAYOUT_UNDEFINED, VK_ATTACHMENT_LOAD_OP_CLEAR, VK_ATTACHMENT_STORE_OP_STORE, { { { 0, 0, 0, 0 } } } };
    VkRenderingInfo ri = { VK_STRUCTURE_TYPE_RENDERING_INFO, NULL, 0, { { 0, 0 }, { 1, 1 } }, 1, 0, 1, &ca, NULL, NULL };
    vkCmdBeginRendering(B, &ri);
    vkCmdBindPipeline(B, VK_PIPELINE_BIND_POINT_GRAPHICS, g->pipe);
    vkCmdBindDescriptorSets(B, VK_PIPELINE_BIND_POINT_GRAPHICS, g->pl, 0, 1, &g->ds, 0, NULL);
    vkCmdDraw(B, WORDS / 64, 1, 0, 0);
    vkCmdEndRendering(B);
    barrier(B, VK_PIPELINE_STAGE_VERTEX_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    CHECK(vkEndCommandBuffer(B));
}

static void destroy_graphics(struct graphics *g)
{
    vkDestroyPipeline(dev, g->pipe, NULL);
    if (g->lib) vkDestroyPipeline(dev, g->lib, NULL);
    vkDestroyShaderModule(dev, g->vs, NULL);
    vkDestroyShaderModule(dev, g->fs, NULL);
    vkDestroyDescriptorPool(dev, g->dp, NULL);
    vkDestroyPipelineLayout(dev, g->pl, NULL);
    vkDestroyDescriptorSetLayout(dev, g->dsl, NULL);
    vkDestroyImageView(dev, g->view, NULL);
    vkDestroyImage(dev, g->img, NULL);
    vkFreeMemory(dev, g->mi, NULL);
}

int main(int argc, char **argv)
{
    mode = argc > 1 ? argv[1] : "so";
    int iters = argc > 2 ? atoi(argv[2]) : 4;
    int compute = !strncmp(mode, "so", 2);
    if (!compute && strncmp(mode, "lib", 3)) {
        fprintf(stderr, "c_code_bound: unknown mode %s (so, so_pipe, so_read, lib, lib_mono, lib_read)\n", mode);
        return 1;
    }
    VkApplicationInfo ai = { VK_STRUCTURE_TYPE_APPLICATION_INFO, NULL, "c_code_bound", 1, "c_code_bound", 1, VK_API_VERSION_1_3 };
    VkInstanceCreateInfo ici = { VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, NULL, 0, &ai, 0, NULL, 0, NULL };
    VkInstance inst;
    CHECK(vkCreateInstance(&ici, NULL, &inst));
    VkPhysicalDevice pd = pick(inst);
    instance = inst;
    physical = pd;
    if (compute) device_for_shader_objects(pd);
    else device_for_libraries(pd);

    VkQueue q;
    vkGetDeviceQueue(dev, 0, 0, &q);
    VkCommandPoolCreateInfo pci = { VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, NULL, 0, 0 };
    VkCommandPool pool;
    CHECK(vkCreateCommandPool(dev, &pci, NULL, &pool));
    VkCommandBuffer cbs[2];
    VkCommandBufferAllocateInfo cai = { VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, NULL, pool, VK_COMMAND_BUFFER_LEVEL_PRIMARY, 2 };
    CHECK(vkAllocateCommandBuffers(dev, &cai, cbs));
    VkCommandBuffer A = cbs[0], B = cbs[1];
    VkFenceCreateInfo fci = { VK_STRUCTURE_TYPE_FENCE_CREATE_INFO, NULL, 0 };
    VkFence fence;
    CHECK(vkCreateFence(dev, &fci, NULL, &fence));

    VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    VkDeviceMemory ms, md, mr = VK_NULL_HANDLE;
    VkBuffer S = buffer(VK_BUFFER_USAGE_TRANSFER_SRC_BIT, hv, &ms);
    VkBuffer D = buffer(VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &md);
    VkBuffer R = VK_NULL_HANDLE;
    uint32_t *ps;
    CHECK(vkMapMemory(dev, ms, 0, VK_WHOLE_SIZE, 0, (void **)&ps));
    struct compute c = { 0 };
    struct graphics g = { 0 };
    if (compute) {
        R = buffer(VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, hv, &mr);
        record_compute(&c, B, D, R);
    } else {
        record_graphics(&g, B, D);
    }
    VkCommandBufferBeginInfo cbi = { VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, NULL, 0, NULL };
    CHECK(vkBeginCommandBuffer(A, &cbi));
    VkBufferCopy cp = { 0, 0, N };
    vkCmdCopyBuffer(A, S, D, 1, &cp);
    CHECK(vkEndCommandBuffer(A));

    printf("%s:", mode);
    int differs = 0;
    for (int i = 1; i <= iters; i++) {
        for (uint32_t k = 0; k < WORDS; k++) ps[k] = (uint32_t)i;
        VkSubmitInfo sa = { VK_STRUCTURE_TYPE_SUBMIT_INFO, NULL, 0, NULL, NULL, 1, &A, 0, NULL };
        CHECK(vkQueueSubmit(q, 1, &sa, fence));
        CHECK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX));
        CHECK(vkResetFences(dev, 1, &fence));
        VkSubmitInfo sb = { VK_STRUCTURE_TYPE_SUBMIT_INFO, NULL, 0, NULL, NULL, 1, &B, 0, NULL };
        CHECK(vkQueueSubmit(q, 1, &sb, fence));
        CHECK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX));
        CHECK(vkResetFences(dev, 1, &fence));
        uint32_t bad = 0;
        for (uint32_t k = 0; k < WORDS; k++) bad += ps[k] != ps[0];
        printf(" %u", ps[0]);
        if (bad) printf("(%u mixed)", bad);
        if (ps[0] != (uint32_t)i || bad) differs = 1;
    }
    printf("  => %s\n", differs ? "WRONG (differs from the program's semantics)" : "as the program means");
    fflush(stdout);

    vkDeviceWaitIdle(dev);
    if (compute) destroy_compute(&c);
    else destroy_graphics(&g);
    vkUnmapMemory(dev, ms);
    vkDestroyBuffer(dev, S, NULL);
    vkDestroyBuffer(dev, D, NULL);
    if (R) vkDestroyBuffer(dev, R, NULL);
    vkFreeMemory(dev, ms, NULL);
    vkFreeMemory(dev, md, NULL);
    if (mr) vkFreeMemory(dev, mr, NULL);
    vkDestroyFence(dev, fence, NULL);
    vkDestroyCommandPool(dev, pool, NULL);
    vkDestroyDevice(dev, NULL);
    vkDestroyInstance(inst, NULL);
    return 0;
}
