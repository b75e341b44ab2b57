/* (issue 44) c_gpu_reads MODE [ITERS]: what the GPU reads is what echo must follow. An upload pair
 * S (host-visible staging buffer) -> D (device-local buffer), 1 MiB, copied by vkCmdCopyBuffer;
 * D is then read by a command buffer B that was recorded ONCE, before the loop, through state the
 * specification lets change between recording and execution (MODE). Prints one value per
 * iteration and a summary line; a correct Vulkan implementation prints 1 2 ... ITERS in every mode.
 *
 * gate-args: uab
 * gate-args: template
 * gate-args: copy
 * gate-args: secondary
 * gate-args: pending
 * gate-args: vertex
 *
 * Iteration i: the host writes i into every word of S; submission A copies S -> D and the host
 * waits. Submission B first waits on event E (set by the host), then reads D into the readback
 * buffer R. While B waits, the host writes i + 1 into S (the next upload, prepared early), then
 * sets E, waits for B and prints R[0]; every word of R must equal R[0]. If S and D shared memory,
 * B would read the host's later write and print i + 1: echo must refuse the pair — which it can only
 * do if it sees that B reads D.
 *
 *   uab        B's compute shader reads binding 0 of a set whose layout has UPDATE_AFTER_BIND; at
 *              recording binding 0 names a scratch buffer Y; before each submission of B the host
 *              points it at D with vkUpdateDescriptorSets. (Needs
 *              descriptorBindingStorageBufferUpdateAfterBind: SwiftShader, Mesa 25 lavapipe.)
 *   template   the same, the update made with vkUpdateDescriptorSetWithTemplate (Vulkan 1.1).
 *   copy       the same, the update a VkCopyDescriptorSet from a second set that names D.
 *   secondary  the dispatch is in a secondary command buffer recorded once and executed by B; the
 *              set is pointed at D before each submission of B.
 *   pending    binding 0 is an array of 2 storage buffers with UPDATE_UNUSED_WHILE_PENDING |
 *              PARTIALLY_BOUND (no update-after-bind); the shader reads element SEL (a host-visible
 *              word the host writes). Iteration i reads element i % 2, which the host points at D
 *              right before the submission; the other element names Y. (Needs
 *              descriptorBindingUpdateUnusedWhilePending, descriptorBindingPartiallyBound and
 *              shaderStorageBufferArrayDynamicIndexing.)
 *   vertex     D is a vertex buffer (vkCmdBindVertexBuffers, a render pass, points with rasterizer
 *              discard); the vertex shader writes each vertex's attribute into R. (SwiftShader's
 *              vertex fetch reads 16 bytes at the last 4-byte vertex: a profiled run used to die
 *              with SIGSEGV in a driver thread.)
 *
 * A device without MODE's features prints "MODE: skipped (...)" and exits 0.
 * The shaders are in c_gpu_reads_shaders.h (their GLSL in its header).
 */
#include <vulkan/vulkan.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "c_gpu_reads_shaders.h"
#include "c_unfollowed_copy.h"
#define CHECK(x) do { VkResult r_ = (x); if (r_) { fprintf(stderr, "%s -> %d\n", #x, r_); exit(2); } } while (0)

enum { WORDS = 512 * 512 };
static const VkDeviceSize N = (VkDeviceSize)WORDS * 4;
static VkDevice dev;
static VkPhysicalDeviceMemoryProperties mp;
static const char *mode;
#define IS(m) (strcmp(mode, m) == 0)

static uint32_t mem_type(uint32_t bits, VkMemoryPropertyFlags want) {
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) return i;
    fprintf(stderr, "no memory type\n"); exit(2);
}
static VkBuffer buffer(VkDeviceSize size, VkBufferUsageFlags usage, VkMemoryPropertyFlags want, VkDeviceMemory *m) {
    VkBufferCreateInfo bci = { VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, NULL, 0, size, usage, VK_SHARING_MODE_EXCLUSIVE, 0, NULL };
    VkBuffer b; CHECK(vkCreateBuffer(dev, &bci, NULL, &b));
    VkMemoryRequirements r; vkGetBufferMemoryRequirements(dev, b, &r);
    VkMemoryAllocateInfo mai = { VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, NULL, r.size, mem_type(r.memoryTypeBits, want) };
    CHECK(vkAllocateMemory(dev, &mai, NULL, m)); CHECK(vkBindBufferMemory(dev, b, *m, 0));
    return b;
}
static void barrier(VkCommandBuffer c, VkPipelineStageFlags s, VkAccessFlags sa, VkPipelineStageFlags d, VkAccessFlags da) {
    VkMemoryBarrier mb = { VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, sa, da };
    vkCmdPipelineBarrier(c, s, d, 0, 1, &mb, 0, NULL, 0, NULL);
}
static VkShaderModule module(const uint32_t *code, size_t bytes) {
    VkShaderModuleCreateInfo ci = { VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, NULL, 0, bytes, code };
    VkShaderModule m; CHECK(vkCreateShaderModule(dev, &ci, NULL, &m)); return m;
}
static void fill(uint32_t *p, uint32_t v) { for (uint32_t k = 0; k < WORDS; k++) p[k] = v; }
static void write_buffer(VkDescriptorSet set, uint32_t binding, uint32_t element, VkBuffer b, VkDeviceSize size) {
    VkDescriptorBufferInfo bi = { b, 0, size };
    VkWriteDescriptorSet w = { VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, NULL, set, binding, element, 1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, NULL, &bi, NULL };
    vkUpdateDescriptorSets(dev, 1, &w, 0, NULL);
}

int main(int argc, char **argv) {
    mode = argc > 1 ? argv[1] : "";
    int uab = IS("uab") || IS("template") || IS("copy") || IS("secondary");
    int pending = IS("pending"), vertex = IS("vertex");
    if (!uab && !pending && !vertex) {
        fprintf(stderr, "usage: c_gpu_reads uab|template|copy|secondary|pending|vertex [ITERS]\n");
        return 1;
    }
    int iters = argc > 2 ? atoi(argv[2]) : 4;

    VkApplicationInfo ai = { VK_STRUCTURE_TYPE_APPLICATION_INFO, NULL, "c_gpu_reads", 1, NULL, 0, VK_API_VERSION_1_2 };
    VkInstanceCreateInfo ici = { VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, NULL, 0, &ai, 0, NULL, 0, NULL };
    VkInstance inst; CHECK(vkCreateInstance(&ici, NULL, &inst));
    uint32_t n = 1; VkPhysicalDevice pd;
    VkResult er = vkEnumeratePhysicalDevices(inst, &n, &pd); if ((er && er != VK_INCOMPLETE) || !n) return 2;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    VkPhysicalDeviceProperties props; vkGetPhysicalDeviceProperties(pd, &props);

    /* What the device has, and what MODE needs. */
    VkPhysicalDeviceVulkan12Features has12 = { VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES };
    VkPhysicalDeviceFeatures2 has = { VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &has12 };
    vkGetPhysicalDeviceFeatures2(pd, &has);
    const char *lacks = NULL;
    if (VK_API_VERSION_MINOR(props.apiVersion) < 2 && VK_API_VERSION_MAJOR(props.apiVersion) == 1) lacks = "Vulkan 1.2";
    else if (uab && !has12.descriptorBindingStorageBufferUpdateAfterBind) lacks = "descriptorBindingStorageBufferUpdateAfterBind";
    else if (pending && !has12.descriptorBindingUpdateUnusedWhilePending) lacks = "descriptorBindingUpdateUnusedWhilePending";
    else if (pending && !has12.descriptorBindingPartiallyBound) lacks = "descriptorBindingPartiallyBound";
    else if (pending && !has.features.shaderStorageBufferArrayDynamicIndexing) lacks = "shaderStorageBufferArrayDynamicIndexing";
    else if (vertex && !has.features.vertexPipelineStoresAndAtomics) lacks = "vertexPipelineStoresAndAtomics";
    if (lacks) {
        /* A device all the same: the profiled run writes a trace (with nothing to pair), so the
         * gate's enforce and guard runs have a plan to enforce, as for every program. */
        float p1 = 1.0f;
        VkDeviceQueueCreateInfo q1 = { VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, NULL, 0, 0, 1, &p1 };
        VkDeviceCreateInfo d1 = { VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, NULL, 0, 1, &q1, 0, NULL, 0, NULL, NULL };
        CHECK(vkCreateDevice(pd, &d1, NULL, &dev));
        vkDestroyDevice(dev, NULL);
        printf("%s: skipped (the device lacks %s)\n", mode, lacks);
        vkDestroyInstance(inst, NULL);
        return 0;
    }
    VkPhysicalDeviceVulkan12Features f12 = { VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES };
    f12.descriptorBindingStorageBufferUpdateAfterBind = uab ? VK_TRUE : VK_FALSE;
    f12.descriptorBindingUpdateUnusedWhilePending = pending ? VK_TRUE : VK_FALSE;
    f12.descriptorBindingPartiallyBound = pending ? VK_TRUE : VK_FALSE;
    VkPhysicalDeviceFeatures2 f2 = { VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f12 };
    f2.features.vertexPipelineStoresAndAtomics = vertex ? VK_TRUE : VK_FALSE;
    f2.features.shaderStorageBufferArrayDynamicIndexing = pending ? VK_TRUE : VK_FALSE;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = { VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, NULL, 0, 0, 1, &prio };
    VkDeviceCreateInfo dci = { VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &f2, 0, 1, &qci, 0, NULL, 0, NULL, NULL };
    CHECK(vkCreateDevice(pd, &dci, NULL, &dev));
    VkQueue q; vkGetDeviceQueue(dev, 0, 0, &q);
    VkCommandPoolCreateInfo pci = { VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, NULL, VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, 0 };
    VkCommandPool pool; CHECK(vkCreateCommandPool(dev, &pci, NULL, &pool));
    VkCommandBuffer cbs[2];
    VkCommandBufferAllocateInfo cai = { VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, NULL, pool, VK_COMMAND_BUFFER_LEVEL_PRIMARY, 2 };
    CHECK(vkAllocateCommandBuffers(dev, &cai, cbs));
    VkCommandBuffer A = cbs[0], B = cbs[1], B2 = VK_NULL_HANDLE;
    if (IS("secondary")) {
        VkCommandBufferAllocateInfo sai = { VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, NULL, pool, VK_COMMAND_BUFFER_LEVEL_SECONDARY, 1 };
        CHECK(vkAllocateCommandBuffers(dev, &sai, &B2));
    }
    VkFenceCreateInfo fci = { VK_STRUCTURE_TYPE_FENCE_CREATE_INFO, NULL, 0 };
    VkFence fence; CHECK(vkCreateFence(dev, &fci, NULL, &fence));
    VkEventCreateInfo eci = { VK_STRUCTURE_TYPE_EVENT_CREATE_INFO, NULL, 0 };
    VkEvent ev; CHECK(vkCreateEvent(dev, &eci, NULL, &ev));

    VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    VkMemoryPropertyFlags dl = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    VkDeviceMemory ms, md, mr, my, msel;
    VkBuffer S = buffer(N, VK_BUFFER_USAGE_TRANSFER_SRC_BIT, hv, &ms);
    VkBuffer D = buffer(N, VK_BUFFER_USAGE_TRANSFER_DST_BIT | (vertex ? VK_BUFFER_USAGE_VERTEX_BUFFER_BIT : VK_BUFFER_USAGE_STORAGE_BUFFER_BIT), dl, &md);
    VkBuffer R = buffer(N, VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, hv, &mr);
    VkBuffer Y = buffer(N, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, dl, &my);
    VkBuffer SEL = buffer(256, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, hv, &msel);
    uint32_t *ps, *pr, *psel;
    CHECK(vkMapMemory(dev, ms, 0, VK_WHOLE_SIZE, 0, (void **)&ps));
    CHECK(vkMapMemory(dev, mr, 0, VK_WHOLE_SIZE, 0, (void **)&pr));
    CHECK(vkMapMemory(dev, msel, 0, VK_WHOLE_SIZE, 0, (void **)&psel));
    *psel = 0;

    /* Binding 0: what B reads (pending: an array of 2); binding 1: R; binding 2 (pending): SEL. */
    VkDescriptorSetLayoutBinding lb[3] = {
        { 0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, pending ? 2 : 1, VK_SHADER_STAGE_ALL, NULL },
        { 1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_ALL, NULL },
        { 2, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_ALL, NULL } };
    uint32_t nb = pending ? 3 : 2;
    VkDescriptorBindingFlags bf[3] = { 0, 0, 0 };
    if (uab) bf[0] = VK_DESCRIPTOR_BINDING_UPDATE_AFTER_BIND_BIT;
    if (pending) bf[0] = VK_DESCRIPTOR_BINDING_UPDATE_UNUSED_WHILE_PENDING_BIT | VK_DESCRIPTOR_BINDING_PARTIALLY_BOUND_BIT;
    VkDescriptorSetLayoutBindingFlagsCreateInfo bfi = { VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_BINDING_FLAGS_CREATE_INFO, NULL, nb, bf };
    VkDescriptorSetLayoutCreateInfo lci = { VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, (uab || pending) ? &bfi : NULL,
        uab ? VK_DESCRIPTOR_SET_LAYOUT_CREATE_UPDATE_AFTER_BIND_POOL_BIT : 0, nb, lb };
    VkDescriptorSetLayout dsl; CHECK(vkCreateDescriptorSetLayout(dev, &lci, NULL, &dsl));
    VkPipelineLayoutCreateInfo plci = { VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, NULL, 0, 1, &dsl, 0, NULL };
    VkPipelineLayout pl; CHECK(vkCreatePipelineLayout(dev, &plci, NULL, &pl));
    VkDescriptorPoolSize psz = { VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 8 };
    VkDescriptorPoolCreateInfo dpi = { VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, NULL,
        uab ? VK_DESCRIPTOR_POOL_CREATE_UPDATE_AFTER_BIND_BIT : 0, 2, 1, &psz };
    VkDescriptorPool dp; CHECK(vkCreateDescriptorPool(dev, &dpi, NULL, &dp));
    VkDescriptorSetLayout dsls[2] = { dsl, dsl };
    VkDescriptorSetAllocateInfo dai = { VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, NULL, dp, 2, dsls };
    VkDescriptorSet sets[2]; CHECK(vkAllocateDescriptorSets(dev, &dai, sets));
    VkDescriptorSet ds = sets[0], src_set = sets[1];
    write_buffer(ds, 0, 0, Y, N);
    if (pending) { write_buffer(ds, 0, 1, Y, N); write_buffer(ds, 2, 0, SEL, 4); }
    write_buffer(ds, 1, 0, R, N);
    if (IS("copy")) { write_buffer(src_set, 0, 0, D, N); write_buffer(src_set, 1, 0, R, N); }
    VkDescriptorUpdateTemplate tmpl = VK_NULL_HANDLE;
    if (IS("template")) {
        VkDescriptorUpdateTemplateEntry te = { 0, 0, 1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 0, sizeof(VkDescriptorBufferInfo) };
        VkDescriptorUpdateTemplateCreateInfo tci = { VK_STRUCTURE_TYPE_DESCRIPTOR_UPDATE_TEMPLATE_CREATE_INFO, NULL, 0, 1, &te,
            VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_DESCRIPTOR_SET, dsl, VK_PIPELINE_BIND_POINT_COMPUTE, VK_NULL_HANDLE, 0 };
        CHECK(vkCreateDescriptorUpdateTemplate(dev, &tci, NULL, &tmpl));
    }

    VkPipeline pipe; VkRenderPass rp = VK_NULL_HANDLE; VkFramebuffer fb = VK_NULL_HANDLE; VkShaderModule sm;
    if (!vertex) {
        sm = pending ? module(spv_pick_comp, sizeof spv_pick_comp) : module(spv_copy_comp, sizeof spv_copy_comp);
        VkComputePipelineCreateInfo cpi = { VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, NULL, 0,
            { VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, NULL, 0, VK_SHADER_STAGE_COMPUTE_BIT, sm, "main", NULL }, pl, VK_NULL_HANDLE, 0 };
        CHECK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpi, NULL, &pipe));
    } else {
        VkSubpassDescription sd = { 0, VK_PIPELINE_BIND_POINT_GRAPHICS, 0, NULL, 0, NULL, NULL, NULL, 0, NULL };
        VkRenderPassCreateInfo rpi = { VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO, NULL, 0, 0, NULL, 1, &sd, 0, NULL };
        CHECK(vkCreateRenderPass(dev, &rpi, NULL, &rp));
        VkFramebufferCreateInfo fbi = { VK_STRUCTURE_TYPE_FRAMEBUFFER_CREATE_INFO, NULL, 0, rp, 0, NULL, 1, 1, 1 };
        CHECK(vkCreateFramebuffer(dev, &fbi, NULL, &fb));
        sm = module(spv_vtx_vert, sizeof spv_vtx_vert);
        VkPipelineShaderStageCreateInfo st = { VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, NULL, 0, VK_SHADER_STAGE_VERTEX_BIT, sm, "main", NULL };
        VkVertexInputBindingDescription vb = { 0, 4, VK_VERTEX_INPUT_RATE_VERTEX };
        VkVertexInputAttributeDescription va = { 0, 0, VK_FORMAT_R32_UINT, 0 };
        VkPipelineVertexInputStateCreateInfo vi = { VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO, NULL, 0, 1, &vb, 1, &va };
        VkPipelineInputAssemblyStateCreateInfo ia = { VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO, NULL, 0, VK_PRIMITIVE_TOPOLOGY_POINT_LIST, VK_FALSE };
        VkViewport vp = { 0, 0, 1, 1, 0, 1 }; VkRect2D sc = { { 0, 0 }, { 1, 1 } };
        VkPipelineViewportStateCreateInfo vps = { VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO, NULL, 0, 1, &vp, 1, &sc };
        VkPipelineRasterizationStateCreateInfo rs = { VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO, NULL, 0,
            VK_FALSE, VK_TRUE, VK_POLYGON_MODE_FILL, VK_CULL_MODE_NONE, VK_FRONT_FACE_COUNTER_CLOCKWISE, VK_FALSE, 0, 0, 0, 1.0f };
        VkPipelineMultisampleStateCreateInfo msi = { VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO, NULL, 0, VK_SAMPLE_COUNT_1_BIT, VK_FALSE, 0, NULL, VK_FALSE, VK_FALSE };
        VkGraphicsPipelineCreateInfo gpi = { VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO, NULL, 0, 1, &st, &vi, &ia,
            NULL, &vps, &rs, &msi, NULL, NULL, NULL, pl, rp, 0, VK_NULL_HANDLE, -1 };
        CHECK(vkCreateGraphicsPipelines(dev, VK_NULL_HANDLE, 1, &gpi, NULL, &pipe));
    }

    /* A and B are recorded once (secondary: B2 too). */
    VkCommandBufferBeginInfo cbi = { VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, NULL, 0, NULL };
    CHECK(vkBeginCommandBuffer(A, &cbi));
    VkBufferCopy c = { 0, 0, N }; vkCmdCopyBuffer(A, S, D, 1, &c);
    CHECK(vkEndCommandBuffer(A));
    if (B2) {
        VkCommandBufferInheritanceInfo inh = { VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO, NULL, VK_NULL_HANDLE, 0, VK_NULL_HANDLE, VK_FALSE, 0, 0 };
        VkCommandBufferBeginInfo sbi = { VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, NULL, 0, &inh };
        CHECK(vkBeginCommandBuffer(B2, &sbi));
        vkCmdBindPipeline(B2, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
        vkCmdBindDescriptorSets(B2, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, NULL);
        vkCmdDispatch(B2, WORDS / 64, 1, 1);
        CHECK(vkEndCommandBuffer(B2));
    }
    CHECK(vkBeginCommandBuffer(B, &cbi));
    VkMemoryBarrier hb = { VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, VK_ACCESS_HOST_WRITE_BIT, VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT };
    vkCmdWaitEvents(B, 1, &ev, VK_PIPELINE_STAGE_HOST_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 1, &hb, 0, NULL, 0, NULL);
    barrier(B, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);
    vkCmdFillBuffer(B, R, 0, N, 0);
    barrier(B, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);
    if (B2) {
        vkCmdExecuteCommands(B, 1, &B2);
    } else if (!vertex) {
        vkCmdBindPipeline(B, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
        vkCmdBindDescriptorSets(B, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, NULL);
        vkCmdDispatch(B, WORDS / 64, 1, 1);
    } else {
        VkRenderPassBeginInfo rbi = { VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO, NULL, rp, fb, { { 0, 0 }, { 1, 1 } }, 0, NULL };
        vkCmdBeginRenderPass(B, &rbi, VK_SUBPASS_CONTENTS_INLINE);
        vkCmdBindPipeline(B, VK_PIPELINE_BIND_POINT_GRAPHICS, pipe);
        vkCmdBindDescriptorSets(B, VK_PIPELINE_BIND_POINT_GRAPHICS, pl, 0, 1, &ds, 0, NULL);
        VkDeviceSize off = 0; vkCmdBindVertexBuffers(B, 0, 1, &D, &off);
        vkCmdDraw(B, WORDS, 1, 0, 0);
        vkCmdEndRenderPass(B);
    }
    barrier(B, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    CHECK(vkEndCommandBuffer(B));

    printf("%s:", mode);
    int differs = 0;
    for (int i = 1; i <= iters; i++) {
        fill(ps, (uint32_t)i);
        VkSubmitInfo sa = { VK_STRUCTURE_TYPE_SUBMIT_INFO, NULL, 0, NULL, NULL, 1, &A, 0, NULL };
        CHECK(vkQueueSubmit(q, 1, &sa, fence));
        CHECK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX)); CHECK(vkResetFences(dev, 1, &fence));
        CHECK(vkResetEvent(dev, ev));
        /* Point what B reads at D now that B is recorded (and not pending). */
        if (IS("uab") || IS("secondary")) {
            write_buffer(ds, 0, 0, D, N);
        } else if (IS("template")) {
            VkDescriptorBufferInfo bd = { D, 0, N };
            vkUpdateDescriptorSetWithTemplate(dev, ds, tmpl, &bd);
        } else if (IS("copy")) {
            VkCopyDescriptorSet cp = { VK_STRUCTURE_TYPE_COPY_DESCRIPTOR_SET, NULL, src_set, 0, 0, ds, 0, 0, 1 };
            vkUpdateDescriptorSets(dev, 0, NULL, 1, &cp);
        } else if (pending) {
            uint32_t k = (uint32_t)i % 2;
            write_buffer(ds, 0, k, D, N);
            write_buffer(ds, 0, 1 - k, Y, N);
            *psel = k;
        }
        VkSubmitInfo sb = { VK_STRUCTURE_TYPE_SUBMIT_INFO, NULL, 0, NULL, NULL, 1, &B, 0, NULL };
        CHECK(vkQueueSubmit(q, 1, &sb, fence));
        fill(ps, (uint32_t)i + 1);          /* the next upload, prepared while B waits */
        CHECK(vkSetEvent(dev, ev));
        CHECK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX)); CHECK(vkResetFences(dev, 1, &fence));
        uint32_t bad = 0; for (uint32_t k = 0; k < WORDS; k++) if (pr[k] != pr[0]) bad++;
        printf(" %u", pr[0]);
        if (bad) printf("(%u mixed)", bad);
        if (pr[0] != (uint32_t)i || bad) differs = 1;
    }
    printf("  => %s\n", differs ? "WRONG (differs from the program's semantics)" : "as the program means");
    fflush(stdout);
    vkDeviceWaitIdle(dev);
    vkDestroyPipeline(dev, pipe, NULL); vkDestroyShaderModule(dev, sm, NULL);
    if (fb) vkDestroyFramebuffer(dev, fb, NULL);
    if (rp) vkDestroyRenderPass(dev, rp, NULL);
    if (tmpl) vkDestroyDescriptorUpdateTemplate(dev, tmpl, NULL);
    vkDestroyDescriptorPool(dev, dp, NULL); vkDestroyPipelineLayout(dev, pl, NULL); vkDestroyDescriptorSetLayout(dev, dsl, NULL);
    vkDestroyEvent(dev, ev, NULL);
    vkUnmapMemory(dev, ms); vkUnmapMemory(dev, mr); vkUnmapMemory(dev, msel);
    VkBuffer bs[5] = { S, D, R, Y, SEL }; VkDeviceMemory mems[5] = { ms, md, mr, my, msel };
    for (int k = 0; k < 5; k++) { vkDestroyBuffer(dev, bs[k], NULL); vkFreeMemory(dev, mems[k], NULL); }
    vkDestroyFence(dev, fence, NULL); vkDestroyCommandPool(dev, pool, NULL);
    vkDestroyDevice(dev, NULL); vkDestroyInstance(inst, NULL);
    return differs;
}
