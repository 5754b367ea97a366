// Entry point of the ssd executable (work in progress: subcommands are being wired up).
#include <cstdio>
int main() { std::puts("ssd"); return 0; }
