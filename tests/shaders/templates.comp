#version 450
// echo-templates: d[i] = d[i] * 3 + k[i % 64], with d a storage buffer (read-write) and k a
// uniform texel buffer (R32_UINT, read).
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer D { uint d[]; };
layout(set = 0, binding = 1) uniform usamplerBuffer k;

void main() {
    uint i = gl_GlobalInvocationID.x;
    d[i] = d[i] * 3u + texelFetch(k, int(i % 64u)).x;
}
