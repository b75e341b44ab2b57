/* The validation gate's control (tests/tests/validation_all.rs): a valid program, or — with
 * GATE_CONTROL_INVALID=1 in its environment — one that makes an invalid call validation reports
 * (vkBindBufferMemory at an offset that breaks the buffer's alignment,
 * VUID-vkBindBufferMemory-memoryOffset-01036; lavapipe accepts it). Prints "ok". Kept out of
 * tests/c so the gate itself does not run it; built with -I tests/c against tests/c/common.h. */
#include <stdlib.h>
#include "common.h"

int main(void)
{
    VkInstance inst = create_instance(VK_API_VERSION_1_1, NULL, 0, NULL, 0, NULL);
    struct gpu g = gpu_create(inst);
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = 4096,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkBuffer buf;
    CHECK(vkCreateBuffer(g.dev, &bci, NULL, &buf));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(g.dev, buf, &req);
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size + 4 * req.alignment,
        .memoryTypeIndex = find_memory_type(&g, req.memoryTypeBits, MEM_STAGING),
    };
    VkDeviceMemory mem;
    CHECK(vkAllocateMemory(g.dev, &ai, NULL, &mem));
    const char *bad = getenv("GATE_CONTROL_INVALID");
    VkDeviceSize offset = bad && bad[0] == '1' ? req.alignment / 2 : req.alignment;
    CHECK(vkBindBufferMemory(g.dev, buf, mem, offset));
    vkDestroyBuffer(g.dev, buf, NULL);
    vkFreeMemory(g.dev, mem, NULL);
    vkDestroyDevice(g.dev, NULL);
    vkDestroyInstance(inst, NULL);
    printf("ok\n");
    return 0;
}
