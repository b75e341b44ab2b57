#version 450
// C = A * B for n x n row-major matrices, n a multiple of TILE.
// Classic shared-memory tiling: each workgroup computes one TILE x TILE block of C.
#define TILE 16
layout(local_size_x = TILE, local_size_y = TILE) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant) uniform P { uint n; } p;

shared float As[TILE][TILE];
shared float Bs[TILE][TILE];

void main() {
    uint row = gl_GlobalInvocationID.y;
    uint col = gl_GlobalInvocationID.x;
    uint ty = gl_LocalInvocationID.y;
    uint tx = gl_LocalInvocationID.x;
    float acc = 0.0;
    for (uint t = 0; t < p.n; t += TILE) {
        As[ty][tx] = a[row * p.n + t + tx];
        Bs[ty][tx] = b[(t + ty) * p.n + col];
        barrier();
        for (uint k = 0; k < TILE; ++k) {
            acc += As[ty][k] * Bs[k][tx];
        }
        barrier();
    }
    c[row * p.n + col] = acc;
}
