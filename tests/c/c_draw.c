/* (issue 44) c_draw RENDER DRAW [ITERS]: a renderer's upload -> draw -> readback loop, clean.
 *
 * Five inputs go through host-visible staging buffers into device-local buffers with
 * vkCmdCopyBuffer every iteration — vertices, indices, a uniform table, a storage input and the
 * indirect draw parameters — and one output comes back: the storage buffer the vertex shader
 * writes, copied into a host-visible readback buffer. Beside it the host reads the colour
 * attachment (copied into a buffer) and the fragment shader's counters (through their mapping).
 * Everything is in one submission per iteration, and the host touches the staging and readback
 * buffers only after the fence: every upload pair and the readback pair are safe to alias, and
 * echo must apply them (ITERS >= 2: each pair is copied once per iteration).
 *
 * RENDER: `pass` (vkCmdBeginRenderPass) or `dynamic` (vkCmdBeginRendering, Vulkan 1.3).
 * DRAW: `draw` (vkCmdDraw), `indexed` (vkCmdDrawIndexed), `indirect` (vkCmdDrawIndirect) or
 * `indexed-indirect` (vkCmdDrawIndexedIndirect); the non-indexed draws leave the index buffer
 * uploaded but unused. The workload and its shaders are described in gfx.h.
 * Prints the three checksums (exact integers: the same on every driver).
 *
 * gate-args: pass draw 3
 * gate-args: pass indexed-indirect 3
 * gate-args: dynamic indexed 3
 * gate-args: dynamic indirect 3
 */
#include "gfx.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: c_draw pass|dynamic draw|indexed|indirect|indexed-indirect "
                        "[ITERS]\n");
        return 1;
    }
    enum render_kind render = parse_render(argv[1]);
    enum draw_kind draw = parse_draw(argv[2]);
    uint32_t iters = argc > 3 ? parse_iters(argv[3]) : 3;
    VkInstance inst = create_instance(VK_API_VERSION_1_3, NULL, 0, NULL, 0, NULL);
    struct gfx x;
    gfx_create(&x, inst, render, draw, 0);
    struct cmds c = cmds_create(&x.g, 1);
    struct gfx_sums sums = {FNV_OFFSET, FNV_OFFSET, FNV_OFFSET};
    for (uint32_t it = 0; it < iters; it++) {
        iteration_mark(it);
        gfx_write_inputs(&x, it, IN_ALL);
        cmd_begin(c.cmd[0]);
        gfx_record(&x, c.cmd[0], it, GFX_UPLOAD | GFX_RENDER | GFX_READ_IMAGE | GFX_READ_OUT);
        gfx_submit(&x.g, c.cmd[0], c.fence, VK_NULL_HANDLE, 0);
        gfx_wait(&x.g, c.fence);
        gfx_fold(&x, &sums);
    }
    const uint32_t *o = x.m_out;
    printf("iterations %u\nvertex 200: %u %u %u %u\n", iters, o[800], o[801], o[802], o[803]);
    printf("readback %016llx\nimage %016llx\nhits %016llx\n", (unsigned long long)sums.out,
           (unsigned long long)sums.image, (unsigned long long)sums.hits);
    cmds_destroy(&x.g, &c);
    gfx_destroy(&x);
    vkDestroyInstance(inst, NULL);
    return 0;
}
