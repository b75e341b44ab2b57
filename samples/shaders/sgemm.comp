#version 450
// C = A * B for n x n row-major matrices, n a multiple of BLOCK.
// Shared-memory tiling with register blocking: a 16 x 16 workgroup computes one 64 x 64 block of
// C, each invocation a 4 x 4 sub-block, stepping through K in tiles of 16 staged in shared memory.
#define BLOCK 64
#define KT 16
#define R 4
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant) uniform P { uint n; } p;

shared float As[BLOCK][KT];
shared float Bs[KT][BLOCK];

void main() {
    uint tx = gl_LocalInvocationID.x;
    uint ty = gl_LocalInvocationID.y;
    uint tid = ty * 16 + tx;
    uint row0 = gl_WorkGroupID.y * BLOCK;
    uint col0 = gl_WorkGroupID.x * BLOCK;
    float acc[R][R];
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < R; ++j) acc[i][j] = 0.0;

    for (uint t = 0; t < p.n; t += KT) {
        // 256 invocations load a 64 x 16 tile of A and a 16 x 64 tile of B, 4 floats each.
        for (uint e = tid; e < BLOCK * KT; e += 256) {
            uint r = e / KT, k = e % KT;
            As[r][k] = a[(row0 + r) * p.n + t + k];
            uint kb = e / BLOCK, cb = e % BLOCK;
            Bs[kb][cb] = b[(t + kb) * p.n + col0 + cb];
        }
        barrier();
        for (uint k = 0; k < KT; ++k) {
            float av[R], bv[R];
            for (int i = 0; i < R; ++i) av[i] = As[ty * R + i][k];
            for (int j = 0; j < R; ++j) bv[j] = Bs[k][tx * R + j];
            for (int i = 0; i < R; ++i)
                for (int j = 0; j < R; ++j) acc[i][j] += av[i] * bv[j];
        }
        barrier();
    }
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < R; ++j) c[(row0 + ty * R + i) * p.n + col0 + tx * R + j] = acc[i][j];
}
