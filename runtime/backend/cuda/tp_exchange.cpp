// CudaBackend (cuda_backend_impl.h): the tensor-parallel exchanges (Backend::allreduce_sum /
// gather_columns) and the watchdog wait that ends them.
// With the NCCL transport (a StreamCollective on this device) the exchanges stay on the device:
// NCCL gathers every rank's block into scratch on this backend's stream and a kernel finishes
// the exchange there (the rank-order sum, the column stitching: exchange.cu), so a TP forward,
// like any other, waits once, at its download, through NCCL's watchdog (a dead peer ends the
// job). With MPI (or a collective on another device) the defaults run: download, exchange on
// the host, upload; a replayable region may not contain that round trip.
// Compiled here against CUDA 13 (no GPU on the build machine): not yet run on a device.
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"
#include "runtime/backend/cuda/cuda_backend_impl.h"
#include "runtime/core/error.h"

namespace ssd::cuda {

StreamCollective* CudaBackend::device_exchange(Collective& comm) const {
  StreamCollective* sc = stream_collective(comm);
  return sc && sc->device() == opts_.device ? sc : nullptr;
}

void CudaBackend::wait_exchanges() {
  if (!exchanging_) return;
  SSD_CUDA_CHECK(cudaSetDevice(opts_.device));
  StreamCollective* sc = std::exchange(exchanging_, nullptr);
  sc->wait(stream_, "a tensor-parallel forward's exchanges");
}

void CudaBackend::allreduce_sum(Collective& comm, float* y, int64_t count, float* scratch) {
  StreamCollective* sc = device_exchange(comm);
  if (!sc) {
    SSD_CHECK(region_ == Region::None || region_ == Region::Eager,
              "cuda backend: a host exchange inside a replayable region");
    Backend::allreduce_sum(comm, y, count, scratch);
    return;
  }
  enter();
  SSD_CHECK(is_device_pointer(y) && is_device_pointer(scratch),
            "cuda backend: allreduce_sum takes device memory");
  if (live() && count > 0) {
    if (sc->rank_order_sums()) {  // collective.h's order: gather, then add rank after rank
      sc->allgather(y, scratch, count, stream_);
      launch_rank_order_sum(scratch, comm.size(), count, y, stream_);
    } else {
      sc->allreduce(y, count, stream_);
    }
  }
  exchanging_ = sc;  // also when a replay's graph holds the exchange
  staging_->finish();
}

void CudaBackend::gather_columns(Collective& comm, const float* local, int64_t rows,
                                 const std::vector<int64_t>& off, float* out, float* scratch) {
  StreamCollective* sc = device_exchange(comm);
  if (!sc) {
    SSD_CHECK(region_ == Region::None || region_ == Region::Eager,
              "cuda backend: a host exchange inside a replayable region");
    Backend::gather_columns(comm, local, rows, off, out, scratch);
    return;
  }
  enter();
  const int ranks = comm.size();
  SSD_ASSERT(static_cast<int>(off.size()) == ranks + 1);
  SSD_CHECK(is_device_pointer(local) && is_device_pointer(out) && is_device_pointer(scratch),
            "cuda backend: gather_columns takes device memory");
  counts_.resize(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) counts_[r] = rows * (off[r + 1] - off[r]);
  const int64_t* doff = staging_->in(off.data(), off.size());  // [ranks + 1]
  if (live() && rows * off.back() > 0) {
    sc->allgatherv(local, counts_.data(), scratch, stream_);  // rank-major blocks
    launch_stitch_columns(scratch, doff, ranks, rows, off.back(), out, stream_);
  }
  exchanging_ = sc;
  staging_->finish();
}

}  // namespace ssd::cuda
