#version 450
// vkecho selftest, workload `graphics`: small triangles whose positions and colours come from
// the vertex buffer, moved and tinted by a uniform buffer entry picked per vertex and instance.
layout(location = 0) in vec2 pos;
layout(location = 1) in vec4 color;
layout(location = 2) in float weight;
layout(std140, binding = 0) uniform U { vec4 v[1024]; } u;
layout(location = 0) out vec4 v_color;

void main() {
    vec4 t = u.v[(uint(gl_VertexIndex) / 3u + uint(gl_InstanceIndex) * 97u) & 1023u];
    gl_Position = vec4(pos + t.xy * weight, 0.0, 1.0);
    v_color = vec4(color.rgb * t.z, 1.0);
}
