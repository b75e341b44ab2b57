/* (e) c_api10 [SPV]: c_upload 3 on an instance created with apiVersion VK_API_VERSION_1_0
 * explicitly: a layer may not call anything newer than 1.0 core on it. */
#include "common.h"

int main(int argc, char **argv)
{
    const char *spv = spv_path(argc, argv, 1);
    VkInstance inst = create_instance(VK_API_VERSION_1_0, NULL, 0, NULL, 0, NULL);
    upload_run(inst, spv, 3);
    vkDestroyInstance(inst, NULL);
    return 0;
}
