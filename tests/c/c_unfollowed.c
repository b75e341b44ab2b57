/* (issue 32; from ../shared/repro/unfollowed.c) c_unfollowed MODE [ITERS]: an upload pair S (host-visible staging buffer) -> D (device-local buffer),
 * copied by vkCmdCopyBuffer, where D's only later use is MODE's command. ITERS defaults to 4.
 * Prints one value per iteration and a summary line:
 *   MODE: v1 v2 ... vN  => as the program means
 *   MODE: v1 v2 ... vN  => WRONG (differs from the program's semantics)
 * A correct Vulkan implementation prints 1 2 ... ITERS in every mode.
 *
 * The instance and device use Vulkan 1.3, which has vkCmdCopyBufferToImage2 in core.
 * c_unfollowed_copy.h is the repro's shader (unfollowed_copy.comp: R[x] = X[x]) compiled by
 *   glslangValidator -V --target-env vulkan1.2 --vn spv_copy_comp -o c_unfollowed_copy.h unfollowed_copy.comp
 *
 * gate-args: b2i1
 * gate-args: b2i2
 * gate-args: qp
 * gate-args: aliasx
 *
 * Read modes. Iteration i: the host writes i into every word of S; submission A copies S -> D and
 * the host waits for it. Submission B first waits on event E (set by the host), then reads D with
 * MODE's command into the readback buffer R. While B waits, the host writes i + 1 into S (the next
 * upload, prepared early), then sets E, waits for B and prints R[0]; every word of R must equal R[0].
 * A finished before S changed, so D holds i and a correct program prints i. In b2i2 and b2i1, if S
 * and D shared memory, B would read the host's later write and print i + 1.
 *   b2i2    vkCmdCopyBufferToImage2 (D -> image), then vkCmdCopyImageToBuffer (image -> R)
 *   b2i1    control: the same with vkCmdCopyBufferToImage
 *   aliasx  compute shader R[x] = X[x] (vkCmdBindDescriptorSets, vkCmdDispatch), where X is a second
 *           storage buffer bound to D's memory at offset 0; D itself is never a descriptor. X sees the
 *           bytes A copied into D's memory, so a correct program prints i. If S and D shared memory
 *           so that the upload no longer lands in the memory X is bound to, X would read bytes the
 *           upload never wrote (not i; 0 was seen).
 *
 * Write mode. Iteration i: the host keeps S as a persistent shadow and adds 1 to every word (S = i);
 * submission A copies S -> D, then MODE's command writes 0 into D's first word; the host waits and
 * prints S[0]. Nothing on the GPU writes S, so a correct program prints i. If S and D shared memory,
 * the write into D would also land in S and the program would print 0.
 *   qp      vkCmdCopyQueryPoolResults of an occlusion query with no draws (result 0) into D
 *
 * Under a layer that shares the memory of S and D, a correct program is expected to keep its output
 * (1 2 ... ITERS): the layer has to keep S and D apart whenever D is used as above. b2i1 is the
 * control for b2i2: the same read of D by the older command.
 */
#include <vulkan/vulkan.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "c_unfollowed_copy.h"
#define CHECK(x) do { VkResult r_ = (x); if (r_) { fprintf(stderr, "%s -> %d\n", #x, r_); exit(2); } } while (0)

enum { W = 512, H = 512, WORDS = W * H };
static const VkDeviceSize N = (VkDeviceSize)WORDS * 4; /* 1 MiB */

static VkDevice dev; static VkQueue q;
static VkCommandBuffer cb; static VkFence fence;
static VkPhysicalDeviceMemoryProperties mp;
static const char *mode;
#define IS(m) (strcmp(mode, m) == 0)

static uint32_t mem_type(uint32_t bits, VkMemoryPropertyFlags want) {
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) return i;
    fprintf(stderr, "no memory type\n"); exit(2);
}
static VkBuffer buffer(VkDeviceSize size, VkBufferUsageFlags usage) {
    VkBufferCreateInfo bci = { VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, NULL, 0, size, usage,
                               VK_SHARING_MODE_EXCLUSIVE, 0, NULL };
    VkBuffer b; CHECK(vkCreateBuffer(dev, &bci, NULL, &b)); return b;
}
static VkDeviceMemory alloc_for(VkBuffer b, VkMemoryPropertyFlags want) {
    VkMemoryRequirements r; vkGetBufferMemoryRequirements(dev, b, &r);
    VkMemoryAllocateInfo mai = { VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, NULL, r.size, mem_type(r.memoryTypeBits, want) };
    VkDeviceMemory m; CHECK(vkAllocateMemory(dev, &mai, NULL, &m));
    CHECK(vkBindBufferMemory(dev, b, m, 0));
    return m;
}
static void begin(void) {
    VkCommandBufferBeginInfo bi = { VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, NULL,
                                    VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, NULL };
    CHECK(vkBeginCommandBuffer(cb, &bi));
}
static void barrier(VkPipelineStageFlags src, VkAccessFlags sa, VkPipelineStageFlags dst, VkAccessFlags da) {
    VkMemoryBarrier mb = { VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, sa, da };
    vkCmdPipelineBarrier(cb, src, dst, 0, 1, &mb, 0, NULL, 0, NULL);
}
static void submit(int wait) {
    CHECK(vkEndCommandBuffer(cb));
    VkSubmitInfo si = { VK_STRUCTURE_TYPE_SUBMIT_INFO, NULL, 0, NULL, NULL, 1, &cb, 0, NULL };
    CHECK(vkQueueSubmit(q, 1, &si, fence));
    if (wait) {
        CHECK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX));
        CHECK(vkResetFences(dev, 1, &fence));
    }
}
static void fill_words(uint32_t *p, uint32_t v) { for (uint32_t i = 0; i < WORDS; i++) p[i] = v; }

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: unfollowed b2i2|b2i1|qp|aliasx [ITERS]\n"); return 1; }
    mode = argv[1];
    int iters = argc > 2 ? atoi(argv[2]) : 4;
    int write_mode = IS("qp");
    int compute = IS("aliasx");
    int img_read = IS("b2i2") || IS("b2i1");
    if (!write_mode && !compute && !img_read) { fprintf(stderr, "unknown mode %s\n", mode); return 1; }

    /* Instance and device: Vulkan 1.3. */
    VkInstance inst; VkPhysicalDevice pd;
    VkApplicationInfo ai = { VK_STRUCTURE_TYPE_APPLICATION_INFO, NULL, "unfollowed", 1, "unfollowed", 1, VK_API_VERSION_1_3 };
    VkInstanceCreateInfo ici = { VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, NULL, 0, &ai, 0, NULL, 0, NULL };
    CHECK(vkCreateInstance(&ici, NULL, &inst));
    uint32_t n = 8; VkPhysicalDevice pds[8];
    CHECK(vkEnumeratePhysicalDevices(inst, &n, pds)); if (!n) { fprintf(stderr, "no device\n"); return 2; }
    pd = pds[0];
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    /* vkCmdCopyBufferToImage2 is Vulkan 1.3 core: on an older device (the Jetson Nano's 1.2
     * table of the test layer) b2i2 reads with the 1.0 command instead (b2i1), the same in
     * every mode, and says so on stderr. */
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    if (IS("b2i2") && props.apiVersion < VK_API_VERSION_1_3) {
        fprintf(stderr, "b2i2: the device has Vulkan %u.%u; vkCmdCopyBufferToImage2 needs 1.3: b2i1 instead\n",
                VK_API_VERSION_MAJOR(props.apiVersion), VK_API_VERSION_MINOR(props.apiVersion));
        mode = "b2i1";
    }
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = { VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, NULL, 0, 0, 1, &prio };
    VkDeviceCreateInfo dci = { VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, NULL, 0, 1, &qci, 0, NULL, 0, NULL, NULL };
    CHECK(vkCreateDevice(pd, &dci, NULL, &dev));
    vkGetDeviceQueue(dev, 0, 0, &q);
    VkCommandPool pool;
    VkCommandPoolCreateInfo pci = { VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, NULL,
                                    VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, 0 };
    CHECK(vkCreateCommandPool(dev, &pci, NULL, &pool));
    VkCommandBufferAllocateInfo cai = { VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, NULL, pool,
                                        VK_COMMAND_BUFFER_LEVEL_PRIMARY, 1 };
    CHECK(vkAllocateCommandBuffers(dev, &cai, &cb));
    VkFenceCreateInfo fci = { VK_STRUCTURE_TYPE_FENCE_CREATE_INFO, NULL, 0 };
    CHECK(vkCreateFence(dev, &fci, NULL, &fence));

    /* Buffers: S staging, D device, R readback (host-visible, never copied by vkCmdCopyBuffer). */
    VkBuffer S = buffer(N, VK_BUFFER_USAGE_TRANSFER_SRC_BIT);
    VkBuffer D = buffer(N, VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT);
    VkBuffer R = buffer(N, VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_STORAGE_BUFFER_BIT);
    VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    VkDeviceMemory ms = alloc_for(S, hv);
    VkDeviceMemory md = alloc_for(D, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    VkDeviceMemory mr = alloc_for(R, hv);
    VkBuffer X = VK_NULL_HANDLE;
    if (compute) { /* a second buffer over D's memory range: it reads D's bytes */
        X = buffer(N, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT);
        CHECK(vkBindBufferMemory(dev, X, md, 0));
    }
    uint32_t *ps, *pr;
    CHECK(vkMapMemory(dev, ms, 0, VK_WHOLE_SIZE, 0, (void **)&ps));
    CHECK(vkMapMemory(dev, mr, 0, VK_WHOLE_SIZE, 0, (void **)&pr));

    /* Image for b2i2 / b2i1. */
    VkImage img = VK_NULL_HANDLE; VkDeviceMemory mi = VK_NULL_HANDLE;
    VkImageSubresourceRange sr = { VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1 };
    if (img_read) {
        VkImageCreateInfo ii = { VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO, NULL, 0, VK_IMAGE_TYPE_2D, VK_FORMAT_R32_UINT,
            { W, H, 1 }, 1, 1, VK_SAMPLE_COUNT_1_BIT, VK_IMAGE_TILING_OPTIMAL,
            VK_IMAGE_USAGE_TRANSFER_SRC_BIT | VK_IMAGE_USAGE_TRANSFER_DST_BIT, VK_SHARING_MODE_EXCLUSIVE, 0, NULL,
            VK_IMAGE_LAYOUT_UNDEFINED };
        CHECK(vkCreateImage(dev, &ii, NULL, &img));
        VkMemoryRequirements r; vkGetImageMemoryRequirements(dev, img, &r);
        VkMemoryAllocateInfo mai = { VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, NULL, r.size,
                                     mem_type(r.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) };
        CHECK(vkAllocateMemory(dev, &mai, NULL, &mi));
        CHECK(vkBindImageMemory(dev, img, mi, 0));
    }

    /* Compute pipeline for aliasx: binding 0 = X (source), binding 1 = R (destination). */
    VkDescriptorSetLayout dsl = VK_NULL_HANDLE; VkPipelineLayout pl = VK_NULL_HANDLE; VkPipeline pipe = VK_NULL_HANDLE;
    VkDescriptorPool dp = VK_NULL_HANDLE; VkDescriptorSet ds = VK_NULL_HANDLE; VkShaderModule sm = VK_NULL_HANDLE;
    if (compute) {
        VkDescriptorSetLayoutBinding b[2] = {
            { 0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, NULL },
            { 1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, NULL } };
        VkDescriptorSetLayoutCreateInfo lci = { VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, NULL, 0, 2, b };
        CHECK(vkCreateDescriptorSetLayout(dev, &lci, NULL, &dsl));
        VkPipelineLayoutCreateInfo plci = { VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, NULL, 0, 1, &dsl, 0, NULL };
        CHECK(vkCreatePipelineLayout(dev, &plci, NULL, &pl));
        VkDescriptorPoolSize psz = { VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 2 };
        VkDescriptorPoolCreateInfo dpi = { VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, NULL, 0, 1, 1, &psz };
        CHECK(vkCreateDescriptorPool(dev, &dpi, NULL, &dp));
        VkDescriptorSetAllocateInfo dai = { VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, NULL, dp, 1, &dsl };
        CHECK(vkAllocateDescriptorSets(dev, &dai, &ds));
        VkDescriptorBufferInfo bi[2] = { { X, 0, N }, { R, 0, N } };
        VkWriteDescriptorSet w[2] = {
            { VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, NULL, ds, 0, 0, 1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, NULL, &bi[0], NULL },
            { VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, NULL, ds, 1, 0, 1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, NULL, &bi[1], NULL } };
        vkUpdateDescriptorSets(dev, 2, w, 0, NULL);
        VkShaderModuleCreateInfo smi = { VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, NULL, 0, sizeof spv_copy_comp, spv_copy_comp };
        CHECK(vkCreateShaderModule(dev, &smi, NULL, &sm));
        VkComputePipelineCreateInfo cpi = { VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, NULL, 0,
            { VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, NULL, 0, VK_SHADER_STAGE_COMPUTE_BIT, sm, "main", NULL },
            pl, VK_NULL_HANDLE, 0 };
        CHECK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpi, NULL, &pipe));
    }

    VkEventCreateInfo eci = { VK_STRUCTURE_TYPE_EVENT_CREATE_INFO, NULL, 0 };
    VkEvent ev; CHECK(vkCreateEvent(dev, &eci, NULL, &ev));
    VkQueryPool qpool = VK_NULL_HANDLE;
    if (write_mode) {
        VkQueryPoolCreateInfo qpi = { VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, NULL, 0, VK_QUERY_TYPE_OCCLUSION, 1, 0 };
        CHECK(vkCreateQueryPool(dev, &qpi, NULL, &qpool));
    }
    VkBufferImageCopy reg = { 0, 0, 0, { VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1 }, { 0, 0, 0 }, { W, H, 1 } };
    VkBufferImageCopy2 reg2 = { VK_STRUCTURE_TYPE_BUFFER_IMAGE_COPY_2, NULL, 0, 0, 0,
                                { VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1 }, { 0, 0, 0 }, { W, H, 1 } };

    printf("%s:", mode);
    int differs = 0;
    if (write_mode) memset(ps, 0, N);
    for (int i = 1; i <= iters; i++) {
        if (write_mode) {
            for (uint32_t k = 0; k < WORDS; k++) ps[k] += 1;   /* the host's persistent shadow: S[k] == i */
            begin();
            VkBufferCopy c = { 0, 0, N }; vkCmdCopyBuffer(cb, S, D, 1, &c);
            barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                    VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT);
            /* the GPU writes a result word (0) into D's first word */
            vkCmdResetQueryPool(cb, qpool, 0, 1);
            vkCmdBeginQuery(cb, qpool, 0, 0);
            vkCmdEndQuery(cb, qpool, 0);
            vkCmdCopyQueryPoolResults(cb, qpool, 0, 1, D, 0, 4, VK_QUERY_RESULT_WAIT_BIT);
            barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
            submit(1);
            printf(" %u", ps[0]);
            if (ps[0] != (uint32_t)i) differs = 1;
            continue;
        }

        uint32_t v = (uint32_t)i;
        fill_words(ps, v);
        /* A: the upload. */
        begin();
        VkBufferCopy c = { 0, 0, N }; vkCmdCopyBuffer(cb, S, D, 1, &c);
        submit(1);

        /* B: waits for the host's event, then reads D by MODE's command. */
        CHECK(vkResetEvent(dev, ev));
        begin();
        VkMemoryBarrier mb = { VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, VK_ACCESS_HOST_WRITE_BIT,
            VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT };
        vkCmdWaitEvents(cb, 1, &ev, VK_PIPELINE_STAGE_HOST_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 1, &mb, 0, NULL, 0, NULL);
        /* A's transfer writes (an earlier submission) made visible to B's reads */
        barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);
        vkCmdFillBuffer(cb, R, 0, N, 0);
        barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);
        if (img_read) {
            VkImageMemoryBarrier b1 = { VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER, NULL, 0, VK_ACCESS_TRANSFER_WRITE_BIT,
                VK_IMAGE_LAYOUT_UNDEFINED, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, VK_QUEUE_FAMILY_IGNORED,
                VK_QUEUE_FAMILY_IGNORED, img, sr };
            vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0, NULL, 0, NULL, 1, &b1);
            if (IS("b2i2")) {
                VkCopyBufferToImageInfo2 ci = { VK_STRUCTURE_TYPE_COPY_BUFFER_TO_IMAGE_INFO_2, NULL, D, img,
                    VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 1, &reg2 };
                vkCmdCopyBufferToImage2(cb, &ci);
            } else {
                vkCmdCopyBufferToImage(cb, D, img, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 1, &reg);
            }
            VkImageMemoryBarrier b2 = b1; b2.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
            b2.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT; b2.oldLayout = VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL;
            b2.newLayout = VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL;
            vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0, NULL, 0, NULL, 1, &b2);
            vkCmdCopyImageToBuffer(cb, img, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, R, 1, &reg);
        } else {
            vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
            vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, NULL);
            vkCmdDispatch(cb, WORDS / 64, 1, 1);
        }
        barrier(VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
        submit(0);
        fill_words(ps, v + 1);   /* the next upload, prepared while B waits */
        CHECK(vkSetEvent(dev, ev));
        CHECK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX));
        CHECK(vkResetFences(dev, 1, &fence));
        uint32_t bad = 0;
        for (uint32_t k = 0; k < WORDS; k++) if (pr[k] != pr[0]) bad++;
        printf(" %u", pr[0]);
        if (bad) printf("(%u mixed)", bad);
        if (pr[0] != v || bad) differs = 1;
    }
    printf("  => %s\n", differs ? "WRONG (differs from the program's semantics)" : "as the program means");
    fflush(stdout);
    vkDeviceWaitIdle(dev);
    vkDestroyEvent(dev, ev, NULL);
    if (qpool) vkDestroyQueryPool(dev, qpool, NULL);
    if (pipe) vkDestroyPipeline(dev, pipe, NULL);
    if (sm) vkDestroyShaderModule(dev, sm, NULL);
    if (dp) vkDestroyDescriptorPool(dev, dp, NULL);
    if (pl) vkDestroyPipelineLayout(dev, pl, NULL);
    if (dsl) vkDestroyDescriptorSetLayout(dev, dsl, NULL);
    if (img) { vkDestroyImage(dev, img, NULL); vkFreeMemory(dev, mi, NULL); }
    vkUnmapMemory(dev, ms); vkUnmapMemory(dev, mr);
    if (X) vkDestroyBuffer(dev, X, NULL);
    vkDestroyBuffer(dev, S, NULL); vkDestroyBuffer(dev, D, NULL); vkDestroyBuffer(dev, R, NULL);
    vkFreeMemory(dev, ms, NULL); vkFreeMemory(dev, md, NULL); vkFreeMemory(dev, mr, NULL);
    vkDestroyFence(dev, fence, NULL); vkDestroyCommandPool(dev, pool, NULL);
    vkDestroyDevice(dev, NULL); vkDestroyInstance(inst, NULL);
    return 0;
}
