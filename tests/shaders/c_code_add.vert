#version 450
// c_code_bound (issue 53): a vertex shader that adds 100 to every word of D (64 words per vertex).
layout(set = 0, binding = 0) buffer D { uint d[]; };
void main() {
    uint v = uint(gl_VertexIndex);
    for (uint k = 0u; k < 64u; k++) d[v * 64u + k] = d[v * 64u + k] + 100u;
    gl_Position = vec4(0.0, 0.0, 0.0, 1.0); gl_PointSize = 1.0;
}
