#version 450
// c_code_bound (issue 53): a vertex shader that only reads D (the hazard-free control).
layout(set = 0, binding = 0) readonly buffer D { uint d[]; };
void main() {
    uint v = uint(gl_VertexIndex);
    uint s = 0u;
    for (uint k = 0u; k < 64u; k++) s += d[v * 64u + k];
    gl_Position = vec4(float(s & 1u) * 0.0, 0.0, 0.0, 1.0); gl_PointSize = 1.0;
}
