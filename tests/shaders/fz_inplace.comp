#version 450
// echo-fuzzprog (issue 45): a[i] = a[i] * 5 + k, for i < n.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer A { uint a[]; };
layout(push_constant) uniform P { uint n; uint k; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n) return;
    a[i] = a[i] * 5u + p.k;
}
