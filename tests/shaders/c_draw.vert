// The C corpus's graphics programs (tests/c/c_draw.c, c_draw_race.c): one point per vertex.
// Vertex attributes, 16 bytes a vertex: the pixel (x, y) as R32G32_UINT, a colour and a value
// as R32_UINT each (the last vertex's value is the buffer's last 4 bytes: a driver that fetches
// 16 bytes for it reads past the buffer). Every vertex the draw reaches reads the uniform table
// and the storage input, writes one uvec4 of the storage output at its vertex index, and becomes
// a 1-pixel point at the centre of its pixel (exact on every driver: no sample position lies on
// the point's edge).
#version 450

layout(location = 0) in uvec2 pos;
layout(location = 1) in uint col;
layout(location = 2) in uint val;
layout(set = 0, binding = 0) uniform U { uvec4 tab[1024]; } u;  // 16 KiB
layout(set = 0, binding = 1) readonly buffer S { uint s[]; } s; // 64 KiB, read
layout(set = 0, binding = 2) buffer O { uvec4 o[]; } o;         // 64 KiB, written
layout(location = 0) flat out uint color;

void main()
{
    uint i = uint(gl_VertexIndex);
    uint v = val * 3u + s.s[(i * 5u) & 16383u] + u.tab[i & 1023u].x;
    o.o[i & 4095u] = uvec4(v, col, pos.x | (pos.y << 8), u.tab[i & 1023u].y);
    color = col ^ v;
    vec2 p = (vec2(pos) + 0.5) / 32.0 - 1.0; // the pixel's centre, exact in floating point
    gl_Position = vec4(p, 0.0, 1.0);
    gl_PointSize = 1.0;
}
