/* (d) c_no_cleanup [SPV]: three upload -> dispatch -> readback iterations (staging bound as
 * usual), the checksum, then return from main with every object alive: no vkDestroy*, no
 * vkFree* (many programs leave the cleanup to process exit). */
#include "common.h"

int main(int argc, char **argv)
{
    const char *spv = spv_path(argc, argv, 1);
    VkInstance inst = create_instance(VK_API_VERSION_1_1, NULL, 0, NULL, 0, NULL);
    struct gpu g = gpu_create(inst);
    struct work w = work_create(&g, spv, 4 * MIB, 3, BIND_THEN_WRITE);
    for (int i = 0; i < 3; i++)
        work_iterate(&g, &w);
    printf("iterations 3\nchecksum %016llx\n", (unsigned long long)w.checksum);
    fflush(stdout);
    return 0;
}
