/* (f) c_validation [SPV]: c_upload 3 in a program that enables VK_LAYER_KHRONOS_validation itself
 * (VkInstanceCreateInfo::ppEnabledLayerNames) with a VK_EXT_debug_utils messenger. Each message's
 * pMessageIdName goes to stderr as "VALIDATION: <id>", and "validation messages: N" at the end
 * (stderr, so stdout stays comparable with runs that differ only in layers below). */
#include "common.h"

static unsigned messages;

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT types,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                 void *user)
{
    (void)severity;
    (void)types;
    (void)user;
    fprintf(stderr, "VALIDATION: %s\n",
            data->pMessageIdName ? data->pMessageIdName : "(no id)");
    messages++;
    return VK_FALSE;
}

int main(int argc, char **argv)
{
    const char *spv = spv_path(argc, argv, 1);
    VkDebugUtilsMessengerCreateInfoEXT mci = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_message,
    };
    const char *layers[] = {"VK_LAYER_KHRONOS_validation"};
    const char *exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    /* The messenger in pNext also covers vkCreateInstance/vkDestroyInstance. */
    VkInstance inst = create_instance(VK_API_VERSION_1_1, layers, 1, exts, 1, &mci);
    PFN_vkCreateDebugUtilsMessengerEXT create = (PFN_vkCreateDebugUtilsMessengerEXT)
        vkGetInstanceProcAddr(inst, "vkCreateDebugUtilsMessengerEXT");
    PFN_vkDestroyDebugUtilsMessengerEXT destroy = (PFN_vkDestroyDebugUtilsMessengerEXT)
        vkGetInstanceProcAddr(inst, "vkDestroyDebugUtilsMessengerEXT");
    REQUIRE(create && destroy);
    VkDebugUtilsMessengerEXT messenger;
    CHECK(create(inst, &mci, NULL, &messenger));

    upload_run(inst, spv, 3);

    destroy(inst, messenger, NULL);
    vkDestroyInstance(inst, NULL);
    fprintf(stderr, "validation messages: %u\n", messages);
    return 0;
}
