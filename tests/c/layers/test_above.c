/* VK_LAYER_ECHO_test_above (issue 23): a test-only layer placed ABOVE echo (closer to the
 * application) that makes the lookups capture layers make, the way RenderDoc's layer (Debian
 * renderdoc 1.24) does them: in vkCreateDevice it fetches the next layer's vkCreateDevice with
 * `pfnNextGetInstanceProcAddr(VK_NULL_HANDLE, "vkCreateDevice")` and calls through the result.
 * RenderDoc calls a NULL result and dies with SIGSEGV; this layer prints one line
 *   [VK_LAYER_ECHO_test_above] NULL-instance lookup of NAME returned NULL
 * and fails the call with VK_ERROR_INITIALIZATION_FAILED, so a test sees the defect as a failed
 * program rather than a crash. Before that it makes the other NULL-instance lookups a layer above
 * may make (each device-level command echo hooks, and vkGetDeviceProcAddr) and reports a NULL the
 * same way, and after a device is made it prints
 *   [VK_LAYER_ECHO_test_above] vkCreateDevice through vkGetInstanceProcAddr(NULL): ok
 * Everything else passes straight through. Built by tests/build.rs as
 * OUT_DIR/libVkLayer_echo_test_above.so; the tests write its manifest. */
#include <stdio.h>
#include <string.h>
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#define EXPORT __attribute__((visibility("default")))
#define TAG "[VK_LAYER_ECHO_test_above] "

/* One instance and a few devices are enough for the corpus programs. */
static PFN_vkGetInstanceProcAddr next_gipa;
static PFN_vkDestroyInstance next_destroy_instance;
#define MAX_DEVICES 8
static struct {
    void *key;
    PFN_vkGetDeviceProcAddr gdpa;
} devices[MAX_DEVICES];

static void *key_of(const void *handle) { return *(void *const *)handle; }

static PFN_vkGetDeviceProcAddr device_gdpa(VkDevice d)
{
    for (int i = 0; i < MAX_DEVICES; i++)
        if (devices[i].key == key_of(d))
            return devices[i].gdpa;
    return NULL;
}

static VKAPI_ATTR VkResult VKAPI_CALL above_CreateInstance(const VkInstanceCreateInfo *ci,
                                                           const VkAllocationCallbacks *a,
                                                           VkInstance *out)
{
    VkLayerInstanceCreateInfo *link = (VkLayerInstanceCreateInfo *)ci->pNext;
    while (link && !(link->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO &&
                     link->function == VK_LAYER_LINK_INFO))
        link = (VkLayerInstanceCreateInfo *)link->pNext;
    if (!link)
        return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)gipa(VK_NULL_HANDLE, "vkCreateInstance");
    if (!create) {
        fprintf(stderr, TAG "NULL-instance lookup of vkCreateInstance returned NULL\n");
        return VK_ERROR_INITIALIZATION_FAILED;
    }
    VkResult r = create(ci, a, out);
    if (r == VK_SUCCESS) {
        next_gipa = gipa;
        next_destroy_instance = (PFN_vkDestroyInstance)gipa(*out, "vkDestroyInstance");
    }
    return r;
}

static VKAPI_ATTR void VKAPI_CALL above_DestroyInstance(VkInstance inst,
                                                        const VkAllocationCallbacks *a)
{
    if (next_destroy_instance)
        next_destroy_instance(inst, a);
}

/* Device-level commands a capture layer wraps and may resolve with a NULL instance. */
static const char *const NULL_LOOKUPS[] = {
    "vkGetDeviceProcAddr", "vkDestroyDevice",  "vkAllocateMemory", "vkMapMemory",
    "vkCreateBuffer",      "vkBindBufferMemory", "vkCmdCopyBuffer", "vkQueueSubmit",
};

static VKAPI_ATTR VkResult VKAPI_CALL above_CreateDevice(VkPhysicalDevice pd,
                                                         const VkDeviceCreateInfo *ci,
                                                         const VkAllocationCallbacks *a,
                                                         VkDevice *out)
{
    VkLayerDeviceCreateInfo *link = (VkLayerDeviceCreateInfo *)ci->pNext;
    while (link && !(link->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO &&
                     link->function == VK_LAYER_LINK_INFO))
        link = (VkLayerDeviceCreateInfo *)link->pNext;
    if (!link)
        return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    PFN_vkGetDeviceProcAddr gdpa = link->u.pLayerInfo->pfnNextGetDeviceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    int missing = 0;
    for (size_t i = 0; i < sizeof NULL_LOOKUPS / sizeof NULL_LOOKUPS[0]; i++)
        if (!gipa(VK_NULL_HANDLE, NULL_LOOKUPS[i])) {
            fprintf(stderr, TAG "NULL-instance lookup of %s returned NULL\n", NULL_LOOKUPS[i]);
            missing++;
        }
    /* RenderDoc's own lookup, then a call through whatever it returned. */
    PFN_vkCreateDevice create = (PFN_vkCreateDevice)gipa(VK_NULL_HANDLE, "vkCreateDevice");
    if (!create) {
        fprintf(stderr, TAG "NULL-instance lookup of vkCreateDevice returned NULL\n");
        return VK_ERROR_INITIALIZATION_FAILED;
    }
    if (missing)
        return VK_ERROR_INITIALIZATION_FAILED;
    VkResult r = create(pd, ci, a, out);
    if (r != VK_SUCCESS)
        return r;
    for (int i = 0; i < MAX_DEVICES; i++)
        if (!devices[i].key) {
            devices[i].key = key_of(*out);
            devices[i].gdpa = gdpa;
            break;
        }
    fprintf(stderr, TAG "vkCreateDevice through vkGetInstanceProcAddr(NULL): ok\n");
    return VK_SUCCESS;
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL above_GetDeviceProcAddr(VkDevice d,
                                                                        const char *name)
{
    if (!strcmp(name, "vkGetDeviceProcAddr"))
        return (PFN_vkVoidFunction)above_GetDeviceProcAddr;
    PFN_vkGetDeviceProcAddr g = device_gdpa(d);
    return g ? g(d, name) : NULL;
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL above_GetInstanceProcAddr(VkInstance inst,
                                                                          const char *name)
{
    if (!strcmp(name, "vkGetInstanceProcAddr"))
        return (PFN_vkVoidFunction)above_GetInstanceProcAddr;
    if (!strcmp(name, "vkCreateInstance"))
        return (PFN_vkVoidFunction)above_CreateInstance;
    if (!strcmp(name, "vkDestroyInstance"))
        return (PFN_vkVoidFunction)above_DestroyInstance;
    if (!strcmp(name, "vkCreateDevice"))
        return (PFN_vkVoidFunction)above_CreateDevice;
    if (!strcmp(name, "vkGetDeviceProcAddr"))
        return (PFN_vkVoidFunction)above_GetDeviceProcAddr;
    return next_gipa ? next_gipa(inst, name) : NULL;
}

EXPORT VKAPI_ATTR VkResult VKAPI_CALL
vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *v)
{
    if (!v || v->sType != LAYER_NEGOTIATE_INTERFACE_STRUCT)
        return VK_ERROR_INITIALIZATION_FAILED;
    if (v->loaderLayerInterfaceVersion >= 2) {
        v->loaderLayerInterfaceVersion = 2;
        v->pfnGetInstanceProcAddr = above_GetInstanceProcAddr;
        v->pfnGetDeviceProcAddr = above_GetDeviceProcAddr;
        v->pfnGetPhysicalDeviceProcAddr = NULL;
    }
    return VK_SUCCESS;
}
