#version 450
// echo-fuzzprog (issue 53): the fragment shader of the draws (rendering without attachments:
// it writes nothing); a library link names it in its own pStages.
void main() {}
