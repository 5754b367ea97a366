// CudaBackend (cuda_backend_impl.h): replayable regions as CUDA graphs
// (Backend::begin_replayable; Transformer forwards, TP forwards with NCCL too).
// Per ReplayKey, the first region runs eagerly and measures the input arena it needs
// (Measure); the next one is captured as a CUDA graph (Capture) and each one after that
// replayed (Replay): the ops run only their host parts (KV bookkeeping, page tables, inputs
// written into the pinned arena), then at end_replayable the deferred KV page copies are
// enqueued, the arena uploaded in one copy, and the graph launched. A graph bakes in buffer
// addresses, so any allocate() (a buffer regrown) makes every graph stale: it is measured and
// captured again at its next uses (a capture always follows a measurement made with the same
// buffers; a region whose slots still differ from its measurement throws once and stays eager).
// Batches above invariant_max_tokens (cuBLAS) and sizes outside CudaBackendOptions::graph_sizes
// stay eager.
// Compiled here against CUDA 13 (no GPU on the build machine): not yet run on a device.
#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "runtime/backend/cuda/cuda_backend_impl.h"
#include "runtime/core/error.h"
#include "runtime/parallel/group_agree.h"

namespace ssd::cuda {

bool CudaBackend::graph_size_allowed(int64_t n) const {
  if (!opts_.graphs || n > opts_.invariant_max_tokens) return false;
  return opts_.graph_sizes.empty() || std::find(opts_.graph_sizes.begin(), opts_.graph_sizes.end(),
                                                n) != opts_.graph_sizes.end();
}

void CudaBackend::set_kv_deferred(bool on) {
  kv_.for_each([on](DeviceKv& m) { m.set_deferred(on); });
}

void CudaBackend::flush_kv() {
  kv_.for_each([](DeviceKv& m) { m.flush(); });
}

void CudaBackend::leave_region() noexcept {
  region_ = Region::None;
  step_ = nullptr;
  staging_->set_mode(Staging::Mode::Eager);
  set_kv_deferred(false);
}

void CudaBackend::begin_replayable(const ReplayKey& key) {
  SSD_CHECK(region_ == Region::None, "cuda backend: replayable regions do not nest");
  enter();
  StepGraph* found = nullptr;
  Region want = Region::Eager;
  if (graph_size_allowed(key.n)) {
    auto [it, fresh] = steps_.try_emplace(key);
    if (fresh) it->second.id = next_graph_id_++;
    found = &it->second;
    if (found->eager_only)
      want = Region::Eager;
    else if (found->captured && found->epoch == epoch_)
      want = Region::Replay;
    else if (found->arena_bytes == 0 || found->measured_epoch != epoch_)
      // Never measured, or buffers moved since: run eagerly once more, measuring, and capture
      // the next time, so a capture always follows a measurement of the same buffers.
      want = Region::Measure;
    else
      want = Region::Capture;
  }
  // A forward with collectives inside: NCCL needs a captured collective to be captured on every
  // rank of the group (and a replayed one replayed), so the group runs in the least advanced
  // state any of its ranks is in (Eager < Measure < Capture < Replay). A rank held back
  // measures again or captures again, which its state allows; the group converges in two
  // forwards.
  if (key.group) want = static_cast<Region>(agree_min(*key.group, static_cast<int>(want)));
  if (want == Region::Eager) {
    region_ = Region::Eager;
    return;
  }
  StepGraph& st = *found;
  step_ = &st;
  region_ = want;
  if (want == Region::Measure) {
    staging_->set_mode(Staging::Mode::Measure);
    return;
  }
  try {
    if (arena_capacity_ < st.arena_bytes) {  // new addresses: every graph so far is stale
      SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));
      if (arena_host_) SSD_CUDA_CHECK(cudaFreeHost(arena_host_));
      arena_host_ = nullptr;
      arena_capacity_ = 0;
      const size_t cap = std::max<size_t>(st.arena_bytes, size_t{1} << 20);
      SSD_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&arena_host_), cap));
      arena_dev_ = DeviceBuffer(cap);
      arena_capacity_ = cap;
      ++epoch_;
    }
    // The previous region's arena upload must have read the pinned bytes before they change.
    SSD_CUDA_CHECK(cudaEventSynchronize(arena_free_));
    staging_->set_mode(Staging::Mode::Record,
                       ArenaView{arena_host_, arena_dev_.get<uint8_t>(), arena_capacity_});
    set_kv_deferred(true);
    region_epoch_ = epoch_;
    if (region_ == Region::Capture) graphs_->begin_capture();
  } catch (...) {
    leave_region();
    throw;
  }
}

void CudaBackend::end_replayable() {
  SSD_CHECK(region_ != Region::None, "cuda backend: end_replayable without begin_replayable");
  if (region_ == Region::Eager) {
    leave_region();
    return;
  }
  StepGraph& st = *step_;
  const size_t used = std::max(staging_->arena_used(), Staging::kSlotAlign);
  if (region_ == Region::Measure) {
    st.arena_bytes = used;
    st.measured_epoch = epoch_;
    leave_region();
    return;
  }
  try {
    if (region_ == Region::Capture) {
      region_ = Region::Replay;  // no longer capturing, whatever end_capture does
      graphs_->end_capture(st.id);
      // An allocation inside the region moved a buffer: the graph is right for this run only.
      st.captured = epoch_ == region_epoch_;
      st.epoch = region_epoch_;
    }
    SSD_CHECK(used == st.arena_bytes,
              "cuda backend: a replayable region used {} arena bytes, its recording {}", used,
              st.arena_bytes);
    set_kv_deferred(false);
    flush_kv();
    SSD_CUDA_CHECK(
        cudaMemcpyAsync(arena_dev_.get(), arena_host_, used, cudaMemcpyHostToDevice, stream_));
    SSD_CUDA_CHECK(cudaEventRecord(arena_free_, stream_));
    graphs_->replay(st.id);
    if (opts_.sync_each_op) SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));
  } catch (...) {
    // This forward's kernels did not run (the error reaches the caller); the key stays eager
    // from now on, so a retry runs without graphs.
    st.captured = false;
    st.eager_only = true;
    try {
      set_kv_deferred(false);
      flush_kv();    // the host cache did its copy-on-write: the mirror must follow
    } catch (...) {  // the first error is the one reported
    }
    leave_region();
    throw;
  }
  leave_region();
}

void CudaBackend::abort_replayable() noexcept {
  if (region_ == Region::Capture) {
    graphs_->abort_capture();
    step_->captured = false;
  }
  try {
    set_kv_deferred(false);
    flush_kv();
  } catch (...) {  // the error that aborted the region is the one reported
  }
  leave_region();
}

}  // namespace ssd::cuda
