#version 450
// echo-fuzzprog (issue 53): the xform kernel as a vertex shader (a point per vertex): vertex v
// does elements [64v, 64v + 64) below n, dst[i] = src[i] * 3 + k + i.
layout(set = 0, binding = 0) readonly buffer Src { uint src[]; };
layout(set = 0, binding = 1) writeonly buffer Dst { uint dst[]; };
layout(push_constant) uniform P { uint n; uint k; } p;
void main() {
    uint v = uint(gl_VertexIndex);
    for (uint j = 0u; j < 64u; j++) {
        uint i = v * 64u + j;
        if (i < p.n) dst[i] = src[i] * 3u + p.k + i;
    }
    gl_Position = vec4(0.0, 0.0, 0.0, 1.0);
    gl_PointSize = 1.0;
}
