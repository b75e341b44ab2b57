/* (issue 49) c_image_after_block FORMAT TILING [ROUNDS]: an image placed in a block that was
 * made before it — the order every sub-allocator (VMA, gpu-allocator, a renderer's own) uses.
 *
 * A host-visible 4 MiB block is allocated and mapped, and a staging and a readback buffer are
 * bound into it; only then is the image created, and bound into the same block after them. Each
 * round the host writes the staging bytes, copies staging -> image -> readback, waits, and folds
 * the readback bytes into a checksum. A layer that backs mapped host-visible memory with memory
 * of its own (echo's profile mode imports it through VK_EXT_external_memory_host) has decided
 * how before the image existed; the image's bind must still be valid usage
 * (VUID-vkBindImageMemory-memory-02729: imported memory takes only images created for that
 * handle type, and a driver may refuse that for some formats).
 *
 * FORMAT, the formats drivers differ on (the first the driver can copy to and from with TILING,
 * queried; none: a "skip:" line and exit 0):
 *   rgba8       R8G8B8A8_UNORM
 *   depth       D32_SFLOAT, D24_UNORM_S8_UINT, D32_SFLOAT_S8_UINT, D16_UNORM (depth aspect)
 *   packed      E5B9G9R9_UFLOAT_PACK32, A2B10G10R10_UNORM_PACK32
 *   compressed  BC1_RGBA_UNORM_BLOCK, ETC2_R8G8B8A8_UNORM_BLOCK
 * TILING: `optimal` or `linear`. Prints the format it used and the checksum (copies move texel
 * blocks unchanged, so it is the same on every driver that picks the same format; the bits a
 * D24 copy leaves undefined are masked).
 *
 * gate-args: rgba8 optimal 3
 * gate-args: rgba8 linear 3
 * gate-args: depth optimal 3
 * gate-args: packed optimal 3
 * gate-args: packed linear 3
 * gate-args: compressed optimal 3
 * gate-args: compressed linear 3
 */
#include "common.h"

struct fmt {
    VkFormat format;
    const char *name;
    uint32_t block_bytes; /* bytes per texel, or per 4x4 block when compressed */
    int compressed, depth;
};

static const struct fmt FORMATS[][4] = {
    {{VK_FORMAT_R8G8B8A8_UNORM, "R8G8B8A8_UNORM", 4, 0, 0}},
    {{VK_FORMAT_D32_SFLOAT, "D32_SFLOAT", 4, 0, 1},
     {VK_FORMAT_D24_UNORM_S8_UINT, "D24_UNORM_S8_UINT", 4, 0, 1},
     {VK_FORMAT_D32_SFLOAT_S8_UINT, "D32_SFLOAT_S8_UINT", 4, 0, 1},
     {VK_FORMAT_D16_UNORM, "D16_UNORM", 2, 0, 1}},
    {{VK_FORMAT_E5B9G9R9_UFLOAT_PACK32, "E5B9G9R9_UFLOAT_PACK32", 4, 0, 0},
     {VK_FORMAT_A2B10G10R10_UNORM_PACK32, "A2B10G10R10_UNORM_PACK32", 4, 0, 0}},
    {{VK_FORMAT_BC1_RGBA_UNORM_BLOCK, "BC1_RGBA_UNORM_BLOCK", 8, 1, 0},
     {VK_FORMAT_ETC2_R8G8B8A8_UNORM_BLOCK, "ETC2_R8G8B8A8_UNORM_BLOCK", 16, 1, 0}},
};
static const char *const KINDS[] = {"rgba8", "depth", "packed", "compressed"};

static VkDeviceSize align_up(VkDeviceSize v, VkDeviceSize a) { return (v + a - 1) / a * a; }

int main(int argc, char **argv)
{
    int kind = -1;
    for (int i = 0; argc > 2 && i < 4; i++)
        if (strcmp(argv[1], KINDS[i]) == 0)
            kind = i;
    int linear = argc > 2 && strcmp(argv[2], "linear") == 0;
    if (kind < 0 || (!linear && strcmp(argv[2], "optimal") != 0)) {
        fprintf(stderr, "usage: c_image_after_block rgba8|depth|packed|compressed "
                        "optimal|linear [ROUNDS]\n");
        return 1;
    }
    uint32_t rounds = argc > 3 ? parse_iters(argv[3]) : 3;
    const VkImageTiling tiling = linear ? VK_IMAGE_TILING_LINEAR : VK_IMAGE_TILING_OPTIMAL;
    VkInstance inst = create_instance(VK_API_VERSION_1_1, NULL, 0, NULL, 0, NULL);
    struct gpu g = gpu_create(inst);

    /* The first format of the kind that the driver copies to and from with this tiling. */
    const VkFormatFeatureFlags need =
        VK_FORMAT_FEATURE_TRANSFER_SRC_BIT | VK_FORMAT_FEATURE_TRANSFER_DST_BIT;
    const VkImageUsageFlags usage =
        VK_IMAGE_USAGE_TRANSFER_SRC_BIT | VK_IMAGE_USAGE_TRANSFER_DST_BIT;
    const uint32_t W = 256, H = 256;
    const struct fmt *f = NULL;
    for (int i = 0; i < 4 && !f && FORMATS[kind][i].name; i++) {
        VkFormatProperties fp;
        vkGetPhysicalDeviceFormatProperties(g.phys, FORMATS[kind][i].format, &fp);
        VkFormatFeatureFlags have = linear ? fp.linearTilingFeatures : fp.optimalTilingFeatures;
        VkImageFormatProperties ifp;
        if ((have & need) == need &&
            vkGetPhysicalDeviceImageFormatProperties(g.phys, FORMATS[kind][i].format,
                                                     VK_IMAGE_TYPE_2D, tiling, usage, 0,
                                                     &ifp) == VK_SUCCESS &&
            ifp.maxExtent.width >= W && ifp.maxExtent.height >= H)
            f = &FORMATS[kind][i];
    }
    if (!f) {
        printf("skip: no %s format with %s tiling and transfers here\n", KINDS[kind], argv[2]);
        vkDestroyDevice(g.dev, NULL);
        vkDestroyInstance(inst, NULL);
        return 0;
    }
    const uint32_t bw = f->compressed ? W / 4 : W, bh = f->compressed ? H / 4 : H;
    const VkDeviceSize bytes = (VkDeviceSize)bw * bh * f->block_bytes;

    /* 1. The block and its buffers. */
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = bytes,
        .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
    };
    VkBuffer stg, rb;
    CHECK(vkCreateBuffer(g.dev, &bci, NULL, &stg));
    bci.usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    CHECK(vkCreateBuffer(g.dev, &bci, NULL, &rb));
    VkMemoryRequirements rs, rr, ri;
    vkGetBufferMemoryRequirements(g.dev, stg, &rs);
    vkGetBufferMemoryRequirements(g.dev, rb, &rr);
    const VkDeviceSize block = 4 * MIB, al = 65536;
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = block,
        .memoryTypeIndex = find_memory_type(&g, rs.memoryTypeBits & rr.memoryTypeBits, MEM_STAGING),
    };
    VkDeviceMemory m;
    CHECK(vkAllocateMemory(g.dev, &ai, NULL, &m));
    uint8_t *p;
    CHECK(vkMapMemory(g.dev, m, 0, VK_WHOLE_SIZE, 0, (void **)&p));
    const VkDeviceSize o_s = 0, o_r = align_up(rs.size, al);
    CHECK(vkBindBufferMemory(g.dev, stg, m, o_s));
    CHECK(vkBindBufferMemory(g.dev, rb, m, o_r));

    /* 2. The image, created now and placed after the buffers. */
    VkImageCreateInfo ici = {
        .sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO,
        .imageType = VK_IMAGE_TYPE_2D,
        .format = f->format,
        .extent = {W, H, 1},
        .mipLevels = 1,
        .arrayLayers = 1,
        .samples = VK_SAMPLE_COUNT_1_BIT,
        .tiling = tiling,
        .usage = usage,
        .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
    };
    VkImage img;
    CHECK(vkCreateImage(g.dev, &ici, NULL, &img));
    vkGetImageMemoryRequirements(g.dev, img, &ri);
    const VkDeviceSize o_i = align_up(o_r + align_up(rr.size, al), ri.alignment);
    if (!(ri.memoryTypeBits & (1u << ai.memoryTypeIndex)) || o_i + ri.size > block) {
        printf("skip: a %s image does not fit the host-visible block here\n", f->name);
        return 0;
    }
    CHECK(vkBindImageMemory(g.dev, img, m, o_i));

    /* 3. Rounds: staging -> image -> readback. */
    struct cmds c = cmds_create(&g, 1);
    const VkImageAspectFlags aspect =
        f->depth ? VK_IMAGE_ASPECT_DEPTH_BIT : VK_IMAGE_ASPECT_COLOR_BIT;
    const VkPipelineStageFlags xfer = VK_PIPELINE_STAGE_TRANSFER_BIT;
    VkImageMemoryBarrier to_dst = {
        .sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_TRANSFER_READ_BIT,
        .dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
        .oldLayout = VK_IMAGE_LAYOUT_UNDEFINED,
        .newLayout = VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
        .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
        .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
        .image = img,
        .subresourceRange = {aspect, 0, 1, 0, 1},
    };
    VkImageMemoryBarrier to_src = to_dst;
    to_src.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    to_src.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
    to_src.oldLayout = VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL;
    to_src.newLayout = VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL;
    VkBufferImageCopy reg = {0, 0, 0, {aspect, 0, 0, 1}, {0, 0, 0}, {W, H, 1}};
    uint64_t h = FNV_OFFSET;
    for (uint32_t r = 0; r < rounds; r++) {
        for (VkDeviceSize i = 0; i < bytes / 4; i++) {
            uint32_t v = (uint32_t)i * 2654435761u + r * 977u;
            if (f->format == VK_FORMAT_D32_SFLOAT || f->format == VK_FORMAT_D32_SFLOAT_S8_UINT) {
                float d = (float)(v & 0xffffu) / 65536.0f; /* in [0, 1], exact */
                memcpy(&v, &d, 4);
            } else if (f->format == VK_FORMAT_D24_UNORM_S8_UINT) {
                v &= 0x00ffffffu;
            }
            memcpy(p + o_s + i * 4, &v, 4);
        }
        cmd_begin(c.cmd[0]);
        vkCmdPipelineBarrier(c.cmd[0], xfer, xfer, 0, 0, NULL, 0, NULL, 1, &to_dst);
        vkCmdCopyBufferToImage(c.cmd[0], stg, img, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 1, &reg);
        vkCmdPipelineBarrier(c.cmd[0], xfer, xfer, 0, 0, NULL, 0, NULL, 1, &to_src);
        vkCmdCopyImageToBuffer(c.cmd[0], img, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, rb, 1, &reg);
        buffer_barrier(c.cmd[0], rb, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT, xfer,
                       VK_PIPELINE_STAGE_HOST_BIT);
        cmd_submit_wait(&g, c.cmd[0], c.fence);
        for (VkDeviceSize i = 0; i < bytes / 4; i++) {
            uint32_t v;
            memcpy(&v, p + o_r + i * 4, 4);
            if (f->format == VK_FORMAT_D24_UNORM_S8_UINT)
                v &= 0x00ffffffu; /* X8_D24: the top byte is undefined */
            h = fnv1a(h, &v, 4);
        }
    }
    printf("format %s, %s tiling\nrounds %u\nchecksum %016llx\n", f->name, argv[2], rounds,
           (unsigned long long)h);
    cmds_destroy(&g, &c);
    vkUnmapMemory(g.dev, m);
    vkDestroyImage(g.dev, img, NULL);
    vkDestroyBuffer(g.dev, stg, NULL);
    vkDestroyBuffer(g.dev, rb, NULL);
    vkFreeMemory(g.dev, m, NULL);
    vkDestroyDevice(g.dev, NULL);
    vkDestroyInstance(inst, NULL);
    return 0;
}
