#version 450
// The C corpus (tests/c, issue 11): o[i] = d[i] * 2 + 1 + iter, on uint storage buffers.
// Compiled for a Vulkan 1.0 target (SPIR-V 1.0): c_api10 runs it on an apiVersion 1.0 instance.
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer In { uint d[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { uint o[]; };
layout(push_constant) uniform Push { uint iter; };

void main() {
    uint i = gl_GlobalInvocationID.x;
    o[i] = d[i] * 2u + 1u + iter;
}
