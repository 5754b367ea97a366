// ssd::Collective (runtime/parallel/collective.h) over an MPI communicator: the target's TP group
// on CPU ranks.
//
// allreduce_sum must add the ranks' contributions in rank order on every rank (bit-identical
// results everywhere, reproducible runs), which MPI_Allreduce does not promise. Two ways, both
// exact in that sense:
//   kAllgather      MPI_Allgather of every rank's whole vector, then each rank adds the T copies
//                   in rank order. One collective; moves T x count floats into every rank.
//   kReduceScatter  the vector in T chunks; MPI_Alltoall(v) sends chunk c of every rank to rank c,
//                   which adds them in rank order, then MPI_Allgatherv shares the summed chunks.
//                   Two collectives; moves ~2 x count floats per rank.
// Measured (tests/mpi/collective_bench.cpp, 2 ranks on the 2-core machine, Open MPI 4.1.4 over
// shared memory, best of 9 blocks of 200 back-to-back calls, us per call):
//   floats       576   768  1024  1152  1536  2048  3000  16384
//   allgather    1.6   1.9   4.1   4.2   4.5   5.3   6.3    143
//   reduce-sc.   2.8   3.0   3.2   3.3   3.8   8.1   9.1    122
// The steps follow Open MPI's 4 KiB shared-memory eager limit (per-rank messages of count x 4
// bytes for allgather, count x 4 / T for reduce-scatter). Over TP's sizes (576..3000) allgather
// is the faster or within 1 us, so kAuto uses it up to 4096 floats and reduce-scatter above,
// where moving T copies starts to cost. 3 and 4 ranks oversubscribe 2 cores here and measure
// the scheduler (hundreds of us, either algorithm), so they did not inform the choice.
#pragma once

#include <vector>

#include "actors/transport/mpi_world.h"
#include "runtime/parallel/collective.h"

namespace ssd {

enum class AllreduceAlgo { kAuto, kAllgather, kReduceScatter };

class MpiCollective final : public Collective {
 public:
  // Collective over comm (duplicated, so its traffic never meets other users of comm).
  explicit MpiCollective(const MpiComm& comm, AllreduceAlgo algo = AllreduceAlgo::kAuto);
  MpiCollective(const MpiCollective&) = delete;
  MpiCollective& operator=(const MpiCollective&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allreduce_sum(float* data, int64_t count) override;
  void allgatherv(const float* in, const int64_t* counts, float* out) override;
  void broadcast(void* data, int64_t bytes, int root) override;

 private:
  void allreduce_allgather(float* data, int64_t count);
  void allreduce_reduce_scatter(float* data, int64_t count);

  MpiComm comm_;
  int rank_ = 0;
  int size_ = 1;
  AllreduceAlgo algo_;
  std::vector<float> scratch_;  // [size, count] or [size, chunk]
  std::vector<int> counts_, displs_;            // [size] MPI counts and displacements
  std::vector<int> recv_counts_, recv_displs_;  // [size] (reduce-scatter's receive side)
};

}  // namespace ssd
