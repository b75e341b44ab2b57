/* (c) c_two_devices seq|concurrent [SPV]: two VkDevices in one process with different traffic.
 * Device 0: 1 MiB, pattern A, 2 iterations; device 1: 2 MiB, pattern B, 3 iterations.
 * seq: device 0 is created, used and destroyed before device 1 exists; concurrent: both alive,
 * their iterations interleaved, then both destroyed. One checksum per device.
 *
 * The validation gate (scripts/validate-all.sh) runs it with these arguments:
 * gate-args: seq
 * gate-args: concurrent
 */
#include "common.h"

#define ITERS0 2
#define ITERS1 3

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "seq") && strcmp(argv[1], "concurrent"))) {
        fprintf(stderr, "usage: c_two_devices seq|concurrent [SPV]\n");
        return 1;
    }
    int concurrent = strcmp(argv[1], "concurrent") == 0;
    const char *spv = spv_path(argc, argv, 2);
    VkInstance inst = create_instance(VK_API_VERSION_1_1, NULL, 0, NULL, 0, NULL);
    uint64_t sum[2];

    if (!concurrent) {
        static const VkDeviceSize size[2] = {1 * MIB, 2 * MIB};
        static const uint32_t seed[2] = {0xA, 0xB}, iters[2] = {ITERS0, ITERS1};
        for (int k = 0; k < 2; k++) {
            struct gpu g = gpu_create(inst);
            struct work w = work_create(&g, spv, size[k], seed[k], BIND_THEN_WRITE);
            for (uint32_t i = 0; i < iters[k]; i++)
                work_iterate(&g, &w);
            sum[k] = w.checksum;
            work_destroy(&g, &w);
            vkDestroyDevice(g.dev, NULL);
        }
    } else {
        struct gpu g0 = gpu_create(inst);
        struct gpu g1 = gpu_create(inst);
        struct work w0 = work_create(&g0, spv, 1 * MIB, 0xA, BIND_THEN_WRITE);
        struct work w1 = work_create(&g1, spv, 2 * MIB, 0xB, BIND_THEN_WRITE);
        for (uint32_t i = 0; i < ITERS1; i++) {
            if (i < ITERS0)
                work_iterate(&g0, &w0);
            work_iterate(&g1, &w1);
        }
        sum[0] = w0.checksum;
        sum[1] = w1.checksum;
        work_destroy(&g0, &w0);
        work_destroy(&g1, &w1);
        vkDestroyDevice(g0.dev, NULL);
        vkDestroyDevice(g1.dev, NULL);
    }
    for (int k = 0; k < 2; k++)
        printf("device %d checksum %016llx\n", k, (unsigned long long)sum[k]);
    vkDestroyInstance(inst, NULL);
    return 0;
}
