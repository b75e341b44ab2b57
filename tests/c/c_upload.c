/* (b) c_upload ITERS [SPV]: the renderer pattern that lost bytes. The staging buffer's memory is
 * allocated, mapped, written and unmapped, and only then bound (vkBindBufferMemory); each iteration
 * copies it to a device-local buffer, dispatches, and reads the result back. ITERS=1 is a one-time
 * upload, ITERS=3 a re-upload every frame.
 *
 * The validation gate (scripts/validate-all.sh) runs it with these arguments:
 * gate-args: 1
 * gate-args: 3
 */
#include "common.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: c_upload ITERS [SPV]\n");
        return 1;
    }
    uint32_t iters = parse_iters(argv[1]);
    const char *spv = spv_path(argc, argv, 2);
    VkInstance inst = create_instance(VK_API_VERSION_1_1, NULL, 0, NULL, 0, NULL);
    upload_run(inst, spv, iters);
    vkDestroyInstance(inst, NULL);
    return 0;
}
