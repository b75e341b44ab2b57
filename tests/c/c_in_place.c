/* (issue 54) c_in_place MODE [ITERS]: an upload pair S -> D whose device buffer an in-place kernel
 * changes (d += 1000), read back through R — the shape of saxpy's y (from ../shared/repro/
 * in_place_upload.c). Iteration 1 writes every word of S; later iterations write S as MODE says,
 * then copy S -> D, run the kernel, copy D -> R, wait, and print R's first and last word and a
 * hash of R.
 *   whole   every word = i
 *   same    every word = 7, each iteration (the same bytes rewritten: content comparison sees no
 *           change)
 *   half    the first half only
 *   pages   every word but the last of each 4 KiB page = i: every page touched, not every byte
 *   memcpy  every word = i, written with memcpy from a prepared copy (glibc's string moves)
 * Without sharing, R = S + 1000 word by word (S keeps what the host last wrote there). Shared, the
 * words the host did not rewrite hold the kernel's previous output: whole, same and memcpy are
 * safe to share, half and pages are not. With the default settings echo must apply the first three
 * and refuse the others (exact host writes), and every run must print what the program does alone.
 *
 * gate-args: whole
 * gate-args: half
 *
 * The shader (c_in_place_shader.h, GLSL in its comment):
 *   layout(local_size_x = 64) in; layout(set = 0, binding = 0) buffer D { uint d[]; };
 *   void main() { uint i = gl_GlobalInvocationID.x; d[i] = d[i] + 1000u; }
 */
#include <vulkan/vulkan.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "c_in_place_shader.h"
#define CHECK(x) do { VkResult r_ = (x); if (r_) { fprintf(stderr, "%s -> %d\n", #x, r_); exit(2); } } while (0)
/* 1 MiB by default; a third argument gives the size in MiB (a multiple of 1/4 MiB: whole
 * workgroups), to measure what exact host writes cost on larger buffers. */
static uint32_t WORDS = 512 * 512;
static VkDeviceSize N = 512 * 512 * 4;
static VkDevice dev; static VkPhysicalDeviceMemoryProperties mp;
static uint32_t mem_type(uint32_t bits, VkMemoryPropertyFlags want) {
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) return i;
    fprintf(stderr, "no memory type\n"); exit(2);
}
static VkBuffer buffer(VkBufferUsageFlags usage, VkMemoryPropertyFlags want, VkDeviceMemory *m) {
    VkBufferCreateInfo bci = { VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, NULL, 0, N, usage, VK_SHARING_MODE_EXCLUSIVE, 0, NULL };
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
int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: in_place_upload whole|same|half|pages|memcpy [ITERS [MIB]]\n"); return 1; }
    const char *mode = argv[1]; int iters = argc > 2 ? atoi(argv[2]) : 4;
    if (argc > 3) {
        double mib = atof(argv[3]);
        if (!(mib >= 0.25 && mib <= 1024)) { fprintf(stderr, "MIB: 0.25 to 1024\n"); return 1; }
        WORDS = (uint32_t)(mib * 4) * 65536; N = (VkDeviceSize)WORDS * 4;
    }
    const char *modes[] = { "whole", "same", "half", "pages", "memcpy" }; int mi = -1;
    for (int k = 0; k < 5; k++) if (!strcmp(mode, modes[k])) mi = k;
    if (mi < 0) { fprintf(stderr, "unknown mode\n"); return 1; }
    VkApplicationInfo ai = { VK_STRUCTURE_TYPE_APPLICATION_INFO, NULL, "in_place_upload", 1, "in_place_upload", 1, VK_API_VERSION_1_2 };
    VkInstanceCreateInfo ici = { VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, NULL, 0, &ai, 0, NULL, 0, NULL };
    VkInstance inst; CHECK(vkCreateInstance(&ici, NULL, &inst));
    uint32_t n = 1; VkPhysicalDevice pd;
    VkResult er = vkEnumeratePhysicalDevices(inst, &n, &pd); if ((er && er != VK_INCOMPLETE) || !n) return 2;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = { VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, NULL, 0, 0, 1, &prio };
    VkDeviceCreateInfo dci = { VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, NULL, 0, 1, &qci, 0, NULL, 0, NULL, NULL };
    CHECK(vkCreateDevice(pd, &dci, NULL, &dev));
    VkQueue q; vkGetDeviceQueue(dev, 0, 0, &q);
    VkCommandPoolCreateInfo pci = { VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, NULL, 0, 0 };
    VkCommandPool pool; CHECK(vkCreateCommandPool(dev, &pci, NULL, &pool));
    VkCommandBufferAllocateInfo cai = { VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, NULL, pool, VK_COMMAND_BUFFER_LEVEL_PRIMARY, 1 };
    VkCommandBuffer cb; CHECK(vkAllocateCommandBuffers(dev, &cai, &cb));
    VkFenceCreateInfo fci = { VK_STRUCTURE_TYPE_FENCE_CREATE_INFO, NULL, 0 };
    VkFence fence; CHECK(vkCreateFence(dev, &fci, NULL, &fence));
    VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    VkDeviceMemory ms, md, mr;
    VkBuffer S = buffer(VK_BUFFER_USAGE_TRANSFER_SRC_BIT, hv, &ms);
    VkBuffer D = buffer(VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &md);
    VkBuffer R = buffer(VK_BUFFER_USAGE_TRANSFER_DST_BIT, hv, &mr);
    uint32_t *ps, *pr;
    CHECK(vkMapMemory(dev, ms, 0, VK_WHOLE_SIZE, 0, (void **)&ps));
    CHECK(vkMapMemory(dev, mr, 0, VK_WHOLE_SIZE, 0, (void **)&pr));
    VkDescriptorSetLayoutBinding lb = { 0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, NULL };
    VkDescriptorSetLayoutCreateInfo lci = { VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, NULL, 0, 1, &lb };
    VkDescriptorSetLayout dsl; CHECK(vkCreateDescriptorSetLayout(dev, &lci, NULL, &dsl));
    VkPipelineLayoutCreateInfo plci = { VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, NULL, 0, 1, &dsl, 0, NULL };
    VkPipelineLayout pl; CHECK(vkCreatePipelineLayout(dev, &plci, NULL, &pl));
    VkDescriptorPoolSize psz = { VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1 };
    VkDescriptorPoolCreateInfo dpi = { VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, NULL, 0, 1, 1, &psz };
    VkDescriptorPool dp; CHECK(vkCreateDescriptorPool(dev, &dpi, NULL, &dp));
    VkDescriptorSetAllocateInfo dai = { VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, NULL, dp, 1, &dsl };
    VkDescriptorSet ds; CHECK(vkAllocateDescriptorSets(dev, &dai, &ds));
    VkDescriptorBufferInfo bi = { D, 0, N };
    VkWriteDescriptorSet w = { VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, NULL, ds, 0, 0, 1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, NULL, &bi, NULL };
    vkUpdateDescriptorSets(dev, 1, &w, 0, NULL);
    VkShaderModuleCreateInfo smi = { VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, NULL, 0, sizeof spv_inplace_comp, spv_inplace_comp };
    VkShaderModule sm; CHECK(vkCreateShaderModule(dev, &smi, NULL, &sm));
    VkComputePipelineCreateInfo cpi = { VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, NULL, 0,
        { VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, NULL, 0, VK_SHADER_STAGE_COMPUTE_BIT, sm, "main", NULL }, pl, VK_NULL_HANDLE, 0 };
    VkPipeline pipe; CHECK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpi, NULL, &pipe));
    VkCommandBufferBeginInfo cbi = { VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, NULL, 0, NULL };
    CHECK(vkBeginCommandBuffer(cb, &cbi));
    VkBufferCopy c = { 0, 0, N };
    vkCmdCopyBuffer(cb, S, D, 1, &c);
    barrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, NULL);
    vkCmdDispatch(cb, WORDS / 64, 1, 1);
    barrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
    vkCmdCopyBuffer(cb, D, R, 1, &c);
    barrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    CHECK(vkEndCommandBuffer(cb));
    uint32_t *src = malloc(N);
    if (!src) return 2;
    printf("%s:", mode);
    for (int i = 1; i <= iters; i++) {
        uint32_t v = mi == 1 ? 7u : (uint32_t)i;
        if (mi == 4 && i > 1) {
            for (uint32_t k = 0; k < WORDS; k++) src[k] = v;
            memcpy(ps, src, N);
        } else {
            for (uint32_t k = 0; k < WORDS; k++) {
                int write = i == 1 || mi <= 1 || mi == 4 || (mi == 2 && k < WORDS / 2)
                    || (mi == 3 && k % 1024 != 1023);
                if (write) ps[k] = v;
            }
        }
        VkSubmitInfo si = { VK_STRUCTURE_TYPE_SUBMIT_INFO, NULL, 0, NULL, NULL, 1, &cb, 0, NULL };
        CHECK(vkQueueSubmit(q, 1, &si, fence));
        CHECK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX)); CHECK(vkResetFences(dev, 1, &fence));
        uint64_t h = 1469598103934665603ull;
        for (uint32_t k = 0; k < WORDS; k++) { h ^= pr[k]; h *= 1099511628211ull; }
        printf(" %u/%u/%016llx", pr[0], pr[WORDS - 1], (unsigned long long)h);
    }
    printf("\n");
    free(src);
    vkDeviceWaitIdle(dev);
    vkDestroyPipeline(dev, pipe, NULL); vkDestroyShaderModule(dev, sm, NULL);
    vkDestroyDescriptorPool(dev, dp, NULL); vkDestroyPipelineLayout(dev, pl, NULL); vkDestroyDescriptorSetLayout(dev, dsl, NULL);
    vkUnmapMemory(dev, ms); vkUnmapMemory(dev, mr);
    vkDestroyBuffer(dev, S, NULL); vkDestroyBuffer(dev, D, NULL); vkDestroyBuffer(dev, R, NULL);
    vkFreeMemory(dev, ms, NULL); vkFreeMemory(dev, md, NULL); vkFreeMemory(dev, mr, NULL);
    vkDestroyFence(dev, fence, NULL); vkDestroyCommandPool(dev, pool, NULL);
    vkDestroyDevice(dev, NULL); vkDestroyInstance(inst, NULL);
    return 0;
}
