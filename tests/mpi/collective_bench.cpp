// Measures MpiCollective::allreduce_sum with both algorithms at the sizes tensor parallelism
// needs (576 = SmolLM2-135M's model dimension, up to 3000; 16384 for contrast):
//   mpirun -n 2 build/bin/ssd_mpi_collective_bench [calls per block] [blocks]
// For each size the two algorithms run in alternating blocks of back-to-back calls (so that
// load from other processes hits both alike); a block's time is the slowest rank's, and rank 0
// prints, per algorithm, the best and the median block's mean time per call. Back-to-back calls
// give the latency floor, not a layer's cost (a layer computes between its two all-reduces).
//
// Figures measured with it, and the choice they led to: actors/transport/mpi_collective.h.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "actors/transport/mpi_collective.h"
#include "actors/transport/mpi_world.h"

int main(int argc, char** argv) {
  ssd::MpiSession session(&argc, &argv);
  const int calls = argc > 1 ? std::atoi(argv[1]) : 200;
  const int blocks = argc > 2 ? std::atoi(argv[2]) : 15;
  ssd::MpiWorld world(1);
  MPI_Comm comm = world.world().get();
  const int rank = world.layout().rank, size = world.layout().world;
  ssd::MpiCollective gather(world.world(), ssd::AllreduceAlgo::kAllgather);
  ssd::MpiCollective scatter(world.world(), ssd::AllreduceAlgo::kReduceScatter);
  ssd::MpiCollective* algos[2] = {&gather, &scatter};
  if (rank == 0)
    std::printf("ranks %d, %d blocks of %d calls\n%7s  %-26s %-26s\n", size, blocks, calls,
                "floats", "allgather best/median us", "reduce-scatter best/median us");
  for (int count : {576, 768, 1024, 1152, 1536, 2048, 3000, 16384}) {
    std::vector<float> data(static_cast<size_t>(count), 1.0f / static_cast<float>(rank + 1));
    std::vector<double> us[2];
    for (int b = 0; b < blocks; ++b) {
      for (int a = 0; a < 2; ++a) {
        for (int i = 0; i < calls / 10 + 1; ++i) algos[a]->allreduce_sum(data.data(), count);
        MPI_Barrier(comm);
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; ++i) algos[a]->allreduce_sum(data.data(), count);
        const double mine =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count() / calls;
        double slowest = 0;
        MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
        us[a].push_back(slowest);
      }
    }
    if (rank == 0) {
      std::printf("%7d ", count);
      for (auto& v : us) {
        std::sort(v.begin(), v.end());
        std::printf(" %9.2f / %-14.2f", v.front(), v[v.size() / 2]);
      }
      std::printf("\n");
    }
  }
  return 0;
}
