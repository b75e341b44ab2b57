/* (issue 23) c_image_in_block slab|device [ROUNDS]: an image bound into an allocation that also
 * holds buffers.
 *
 * `slab`: ONE host-visible, mapped allocation (the slabs of video-processing libraries and
 * GL-on-Vulkan drivers) holds a staging buffer the host writes, a readback buffer, and an
 * optimal-tiling image in between. Each round: the host writes the staging bytes, copy buffer ->
 * image -> buffer, submit, wait, fold the readback bytes into a checksum. Profile mode backs
 * host-visible memory with a memfd imported through VK_EXT_external_memory_host; an image bound
 * into such memory must have been created with VkExternalMemoryImageCreateInfo(HOST_ALLOCATION),
 * or the bind is VUID-vkBindImageMemory-memory-02729 (what echo did before issue 23).
 *
 * `device`: the image shares a device block with a device buffer d instead (VMA-style), the
 * staging buffer h and the readback buffer have allocations of their own. Each round: the host
 * writes h, copy h -> d -> image -> readback. The plan binds h into d's block (staging into
 * device); guarded enforce (`guard=on`) imports that block, so the same rule applies there.
 *
 * gate-args: slab 3
 * gate-args: device 3
 */
#include "common.h"

static VkDeviceSize align_up(VkDeviceSize v, VkDeviceSize a) { return (v + a - 1) / a * a; }

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "slab") != 0 && strcmp(argv[1], "device") != 0)) {
        fprintf(stderr, "usage: c_image_in_block slab|device [ROUNDS]\n");
        return 1;
    }
    int slab = strcmp(argv[1], "slab") == 0;
    uint32_t rounds = argc > 2 ? parse_iters(argv[2]) : 3;
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
    VkBuffer stg, rb, d = VK_NULL_HANDLE;
    CHECK(vkCreateBuffer(g.dev, &bci, NULL, &stg));
    bci.usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    CHECK(vkCreateBuffer(g.dev, &bci, NULL, &rb));
    if (!slab) {
        bci.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
        CHECK(vkCreateBuffer(g.dev, &bci, NULL, &d));
    }
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

    VkMemoryRequirements rs, rr, ri, rd = {0};
    vkGetBufferMemoryRequirements(g.dev, stg, &rs);
    vkGetBufferMemoryRequirements(g.dev, rb, &rr);
    vkGetImageMemoryRequirements(g.dev, img, &ri);
    if (!slab)
        vkGetBufferMemoryRequirements(g.dev, d, &rd);
    const VkDeviceSize al = 65536;
    uint8_t *p, *p_stg, *p_rb;
    VkDeviceMemory m, m_stg = VK_NULL_HANDLE, m_rb = VK_NULL_HANDLE;
    if (slab) {
        VkDeviceSize o_s = 0, o_r = align_up(rs.size, al);
        VkDeviceSize o_i = align_up(o_r + align_up(rr.size, al), ri.alignment);
        uint32_t bits = rs.memoryTypeBits & rr.memoryTypeBits & ri.memoryTypeBits;
        VkMemoryAllocateInfo ai = {
            .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
            .allocationSize = o_i + ri.size,
            .memoryTypeIndex = find_memory_type(&g, bits, MEM_STAGING),
        };
        CHECK(vkAllocateMemory(g.dev, &ai, NULL, &m));
        CHECK(vkMapMemory(g.dev, m, 0, VK_WHOLE_SIZE, 0, (void **)&p));
        CHECK(vkBindBufferMemory(g.dev, stg, m, o_s));
        CHECK(vkBindBufferMemory(g.dev, rb, m, o_r));
        CHECK(vkBindImageMemory(g.dev, img, m, o_i));
        p_stg = p + o_s;
        p_rb = p + o_r;
    } else {
        /* The device block (d, then the image), allocated while d is unbound, as allocators do. */
        VkDeviceSize o_i = align_up(align_up(rd.size, al), ri.alignment);
        VkMemoryAllocateInfo ai = {
            .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
            .allocationSize = o_i + ri.size,
            .memoryTypeIndex = find_memory_type(&g, rd.memoryTypeBits & ri.memoryTypeBits, MEM_DEVICE),
        };
        CHECK(vkAllocateMemory(g.dev, &ai, NULL, &m));
        CHECK(vkBindBufferMemory(g.dev, d, m, 0));
        CHECK(vkBindImageMemory(g.dev, img, m, o_i));
        ai.allocationSize = rs.size;
        ai.memoryTypeIndex = find_memory_type(&g, rs.memoryTypeBits, MEM_STAGING);
        CHECK(vkAllocateMemory(g.dev, &ai, NULL, &m_stg));
        CHECK(vkBindBufferMemory(g.dev, stg, m_stg, 0));
        CHECK(vkMapMemory(g.dev, m_stg, 0, VK_WHOLE_SIZE, 0, (void **)&p_stg));
        ai.allocationSize = rr.size;
        ai.memoryTypeIndex = find_memory_type(&g, rr.memoryTypeBits, MEM_READBACK);
        CHECK(vkAllocateMemory(g.dev, &ai, NULL, &m_rb));
        CHECK(vkBindBufferMemory(g.dev, rb, m_rb, 0));
        CHECK(vkMapMemory(g.dev, m_rb, 0, VK_WHOLE_SIZE, 0, (void **)&p_rb));
    }

    struct cmds cb = cmds_create(&g, 1);
    VkCommandBuffer cmd = cb.cmd[0];
    VkFence fence = cb.fence;

    const VkPipelineStageFlags xfer = VK_PIPELINE_STAGE_TRANSFER_BIT;
    uint64_t h = FNV_OFFSET;
    VkImageSubresourceRange sr = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
    VkBufferImageCopy reg = {0, 0, 0, {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1}, {0, 0, 0}, {W, H, 1}};
    VkBufferCopy whole = {0, 0, bytes};
    for (uint32_t r = 0; r < rounds; r++) {
        for (VkDeviceSize i = 0; i < bytes; i++)
            p_stg[i] = (uint8_t)(i * 7 + r * 13);
        CHECK(vkResetCommandBuffer(cmd, 0));
        VkCommandBufferBeginInfo bi = {
            .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
            .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
        };
        CHECK(vkBeginCommandBuffer(cmd, &bi));
        VkBuffer src = stg;
        if (!slab) {
            /* The previous round's copy out of d comes first. */
            buffer_barrier(cmd, d, VK_ACCESS_TRANSFER_READ_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, xfer,
                           xfer);
            vkCmdCopyBuffer(cmd, stg, d, 1, &whole);
            buffer_barrier(cmd, d, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_TRANSFER_READ_BIT, xfer,
                           xfer);
            src = d;
        }
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
        vkCmdPipelineBarrier(cmd, xfer, xfer, 0, 0, NULL, 0, NULL, 1, &b1);
        vkCmdCopyBufferToImage(cmd, src, img, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 1, &reg);
        VkImageMemoryBarrier b2 = b1;
        b2.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
        b2.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
        b2.oldLayout = VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL;
        b2.newLayout = VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL;
        vkCmdPipelineBarrier(cmd, xfer, xfer, 0, 0, NULL, 0, NULL, 1, &b2);
        vkCmdCopyImageToBuffer(cmd, img, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, rb, 1, &reg);
        buffer_barrier(cmd, rb, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT, xfer,
                       VK_PIPELINE_STAGE_HOST_BIT);
        CHECK(vkEndCommandBuffer(cmd));
        VkSubmitInfo si = {
            .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
            .commandBufferCount = 1,
            .pCommandBuffers = &cmd,
        };
        CHECK(vkResetFences(g.dev, 1, &fence));
        CHECK(vkQueueSubmit(g.queue, 1, &si, fence));
        CHECK(vkWaitForFences(g.dev, 1, &fence, VK_TRUE, UINT64_MAX));
        h = fnv1a(h, p_rb, (size_t)bytes);
    }
    printf("rounds %u\nchecksum %016llx\n", rounds, (unsigned long long)h);
    cmds_destroy(&g, &cb);
    vkDestroyImage(g.dev, img, NULL);
    vkDestroyBuffer(g.dev, stg, NULL);
    vkDestroyBuffer(g.dev, rb, NULL);
    if (d)
        vkDestroyBuffer(g.dev, d, NULL);
    if (slab)
        vkUnmapMemory(g.dev, m);
    vkFreeMemory(g.dev, m, NULL);
    if (m_stg) {
        vkUnmapMemory(g.dev, m_stg);
        vkFreeMemory(g.dev, m_stg, NULL);
    }
    if (m_rb) {
        vkUnmapMemory(g.dev, m_rb);
        vkFreeMemory(g.dev, m_rb, NULL);
    }
    vkDestroyDevice(g.dev, NULL);
    vkDestroyInstance(inst, NULL);
    return 0;
}
