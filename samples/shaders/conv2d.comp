#version 450
// 5x5 convolution of a single-channel w x h image, clamp-to-edge borders.
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, binding = 0) readonly buffer In { float src[]; };
layout(std430, binding = 1) writeonly buffer Out { float dst[]; };
layout(push_constant) uniform P { uint w; uint h; } p;

// A sharpened 5x5 Gaussian (weights sum to 1).
const float K[25] = float[25](
    -0.01, -0.02, -0.03, -0.02, -0.01,
    -0.02,  0.04,  0.08,  0.04, -0.02,
    -0.03,  0.08,  0.52,  0.08, -0.03,
    -0.02,  0.04,  0.08,  0.04, -0.02,
    -0.01, -0.02, -0.03, -0.02, -0.01);

void main() {
    uint x = gl_GlobalInvocationID.x;
    uint y = gl_GlobalInvocationID.y;
    if (x >= p.w || y >= p.h) return;
    float acc = 0.0;
    for (int dy = -2; dy <= 2; ++dy) {
        uint yy = uint(clamp(int(y) + dy, 0, int(p.h) - 1));
        for (int dx = -2; dx <= 2; ++dx) {
            uint xx = uint(clamp(int(x) + dx, 0, int(p.w) - 1));
            acc += K[(dy + 2) * 5 + (dx + 2)] * src[yy * p.w + xx];
        }
    }
    dst[y * p.w + x] = acc;
}
