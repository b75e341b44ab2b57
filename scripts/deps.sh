#!/usr/bin/env bash
# Installs the Debian packages VK_LAYER_echo builds and tests with, if any is missing.
# Idempotent and quiet when everything is present. Needs root (or passwordless sudo) only when
# something must be installed.
#
#   libvulkan1 libvulkan-dev   the Vulkan loader (1.3.239 on bookworm) and headers
#   mesa-vulkan-drivers        lavapipe, the CPU Vulkan driver the tests run on (a UMA device)
#   vulkan-tools               vulkaninfo (a test compares its report with and without the layer)
#   vulkan-validationlayers    VK_LAYER_KHRONOS_validation (tests run it beside echo)
#   glslang-tools spirv-tools  glslangValidator and spirv-val, for the sample shaders
#   valgrind                   scripts/leaks.sh (its short run is part of the test suite)
#   binutils                   readelf: tests/tests/symbols.rs reads the layer's relocations;
#                              nm, objcopy, strip: tests/tests/library_sites.rs (issue 34)
#   g++                        tests/vma-app's vk-mem builds VMA's C++ with `cc` (issue 12);
#                              tests/tests/library_sites.rs builds a C++ library (issue 34)
#   librenderdoc               RenderDoc's capture layer (implicit, enabled only by
#                              ENABLE_VULKAN_RENDERDOC_CAPTURE=1): tests/tests/layer_above.rs runs
#                              it above echo (issue 23)
#   libvkfft-dev glslang-dev   VkFFT (header-only) and glslang as a library for tests/c/c_vkfft.c (issue 26)
#   chromium                   headless Chromium: tests/tests/show.rs opens `vkecho show`'s page in it
#                              (rendered DOM and a screenshot, issue 36)
#
# Extra packages can be added with ECHO_EXTRA_PACKAGES="valgrind binutils".
set -euo pipefail

packages=(libvulkan1 libvulkan-dev mesa-vulkan-drivers vulkan-tools vulkan-validationlayers
          glslang-tools spirv-tools valgrind binutils g++ librenderdoc libvkfft-dev glslang-dev
          chromium)
# shellcheck disable=SC2206
packages+=(${ECHO_EXTRA_PACKAGES:-})

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null; then
    echo "scripts/deps.sh: missing packages (${missing[*]}) and no apt-get on this system;" \
         "install their equivalents by hand" >&2
    exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
    sudo=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
else
    echo "scripts/deps.sh: these Debian packages are missing: ${missing[*]}" >&2
    echo "  install them as root:  apt-get install -y ${missing[*]}" >&2
    echo "  (or rerun this script as root)" >&2
    exit 1
fi

echo "scripts/deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq >&2
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
