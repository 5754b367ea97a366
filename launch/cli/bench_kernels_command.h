// `ssd bench-kernels`: what this machine and the CPU kernels deliver, measured in one run on one
// model: read bandwidth (1 and N threads), the thread pool's hand-off, decode tok/s and its
// roofline ratio (weight bytes per token x tok/s / measured bandwidth), the verification cost
// ratio time(n tokens) / time(1 token) for n = 2, 4, 8, 16 after a realistic cached prefix, and
// prefill tok/s. Prints a table with the targets and pass/fail next to each figure, and
// writes JSON and markdown naming the model, weight type, threads, CPU flags, topology and
// commit. Exits 0 whether or not the targets are met (they are goals, not checks).
#pragma once

namespace ssd {

int run_bench_kernels_command(int argc, const char* const* argv);

}  // namespace ssd
