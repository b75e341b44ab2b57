/* LD_PRELOAD shim: writes every vkCreateShaderModule module to $SPV_DUMP_DIR/NNN.spv (make.sh). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <vulkan/vulkan.h>
static int n;
VKAPI_ATTR VkResult VKAPI_CALL vkCreateShaderModule(VkDevice d, const VkShaderModuleCreateInfo *ci,
    const VkAllocationCallbacks *a, VkShaderModule *m)
{
    const char *dir = getenv("SPV_DUMP_DIR");
    if (dir) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%03d.spv", dir, n++);
        FILE *f = fopen(p, "wb");
        if (f) { fwrite(ci->pCode, 1, ci->codeSize, f); fclose(f); }
    }
    PFN_vkCreateShaderModule next = (PFN_vkCreateShaderModule)dlsym(RTLD_NEXT, "vkCreateShaderModule");
    return next(d, ci, a, m);
}
