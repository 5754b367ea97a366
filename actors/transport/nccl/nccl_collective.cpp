// NCCL collectives for the TP group (see nccl_collective.h).
#include "actors/transport/nccl/nccl_collective.h"

#include <fmt/format.h>

#include "actors/transport/nccl/nccl_bootstrap.h"
#include "actors/transport/nccl/nccl_check.h"
#include "kernels/common/exchange_math.h"
#include "runtime/core/error.h"

namespace ssd {

void sum_in_rank_order(const float* gathered, int ranks, int64_t count, float* out) {
  if (ranks <= 0) return;
  for (int64_t i = 0; i < count; ++i)
    out[i] = kernels::hd::rank_order_sum(gathered, ranks, count, i);
}

bool is_device_pointer(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

NcclCollective::NcclCollective(const MpiComm& group, NcclCollectiveOptions options)
    : opt_(std::move(options)), rank_(group.rank()), size_(group.size()) {
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  SSD_CUDA_CHECK(cudaGetDevice(&device_));
  const std::vector<ncclUniqueId> ids = broadcast_unique_ids(group, 0, 1);
  comm_ = NcclComm::start(ids[0], size_, rank_, WaitSubject{world_rank, -1, opt_.name, {}});
  comm_.wait_ready(opt_.timeout);
}

// The communicator's device current on the calling thread: the TP collective is called from a
// rank's main thread and from its compute thread, and the current device is per thread.
void NcclCollective::use_device() const { SSD_CUDA_CHECK(cudaSetDevice(device_)); }

cudaStream_t NcclCollective::host_stream() {
  // Operations of one communicator must not overlap: a host-path call follows whatever the
  // caller's stream still runs of the stream operations (a forward whose logits stayed on the
  // device), without a host wait.
  cudaStream_t s = comm_.stream();
  if (external_) {
    if (!external_done_)
      SSD_CUDA_CHECK(cudaEventCreateWithFlags(&external_done_, cudaEventDisableTiming));
    SSD_CUDA_CHECK(cudaEventRecord(external_done_, external_));
    SSD_CUDA_CHECK(cudaStreamWaitEvent(s, external_done_, 0));
    external_ = nullptr;
  }
  return s;
}

NcclCollective::~NcclCollective() {
  (void)cudaSetDevice(device_);
  if (external_done_) cudaEventDestroy(external_done_);
  for (void* p : scratch_)
    if (p) cudaFree(p);
}

void* NcclCollective::scratch(int slot, size_t bytes) {
  if (scratch_bytes_[slot] < bytes) {
    if (scratch_[slot]) SSD_CUDA_CHECK(cudaFree(scratch_[slot]));
    scratch_[slot] = nullptr;
    SSD_CUDA_CHECK(cudaMalloc(&scratch_[slot], bytes));
    scratch_bytes_[slot] = bytes;
  }
  return scratch_[slot];
}

void NcclCollective::enqueued(const std::string& what) {
  // A non-blocking communicator may still be enqueueing when the call returns (ncclInProgress);
  // nothing else may go on the stream until it has, or it would run before the collective.
  comm_.wait_enqueued(what + " to be enqueued", opt_.timeout);
}

void NcclCollective::wait(const std::string& what) { comm_.wait_stream(what, opt_.timeout); }

// A device-to-host copy into pageable memory returns only once it is complete, so it must never
// be the first thing to wait on a collective: a peer dead mid-collective would block the host
// inside the copy, before the deadline-polled wait could abort NCCL with its message. Every
// host path therefore calls wait() (which polls the stream under the watchdog) first; the
// stream is then idle and this copy cannot block on a peer.
void NcclCollective::copy_to_host(void* dst, const void* src, size_t bytes, cudaStream_t s) {
  SSD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
  SSD_CUDA_CHECK(cudaStreamSynchronize(s));
}

void NcclCollective::allreduce_sum(float* data, int64_t count) {
  use_device();
  if (count <= 0) return;
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  const bool on_device = is_device_pointer(data);
  cudaStream_t s = host_stream();
  const std::string what = fmt::format("allreduce of {} floats", count);
  if (opt_.order == ReduceOrder::kNccl) {
    float* buf = on_device ? data : static_cast<float*>(scratch(0, bytes));
    if (!on_device)
      SSD_CUDA_CHECK(cudaMemcpyAsync(buf, data, bytes, cudaMemcpyHostToDevice, s));
    SSD_NCCL_CHECK(ncclAllReduce(buf, buf, static_cast<size_t>(count), ncclFloat, ncclSum,
                                 comm_.get(), s));
    enqueued(what);
    wait(what);  // under the deadline first: see copy_to_host
    if (!on_device) copy_to_host(data, buf, bytes, s);
    return;
  }
  // Rank order: gather every contribution, add on the host in rank order.
  float* in = on_device ? data : static_cast<float*>(scratch(0, bytes));
  float* all = static_cast<float*>(scratch(1, bytes * static_cast<size_t>(size_)));
  if (!on_device) SSD_CUDA_CHECK(cudaMemcpyAsync(in, data, bytes, cudaMemcpyHostToDevice, s));
  SSD_NCCL_CHECK(ncclAllGather(in, all, static_cast<size_t>(count), ncclFloat, comm_.get(), s));
  enqueued(what);
  wait(what);  // under the deadline first: see copy_to_host
  host_gather_.resize(static_cast<size_t>(count) * static_cast<size_t>(size_));
  copy_to_host(host_gather_.data(), all, bytes * static_cast<size_t>(size_), s);
  if (on_device) {
    std::vector<float> sum(static_cast<size_t>(count));
    sum_in_rank_order(host_gather_.data(), size_, count, sum.data());
    SSD_CUDA_CHECK(cudaMemcpy(data, sum.data(), bytes, cudaMemcpyHostToDevice));
  } else {
    sum_in_rank_order(host_gather_.data(), size_, count, data);
  }
}

void NcclCollective::allgatherv(const float* in, const int64_t* counts, float* out) {
  use_device();
  int64_t total = 0;
  for (int r = 0; r < size_; ++r) total += counts[r];
  if (total == 0) return;
  const bool in_dev = is_device_pointer(in), out_dev = is_device_pointer(out);
  cudaStream_t s = host_stream();
  const size_t mine = static_cast<size_t>(counts[rank_]) * sizeof(float);
  const float* src = in;
  if (!in_dev && mine > 0) {
    src = static_cast<const float*>(scratch(0, mine));
    SSD_CUDA_CHECK(cudaMemcpyAsync(const_cast<float*>(src), in, mine,
                                        cudaMemcpyHostToDevice, s));
  }
  float* dst = out_dev ? out : static_cast<float*>(scratch(1, total * sizeof(float)));
  enqueue_allgatherv(src, counts, dst, s);
  const std::string what = fmt::format("allgatherv of {} floats", total);
  wait(what);  // under the deadline first: see copy_to_host
  if (!out_dev) copy_to_host(out, dst, static_cast<size_t>(total) * sizeof(float), s);
}

void NcclCollective::broadcast(void* data, int64_t bytes, int root) {
  broadcast_within(data, bytes, root, opt_.timeout);
}

void NcclCollective::broadcast_idle(void* data, int64_t bytes, int root) {
  broadcast_within(data, bytes, root, rank_ == root ? opt_.timeout : kNoDeadline);
}

void NcclCollective::broadcast_within(void* data, int64_t bytes, int root,
                                      std::chrono::milliseconds timeout) {
  use_device();
  SSD_CHECK(root >= 0 && root < size_, "NCCL broadcast from rank {} of a group of {}", root,
            size_);
  if (bytes <= 0) return;
  const bool on_device = is_device_pointer(data);
  cudaStream_t s = host_stream();
  void* buf = on_device ? data : scratch(0, static_cast<size_t>(bytes));
  if (!on_device && rank_ == root)
    SSD_CUDA_CHECK(cudaMemcpyAsync(buf, data, bytes, cudaMemcpyHostToDevice, s));
  SSD_NCCL_CHECK(ncclBroadcast(buf, buf, static_cast<size_t>(bytes), ncclUint8, root,
                               comm_.get(), s));
  const std::string what = fmt::format("broadcast of {} bytes from group rank {}", bytes, root);
  enqueued(what);
  comm_.wait_stream(what, timeout);  // under the deadline first: see copy_to_host
  if (!on_device && rank_ != root) copy_to_host(data, buf, static_cast<size_t>(bytes), s);
}

void NcclCollective::enqueue_allgatherv(const float* in, const int64_t* counts, float* out,
                                        cudaStream_t s) {
  int64_t total = 0;
  SSD_NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < size_; ++r) {
    if (counts[r] > 0)
      SSD_NCCL_CHECK(ncclBroadcast(r == rank_ ? in : out + total, out + total,
                                   static_cast<size_t>(counts[r]), ncclFloat, r, comm_.get(), s));
    total += counts[r];
  }
  SSD_NCCL_CHECK(ncclGroupEnd());
  enqueued(fmt::format("allgatherv of {} floats", total));
}

// --- StreamCollective: device memory, the caller's stream, no wait ---

void NcclCollective::allgather(const float* in, float* out, int64_t count, void* stream) {
  use_device();
  if (count <= 0) return;
  external_ = static_cast<cudaStream_t>(stream);
  SSD_NCCL_CHECK(ncclAllGather(in, out, static_cast<size_t>(count), ncclFloat, comm_.get(),
                               static_cast<cudaStream_t>(stream)));
  enqueued(fmt::format("allgather of {} floats", count));
}

void NcclCollective::allgatherv(const float* in, const int64_t* counts, float* out,
                                void* stream) {
  use_device();
  int64_t total = 0;
  for (int r = 0; r < size_; ++r) total += counts[r];
  if (total == 0) return;
  external_ = static_cast<cudaStream_t>(stream);
  enqueue_allgatherv(in, counts, out, external_);
}

void NcclCollective::allreduce(float* data, int64_t count, void* stream) {
  use_device();
  if (count <= 0) return;
  external_ = static_cast<cudaStream_t>(stream);
  SSD_NCCL_CHECK(ncclAllReduce(data, data, static_cast<size_t>(count), ncclFloat, ncclSum,
                               comm_.get(), static_cast<cudaStream_t>(stream)));
  enqueued(fmt::format("allreduce of {} floats", count));
}

void NcclCollective::wait(void* stream, const std::string& what) {
  use_device();
  comm_.wait_stream(what, opt_.timeout, static_cast<cudaStream_t>(stream));
}

}  // namespace ssd
