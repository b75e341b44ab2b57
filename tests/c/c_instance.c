/* (a) Instance, physical device, device and queue, then everything destroyed: the smallest
 * -lvulkan program (a layer that resolves its own entry points through interposable symbols
 * recurses or hangs here). Prints the device name and "ok". */
#include "common.h"

int main(void)
{
    VkInstance inst = create_instance(VK_API_VERSION_1_1, NULL, 0, NULL, 0, NULL);
    struct gpu g = gpu_create(inst);
    REQUIRE(g.queue != VK_NULL_HANDLE);
    printf("device %s\n", g.name);
    vkDestroyDevice(g.dev, NULL);
    vkDestroyInstance(inst, NULL);
    printf("ok\n");
    return 0;
}
