// Rank-ordered collectives over MPI (see mpi_collective.h).
#include "actors/transport/mpi_collective.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "actors/transport/mpi_check.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

// kAuto's switch point, in floats (see the header).
constexpr int64_t kAllgatherMaxCount = 4096;

int as_mpi_count(int64_t n, const char* what) {
  SSD_CHECK(n >= 0 && n <= INT_MAX, "{} of {} elements does not fit one MPI call", what, n);
  return static_cast<int>(n);
}

}  // namespace

MpiCollective::MpiCollective(const MpiComm& comm, AllreduceAlgo algo)
    : comm_(MpiComm::dup(comm.get())), rank_(comm_.rank()), size_(comm_.size()), algo_(algo),
      counts_(static_cast<size_t>(size_)), displs_(static_cast<size_t>(size_)),
      recv_counts_(static_cast<size_t>(size_)), recv_displs_(static_cast<size_t>(size_)) {}

void MpiCollective::allreduce_sum(float* data, int64_t count) {
  if (size_ == 1 || count == 0) return;
  const bool gather = algo_ == AllreduceAlgo::kAllgather ||
                      (algo_ == AllreduceAlgo::kAuto && count <= kAllgatherMaxCount);
  if (gather) allreduce_allgather(data, count);
  else allreduce_reduce_scatter(data, count);
}

void MpiCollective::allreduce_allgather(float* data, int64_t count) {
  const int n = as_mpi_count(count, "allreduce_sum");
  as_mpi_count(count * size_, "allreduce_sum (gathered)");
  scratch_.resize(static_cast<size_t>(count * size_));  // [size, count]
  SSD_MPI_CHECK(MPI_Allgather(data, n, MPI_FLOAT, scratch_.data(), n, MPI_FLOAT, comm_.get()));
  // data = ((r0 + r1) + r2) + ...: the same order, hence the same bits, on every rank.
  std::memcpy(data, scratch_.data(), static_cast<size_t>(count) * sizeof(float));
  for (int r = 1; r < size_; ++r) {
    const float* part = scratch_.data() + static_cast<size_t>(r) * count;
    for (int64_t i = 0; i < count; ++i) data[i] += part[i];
  }
}

void MpiCollective::allreduce_reduce_scatter(float* data, int64_t count) {
  as_mpi_count(count, "allreduce_sum");
  // Chunk c = [c * chunk, min(count, (c + 1) * chunk)) belongs to rank c.
  const int64_t chunk = (count + size_ - 1) / size_;
  auto chunk_len = [&](int c) {
    const int64_t lo = std::min<int64_t>(count, c * chunk);
    return static_cast<int>(std::min<int64_t>(count, lo + chunk) - lo);
  };
  const int mine = chunk_len(rank_);
  // Every rank's copy of my chunk: scratch_ [size, mine].
  scratch_.resize(static_cast<size_t>(chunk * size_));
  std::vector<int>& send_counts = counts_;
  std::vector<int>& send_displs = displs_;
  std::vector<int>& recv_counts = recv_counts_;
  std::vector<int>& recv_displs = recv_displs_;
  for (int c = 0; c < size_; ++c) {
    send_counts[c] = chunk_len(c);
    send_displs[c] = static_cast<int>(std::min<int64_t>(count, c * chunk));
    recv_counts[c] = mine;
    recv_displs[c] = c * mine;
  }
  SSD_MPI_CHECK(MPI_Alltoallv(data, send_counts.data(), send_displs.data(), MPI_FLOAT,
                              scratch_.data(), recv_counts.data(), recv_displs.data(), MPI_FLOAT,
                              comm_.get()));
  float* out = data + send_displs[rank_];
  std::memcpy(out, scratch_.data(), static_cast<size_t>(mine) * sizeof(float));
  for (int r = 1; r < size_; ++r) {
    const float* part = scratch_.data() + static_cast<size_t>(r) * mine;
    for (int i = 0; i < mine; ++i) out[i] += part[i];
  }
  SSD_MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, data, send_counts.data(),
                               send_displs.data(), MPI_FLOAT, comm_.get()));
}

void MpiCollective::allgatherv(const float* in, const int64_t* counts, float* out) {
  int64_t at = 0;
  for (int r = 0; r < size_; ++r) {
    counts_[r] = as_mpi_count(counts[r], "allgatherv part");
    displs_[r] = as_mpi_count(at, "allgatherv offset");
    at += counts[r];
  }
  as_mpi_count(at, "allgatherv total");
  SSD_MPI_CHECK(MPI_Allgatherv(in, counts_[rank_], MPI_FLOAT, out, counts_.data(), displs_.data(),
                               MPI_FLOAT, comm_.get()));
}

void MpiCollective::broadcast(void* data, int64_t bytes, int root) {
  SSD_CHECK(root >= 0 && root < size_, "broadcast root {} is outside 0..{}", root, size_ - 1);
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {  // MPI counts are int: 1 GiB pieces
    const int n = static_cast<int>(std::min<int64_t>(bytes, int64_t{1} << 30));
    SSD_MPI_CHECK(MPI_Bcast(p, n, MPI_BYTE, root, comm_.get()));
    p += n;
    bytes -= n;
  }
}

}  // namespace ssd
