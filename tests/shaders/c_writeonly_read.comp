#version 450
// tests/c/c_writeonly_download.c `read` (issue 24, the planted fault): the same result, but the
// code really loads `o` before it stores (`o[i] & 0u`: the value does not depend on it, the load
// is there; glslang -V does not fold it). By instruction `o` is read-write, so the dispatch reads
// the fresh device buffer's bytes from before anything wrote them, and the pair stays refused.
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer In { uint d[]; };
layout(std430, set = 0, binding = 1) buffer Out { uint o[]; };
layout(push_constant) uniform Push { uint iter; };

void main() {
    uint i = gl_GlobalInvocationID.x;
    o[i] = (o[i] & 0u) + d[i] * 2u + 1u + iter;
}
