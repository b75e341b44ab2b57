/* (issue 23) c_image_in_block [ROUNDS]: an image and buffers bound into ONE host-visible, mapped
 * allocation (the slabs of video-processing libraries and GL-on-Vulkan drivers): a staging buffer
 * the host writes, a readback buffer, and an optimal-tiling image in between. Each round: the
 * host writes the staging bytes, copy buffer -> image -> buffer, submit, wait, fold the readback
 * bytes into a checksum. Validation alone reports nothing. Profile mode backs host-visible memory
 * with a memfd imported through VK_EXT_external_memory_host; an image bound into such memory
 * must have been created with VkExternalMemoryImageCreateInfo(HOST_ALLOCATION), or the bind is
 * VUID-vkBindImageMemory-memory-02729 (what echo did before issue 23, three times a run here:
 * image, and the staging and readback buffers once each through the image's memory). */
#include "common.h"

int main(int argc, char **argv)
{
    uint32_t rounds = argc > 1 ? parse_iters(argv[1]) : 3;
    VkInstance inst = create_instance(VK_API_VERSION_1_0, NULL, 0, NULL, 0, NULL);
    struct gpu g = gpu_create(inst);
    const uint32_t W = 512, H = 512;
    const VkDeviceSize bytes = (VkDeviceSize)W * H * 4; /* 1 MiB: above echo's 256 KiB floor */

    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = bytes,
        .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkBuffer stg, rb;
    CHECK(vkCreateBuffer(g.dev, &bci, NULL, &stg));
    bci.usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    CHECK(vkCreateBuffer(g.dev, &bci, NULL, &rb));
    VkImageCreateInfo ici = {
        .sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO,
        .imageType = VK_IMAGE_TYPE_2D,
        .format = VK_FORMAT_R8G8B8A8_UNORM,
        .extent = {W, H, 1},
        .mipLevels = 1,
        .arrayLayers = 1,
        .samples = VK_SAMPLE_COUNT_1_BIT,
        .tiling = VK_IMAGE_TILING_OPTIMAL,
        .usage = VK_IMAGE_USAGE_TRANSFER_SRC_BIT | VK_IMAGE_USAGE_TRANSFER_DST_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
        .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
    };
    VkImage img;
    CHECK(vkCreateImage(g.dev, &ici, NULL, &img));

    VkMemoryRequirements rs, rr, ri;
    vkGetBufferMemoryRequirements(g.dev, stg, &rs);
    vkGetBufferMemoryRequirements(g.dev, rb, &rr);
    vkGetImageMemoryRequirements(g.dev, img, &ri);
    const VkDeviceSize al = 65536;
    VkDeviceSize o_s = 0, o_r = (rs.size + al - 1) / al * al;
    VkDeviceSize o_i = o_r + (rr.size + al - 1) / al * al;
    o_i = (o_i + ri.alignment - 1) / ri.alignment * ri.alignment;
    uint32_t bits = rs.memoryTypeBits & rr.memoryTypeBits & ri.memoryTypeBits;
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = o_i + ri.size,
        .memoryTypeIndex = find_memory_type(&g, bits, MEM_STAGING),
    };
    VkDeviceMemory m;
    CHECK(vkAllocateMemory(g.dev, &ai, NULL, &m));
    uint8_t *p;
    CHECK(vkMapMemory(g.dev, m, 0, VK_WHOLE_SIZE, 0, (void **)&p));
    CHECK(vkBindBufferMemory(g.dev, stg, m, o_s));
    CHECK(vkBindBufferMemory(g.dev, rb, m, o_r));
    CHECK(vkBindImageMemory(g.dev, img, m, o_i));

    VkCommandPoolCreateInfo cpci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = g.family,
    };
    VkCommandPool pool;
    CHECK(vkCreateCommandPool(g.dev, &cpci, NULL, &pool));
    VkCommandBufferAllocateInfo cbai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    VkCommandBuffer cmd;
    CHECK(vkAllocateCommandBuffers(g.dev, &cbai, &cmd));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    CHECK(vkCreateFence(g.dev, &fci, NULL, &fence));

    uint64_t h = FNV_OFFSET;
    VkImageSubresourceRange sr = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
    VkBufferImageCopy reg = {0, 0, 0, {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1}, {0, 0, 0}, {W, H, 1}};
    for (uint32_t r = 0; r < rounds; r++) {
        for (VkDeviceSize i = 0; i < bytes; i++)
            p[o_s + i] = (uint8_t)(i * 7 + r * 13);
        CHECK(vkResetCommandBuffer(cmd, 0));
        VkCommandBufferBeginInfo bi = {
            .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
            .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
        };
        CHECK(vkBeginCommandBuffer(cmd, &bi));
        /* The previous round's copy out of the image (and its host read) come first. */
        VkImageMemoryBarrier b1 = {
            .sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER,
            .srcAccessMask = VK_ACCESS_TRANSFER_READ_BIT,
            .dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
            .oldLayout = VK_IMAGE_LAYOUT_UNDEFINED,
            .newLayout = VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
            .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
            .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
            .image = img,
            .subresourceRange = sr,
        };
        vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                             0, 0, NULL, 0, NULL, 1, &b1);
        vkCmdCopyBufferToImage(cmd, stg, img, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 1, &reg);
        VkImageMemoryBarrier b2 = b1;
        b2.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
        b2.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
        b2.oldLayout = VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL;
        b2.newLayout = VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL;
        vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                             0, 0, NULL, 0, NULL, 1, &b2);
        vkCmdCopyImageToBuffer(cmd, img, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, rb, 1, &reg);
        buffer_barrier(cmd, rb, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT,
                       VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT);
        CHECK(vkEndCommandBuffer(cmd));
        VkSubmitInfo si = {
            .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
            .commandBufferCount = 1,
            .pCommandBuffers = &cmd,
        };
        CHECK(vkResetFences(g.dev, 1, &fence));
        CHECK(vkQueueSubmit(g.queue, 1, &si, fence));
        CHECK(vkWaitForFences(g.dev, 1, &fence, VK_TRUE, UINT64_MAX));
        h = fnv1a(h, p + o_r, (size_t)bytes);
    }
    printf("rounds %u\nchecksum %016llx\n", rounds, (unsigned long long)h);
    vkUnmapMemory(g.dev, m);
    vkDestroyFence(g.dev, fence, NULL);
    vkDestroyCommandPool(g.dev, pool, NULL);
    vkDestroyImage(g.dev, img, NULL);
    vkDestroyBuffer(g.dev, stg, NULL);
    vkDestroyBuffer(g.dev, rb, NULL);
    vkFreeMemory(g.dev, m, NULL);
    vkDestroyDevice(g.dev, NULL);
    vkDestroyInstance(inst, NULL);
    return 0;
}
