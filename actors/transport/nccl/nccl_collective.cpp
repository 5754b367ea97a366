// NCCL collectives for the TP group (see nccl_collective.h).
#include "actors/transport/nccl/nccl_collective.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>

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

std::vector<StagedRound> staged_rounds(const int64_t* counts, int ranks, int64_t step) {
  SSD_ASSERT(step > 0);
  int64_t most = 0;
  for (int r = 0; r < ranks; ++r) most = std::max(most, counts[r]);
  std::vector<StagedRound> rounds;
  for (int64_t at = 0; at < most; at += step) {
    StagedRound round{at, std::vector<int64_t>(static_cast<size_t>(ranks))};
    for (int r = 0; r < ranks; ++r) round.n[r] = std::clamp<int64_t>(counts[r] - at, 0, step);
    rounds.push_back(std::move(round));
  }
  return rounds;
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
  // Everything the host path needs, now: see the top of nccl_collective.h.
  SSD_CHECK(opt_.staging_bytes >= sizeof(float), "{}: NCCL staging of {} bytes is too small",
            opt_.name, opt_.staging_bytes);
  SSD_CUDA_CHECK(cudaMalloc(&stage_mine_, opt_.staging_bytes));
  SSD_CUDA_CHECK(cudaMalloc(&stage_all_, opt_.staging_bytes * static_cast<size_t>(size_)));
  SSD_CUDA_CHECK(cudaEventCreateWithFlags(&external_done_, cudaEventDisableTiming));
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
    SSD_CUDA_CHECK(cudaEventRecord(external_done_, external_));
    SSD_CUDA_CHECK(cudaStreamWaitEvent(s, external_done_, 0));
    external_ = nullptr;
  }
  return s;
}

NcclCollective::~NcclCollective() {
  (void)cudaSetDevice(device_);
  if (external_done_) cudaEventDestroy(external_done_);
  if (stage_mine_) cudaFree(stage_mine_);
  if (stage_all_) cudaFree(stage_all_);
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
  const bool on_device = is_device_pointer(data);
  cudaStream_t s = host_stream();
  const std::string what = fmt::format("allreduce of {} floats", count);
  if (opt_.order == ReduceOrder::kNccl && on_device) {
    SSD_NCCL_CHECK(ncclAllReduce(data, data, static_cast<size_t>(count), ncclFloat, ncclSum,
                                 comm_.get(), s));
    enqueued(what);
    wait(what);
    return;
  }
  const int64_t step = staged_floats();
  float* mine = static_cast<float*>(stage_mine_);
  float* all = static_cast<float*>(stage_all_);
  for (int64_t at = 0; at < count; at += step) {  // one chunk of the staging at a time
    const int64_t n = std::min(step, count - at);
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    const float* in = on_device ? data + at : mine;
    if (!on_device)
      SSD_CUDA_CHECK(cudaMemcpyAsync(mine, data + at, bytes, cudaMemcpyHostToDevice, s));
    if (opt_.order == ReduceOrder::kNccl) {  // host data: NCCL's sum in the staging
      SSD_NCCL_CHECK(ncclAllReduce(mine, mine, static_cast<size_t>(n), ncclFloat, ncclSum,
                                   comm_.get(), s));
      enqueued(what);
      wait(what);  // under the deadline first: see copy_to_host
      copy_to_host(data + at, mine, bytes, s);
      continue;
    }
    // Rank order: gather every contribution, add on the host in rank order.
    SSD_NCCL_CHECK(ncclAllGather(in, all, static_cast<size_t>(n), ncclFloat, comm_.get(), s));
    enqueued(what);
    wait(what);  // under the deadline first: see copy_to_host
    host_gather_.resize(static_cast<size_t>(n) * static_cast<size_t>(size_));
    copy_to_host(host_gather_.data(), all, bytes * static_cast<size_t>(size_), s);
    if (!on_device) {
      sum_in_rank_order(host_gather_.data(), size_, n, data + at);
      continue;
    }
    host_sum_.resize(static_cast<size_t>(n));
    sum_in_rank_order(host_gather_.data(), size_, n, host_sum_.data());
    SSD_CUDA_CHECK(cudaMemcpyAsync(data + at, host_sum_.data(), bytes, cudaMemcpyHostToDevice, s));
    SSD_CUDA_CHECK(cudaStreamSynchronize(s));  // host_sum_ is reused by the next chunk
  }
}

void NcclCollective::allgatherv(const float* in, const int64_t* counts, float* out) {
  use_device();
  int64_t total = 0;
  for (int r = 0; r < size_; ++r) total += counts[r];
  if (total == 0) return;
  const bool in_dev = is_device_pointer(in), out_dev = is_device_pointer(out);
  cudaStream_t s = host_stream();
  const std::string what = fmt::format("allgatherv of {} floats", total);
  if (in_dev && out_dev) {
    enqueue_allgatherv(in, counts, out, s);
    wait(what);
    return;
  }
  // Host data: in rounds of the staging, each rank's next piece per round.
  std::vector<int64_t> start(static_cast<size_t>(size_), 0);  // rank r's block in out
  for (int r = 1; r < size_; ++r) start[r] = start[r - 1] + counts[r - 1];
  const int64_t step = staged_floats();
  float* mine = static_cast<float*>(stage_mine_);
  float* all = static_cast<float*>(stage_all_);
  auto bytes_of = [](int64_t n) { return static_cast<size_t>(n) * sizeof(float); };
  for (const StagedRound& round : staged_rounds(counts, size_, step)) {
    const int64_t n_mine = round.n[rank_];
    const float* src = in_dev ? in + round.at : mine;
    if (!in_dev && n_mine > 0)
      SSD_CUDA_CHECK(cudaMemcpyAsync(mine, in + round.at, bytes_of(n_mine),
                                     cudaMemcpyHostToDevice, s));
    auto dst = [&](int r) { return out_dev ? out + start[r] + round.at : all + r * step; };
    SSD_NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < size_; ++r)
      if (round.n[r] > 0)
        SSD_NCCL_CHECK(ncclBroadcast(r == rank_ ? src : dst(r), dst(r),
                                     static_cast<size_t>(round.n[r]), ncclFloat, r, comm_.get(),
                                     s));
    SSD_NCCL_CHECK(ncclGroupEnd());
    enqueued(what);
    wait(what);  // under the deadline first: see copy_to_host
    if (out_dev) continue;
    for (int r = 0; r < size_; ++r)
      if (round.n[r] > 0)
        copy_to_host(out + start[r] + round.at, dst(r), bytes_of(round.n[r]), s);
  }
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
  const std::string what = fmt::format("broadcast of {} bytes from group rank {}", bytes, root);
  const auto step = static_cast<int64_t>(opt_.staging_bytes);
  for (int64_t at = 0; at < bytes; at += on_device ? bytes : step) {  // host data: in chunks
    const int64_t n = on_device ? bytes : std::min(step, bytes - at);
    auto* buf = static_cast<std::byte*>(on_device ? data : stage_mine_);
    std::byte* host = static_cast<std::byte*>(data) + at;
    if (!on_device && rank_ == root)
      SSD_CUDA_CHECK(
          cudaMemcpyAsync(buf, host, static_cast<size_t>(n), cudaMemcpyHostToDevice, s));
    SSD_NCCL_CHECK(ncclBroadcast(buf, buf, static_cast<size_t>(n), ncclUint8, root, comm_.get(),
                                 s));
    enqueued(what);
    // Under the deadline first (see copy_to_host); an idle wait only for the first chunk.
    comm_.wait_stream(what, at == 0 ? timeout : opt_.timeout);
    if (!on_device && rank_ != root) copy_to_host(host, buf, static_cast<size_t>(n), s);
  }
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
