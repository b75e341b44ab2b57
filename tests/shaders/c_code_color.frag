#version 450
// c_code_bound (issue 53): the fragment shader a library link names in its own pStages.
layout(location = 0) out vec4 c;
void main() { c = vec4(1.0); }
