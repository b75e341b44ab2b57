// The C corpus's graphics programs (tests/c/c_draw.c, c_draw_race.c): a flat integer colour into
// an R8G8B8A8_UINT attachment (exact), and a count of fragments per colour class in a
// host-visible storage buffer the host reads through its mapping (atomic adds: order-free).
#version 450

layout(location = 0) flat in uint color;
layout(location = 0) out uvec4 frag;
layout(set = 0, binding = 3) buffer H { uint hits[]; } h; // 4 KiB, host-visible

void main()
{
    frag = uvec4(color & 255u, (color >> 8) & 255u, (color >> 16) & 255u, 255u);
    atomicAdd(h.hits[color & 1023u], 1u);
}
