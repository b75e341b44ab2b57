#version 450
// tests/c/c_writeonly_download.c `write` (issue 24): o[i] = d[i] * 2 + 1 + iter, with *no*
// `readonly`/`writeonly` on either binding, as generated code and most GLSL are written. The code
// only stores to `o`: by instruction it is a write, by decorations it would be read-write.
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer In { uint d[]; };
layout(std430, set = 0, binding = 1) buffer Out { uint o[]; };
layout(push_constant) uniform Push { uint iter; };

void main() {
    uint i = gl_GlobalInvocationID.x;
    o[i] = d[i] * 2u + 1u + iter;
}
