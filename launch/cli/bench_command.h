// `ssd bench`: a prompt file through AR and SD with several drafters and draft lengths, on one
// loaded target in one process, so every figure in the table was measured in the same run. The
// AR run of each prompt is the baseline; under greedy decoding every SD output is also checked
// to equal the AR output token for token (a mismatch fails the command).
// `--workloads DIR` runs a directory of prompt files instead, one per category (perf/workloads):
// one table per category, a summary over all of them and a category-by-configuration matrix
// (bench_workloads.h, bench_table.h).
#pragma once

namespace ssd {

int run_bench_command(int argc, const char* const* argv);

}  // namespace ssd
