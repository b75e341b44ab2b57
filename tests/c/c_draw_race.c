/* (issue 44) c_draw_race upload|readback|safe RENDER [ITERS]: c_draw's loop with one hazard
 * each — legal programs whose output changes if echo aliases the pair the hazard touches, so echo
 * must refuse that pair (and may apply the others) — and their twin without one.
 *
 * `upload`: the host prepares the next iteration's vertices early. Iteration i: submission A
 * copies every staging buffer into its device buffer (the host waits for it); submission B waits
 * on a timeline semaphore the host signals, then draws from the device vertex buffer and reads
 * the results back. While B waits, the host writes iteration i+1's vertices into the vertex
 * staging buffer — legal, B does not read it — and only then signals the semaphore. With the
 * vertex staging and device buffers sharing memory, B would draw i+1's vertices.
 *
 * `readback`: the host looks at the readback buffer early. Submission B1 uploads and draws (the
 * vertex shader writes the device output buffer); submission B2 waits on the semaphore, then
 * copies the output into the readback buffer. The host waits for B1's fence and reads the
 * readback buffer before signalling — it still holds the previous iteration's output (or the
 * host's own fill before the first), legally: B2 has not run. With the output and readback
 * buffers sharing memory, that early read would see this iteration's output.
 *
 * `safe`: `upload`'s submissions, but the host writes each iteration's vertices before A and
 * reads nothing early: every pair is safe. Its plan, forced onto the other two modes (the same
 * buffers: the same call sites), shows that their refusals matter (tests/tests/graphics.rs).
 *
 * RENDER: `pass` or `dynamic`, as in c_draw (the draw is vkCmdDrawIndexed). Prints c_draw's
 * three checksums (the same in all three modes) and the early read's (`readback`; otherwise the
 * checksum of nothing).
 *
 * gate-args: upload pass 3
 * gate-args: readback dynamic 3
 * gate-args: safe dynamic 3
 */
#include "gfx.h"

static void signal_value(const struct gpu *g, VkSemaphore sem, uint64_t value)
{
    VkSemaphoreSignalInfo si = {
        .sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO,
        .semaphore = sem,
        .value = value,
    };
    CHECK(vkSignalSemaphore(g->dev, &si));
}

int main(int argc, char **argv)
{
    int upload = argc > 2 && strcmp(argv[1], "upload") == 0;
    int readback = argc > 2 && strcmp(argv[1], "readback") == 0;
    int safe = argc > 2 && strcmp(argv[1], "safe") == 0;
    if (!upload && !readback && !safe) {
        fprintf(stderr, "usage: c_draw_race upload|readback|safe pass|dynamic [ITERS]\n");
        return 1;
    }
    enum render_kind render = parse_render(argv[2]);
    uint32_t iters = argc > 3 ? parse_iters(argv[3]) : 3;
    VkInstance inst = create_instance(VK_API_VERSION_1_3, NULL, 0, NULL, 0, NULL);
    struct gfx x;
    gfx_create(&x, inst, render, DRAW_INDEXED, 1);
    struct cmds c = cmds_create(&x.g, 2);
    VkFence fence2;
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    CHECK(vkCreateFence(x.g.dev, &fci, NULL, &fence2));
    VkSemaphoreTypeCreateInfo stci = {
        .sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
        .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
    };
    VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &stci};
    VkSemaphore sem;
    CHECK(vkCreateSemaphore(x.g.dev, &sci, NULL, &sem));

    struct gfx_sums sums = {FNV_OFFSET, FNV_OFFSET, FNV_OFFSET};
    uint64_t early = FNV_OFFSET;
    if (upload)
        gfx_write_inputs(&x, 0, IN_VTX);
    if (readback)
        for (uint32_t k = 0; k < GFX_OUT_BYTES / 4; k++)
            ((uint32_t *)x.m_out)[k] = 0xa5a5a5a5u ^ k;
    for (uint32_t it = 0; it < iters; it++) {
        iteration_mark(it);
        if (!readback) {
            /* `upload` wrote this iteration's vertices early, during the previous one. */
            gfx_write_inputs(&x, it, upload ? IN_ALL & ~IN_VTX : IN_ALL);
            cmd_begin(c.cmd[0]);
            gfx_record(&x, c.cmd[0], it, GFX_UPLOAD);
            gfx_submit(&x.g, c.cmd[0], c.fence, VK_NULL_HANDLE, 0);
            gfx_wait(&x.g, c.fence);
            cmd_begin(c.cmd[1]);
            gfx_record(&x, c.cmd[1], it, GFX_RENDER | GFX_READ_IMAGE | GFX_READ_OUT);
            gfx_submit(&x.g, c.cmd[1], fence2, sem, it + 1);
            if (upload)
                gfx_write_inputs(&x, it + 1, IN_VTX); /* B is pending: it waits for the signal */
            signal_value(&x.g, sem, it + 1);
            gfx_wait(&x.g, fence2);
        } else {
            gfx_write_inputs(&x, it, IN_ALL);
            cmd_begin(c.cmd[0]);
            gfx_record(&x, c.cmd[0], it, GFX_UPLOAD | GFX_RENDER | GFX_READ_IMAGE);
            gfx_submit(&x.g, c.cmd[0], c.fence, VK_NULL_HANDLE, 0);
            cmd_begin(c.cmd[1]);
            gfx_record(&x, c.cmd[1], it, GFX_READ_OUT);
            gfx_submit(&x.g, c.cmd[1], fence2, sem, it + 1);
            gfx_wait(&x.g, c.fence);
            early = fnv1a(early, x.m_out, GFX_OUT_BYTES); /* B2 is pending: the old output */
            signal_value(&x.g, sem, it + 1);
            gfx_wait(&x.g, fence2);
        }
        gfx_fold(&x, &sums);
    }
    printf("iterations %u\nreadback %016llx\nimage %016llx\nhits %016llx\n", iters,
           (unsigned long long)sums.out, (unsigned long long)sums.image,
           (unsigned long long)sums.hits);
    printf("early %016llx\n", (unsigned long long)early);
    vkDestroySemaphore(x.g.dev, sem, NULL);
    vkDestroyFence(x.g.dev, fence2, NULL);
    cmds_destroy(&x.g, &c);
    gfx_destroy(&x);
    vkDestroyInstance(inst, NULL);
    return 0;
}
