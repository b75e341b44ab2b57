#version 450
// tests/c/c_tensors.c (issue 26): a Kompute-style algorithm over three tensors,
// out[i] = a[i] * 3 + b[i] + iter. As in Kompute's examples no binding is decorated
// readonly/writeonly: what the shader reads and writes comes from its instructions.
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer A { uint a[]; };
layout(std430, set = 0, binding = 1) buffer B { uint b[]; };
layout(std430, set = 0, binding = 2) buffer Out { uint o[]; };
layout(push_constant) uniform Push { uint iter; };

void main() {
    uint i = gl_GlobalInvocationID.x;
    o[i] = a[i] * 3u + b[i] + iter;
}
