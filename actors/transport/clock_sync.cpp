#include "actors/transport/clock_sync.h"

#include <limits>

#include "actors/transport/mpi_check.h"
#include "runtime/core/trace.h"

namespace ssd {
namespace {
constexpr int kTag = 7;  // private to this function's exchanges (the communicator is a dup)
}

std::vector<ClockOffset> estimate_clock_offsets(const MpiComm& comm, int tries) {
  const int rank = comm.rank(), size = comm.size();
  std::vector<ClockOffset> out;
  if (rank == 0) out.resize(static_cast<size_t>(size));
  for (int peer = 1; peer < size; ++peer) {
    if (rank == 0) {
      ClockOffset best;
      best.rtt_us = std::numeric_limits<double>::infinity();
      for (int i = 0; i < tries; ++i) {
        double t0 = trace::now_us(), t1 = 0;
        SSD_MPI_CHECK(MPI_Send(&t0, 1, MPI_DOUBLE, peer, kTag, comm.get()));
        SSD_MPI_CHECK(MPI_Recv(&t1, 1, MPI_DOUBLE, peer, kTag, comm.get(), MPI_STATUS_IGNORE));
        const double t2 = trace::now_us();
        if (t2 - t0 < best.rtt_us) {
          best.rtt_us = t2 - t0;
          best.offset_us = t1 - (t0 + t2) / 2;
          best.uncertainty_us = (t2 - t0) / 2;
        }
      }
      out[static_cast<size_t>(peer)] = best;
    } else if (rank == peer) {
      for (int i = 0; i < tries; ++i) {
        double t = 0;
        SSD_MPI_CHECK(MPI_Recv(&t, 1, MPI_DOUBLE, 0, kTag, comm.get(), MPI_STATUS_IGNORE));
        t = trace::now_us();
        SSD_MPI_CHECK(MPI_Send(&t, 1, MPI_DOUBLE, 0, kTag, comm.get()));
      }
    }
  }
  return out;
}

std::vector<std::string> gather_text(const MpiComm& comm, const std::string& text) {
  const int rank = comm.rank(), size = comm.size();
  int len = static_cast<int>(text.size());
  std::vector<int> lens(rank == 0 ? static_cast<size_t>(size) : 0);
  SSD_MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comm.get()));
  std::vector<int> displs(lens.size());
  int total = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    displs[i] = total;
    total += lens[i];
  }
  std::string all(static_cast<size_t>(total), '\0');
  SSD_MPI_CHECK(MPI_Gatherv(text.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                            MPI_CHAR, 0, comm.get()));
  std::vector<std::string> out;
  for (size_t i = 0; i < lens.size(); ++i)
    out.push_back(all.substr(static_cast<size_t>(displs[i]), static_cast<size_t>(lens[i])));
  return out;
}

}  // namespace ssd
