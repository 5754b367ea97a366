// `ssd probe-links`: measures the job's links over the transports a run would use (MPI, or NCCL
// on GPU ranks): latency and 1 MiB / 64 MiB bandwidth between the target leader and each drafter
// rank, and the TP group's all-reduce bus bandwidth (nccl-tests' busbw). Run it under the launcher
// with the layout of the run it describes: mpirun -n 3 ssd probe-links --tp 2.
#pragma once

namespace ssd {

int run_probe_links_command(int argc, const char* const* argv);

}  // namespace ssd
