// The baseline of bench/embedded_size.sh: an empty program, compiled and linked as mlp.cpp is
// (the embedded build's flags, teeny's libraries on the link line, unused sections dropped).
int main() { return 0; }
