// The sampled Domino walk on the device (see domino_sampled_walk.h).
#include "runtime/backend/cuda/domino_sampled_walk.h"

#include <algorithm>
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_sampler_kernels.cuh"
#include "runtime/core/error.h"

namespace ssd::cuda {

void DominoSampledWalk::run(DominoWalkArgs a, const DominoWalkCall& call, cudaStream_t s) {
  const int64_t chains = call.chains, rows = call.first[chains], vd = call.vd;
  SSD_ASSERT(call.samplers && call.lists && rows > 0);
  SSD_CHECK(vd <= INT32_MAX, "domino walk: draft vocabulary of {} is too large", vd);
  const int32_t n = static_cast<int32_t>(vd);
  const size_t urows = static_cast<size_t>(rows), uvd = static_cast<size_t>(vd);
  const size_t sort_bytes = process_sort_scratch_bytes(n);
  const std::pair<DeviceBuffer*, size_t> sizes[] = {
      {&tokens_, urows * sizeof(int32_t)},
      {&greedy_, static_cast<size_t>(chains)},
      {&stats_, urows * sizeof(RowStats)},
      {&ids_, urows * uvd * sizeof(int32_t)},
      {&probs_, urows * uvd * sizeof(double)},
      {&e_, uvd * sizeof(double)},
      {&keys_, uvd * sizeof(uint64_t)},
      {&sorted_, uvd * sizeof(uint64_t)},
      {&sort_tmp_, std::max<size_t>(sort_bytes, 1)},
      {&scan_, process_scan_doubles(n) * sizeof(double)},
      {&off_, (urows + 1) * sizeof(int64_t)},
      {&packed_ids_, urows * uvd * sizeof(int32_t)},
      {&packed_probs_, urows * uvd * sizeof(double)}};
  // A buffer is regrown only after the kernels of the walk before (still queued) are done.
  bool grow = false;
  for (const auto& [buf, bytes] : sizes) grow = grow || buf->bytes() < bytes;
  if (grow) {
    SSD_CUDA_CHECK(cudaStreamSynchronize(s));
    for (const auto& [buf, bytes] : sizes) buf->grow(bytes);
  }

  greedy_host_.assign(static_cast<size_t>(chains), 0);
  int64_t max_k = 0;
  for (int64_t c = 0; c < chains; ++c) {
    validate(call.samplers[c].cfg);
    greedy_host_[c] = is_greedy(call.samplers[c].cfg) ? 1 : 0;
    max_k = std::max(max_k, call.first[c + 1] - call.first[c]);
  }
  SSD_CUDA_CHECK(cudaMemcpyAsync(greedy_.get(), greedy_host_.data(), greedy_host_.size(),
                                 cudaMemcpyHostToDevice, s));
  SSD_CUDA_CHECK(cudaMemsetAsync(tokens_.get(), 0xff, urows * sizeof(int32_t), s));  // -1
  SSD_CUDA_CHECK(cudaMemsetAsync(stats_.get(), 0, urows * sizeof(RowStats), s));     // keep 0
  a.tokens = tokens_.get<int32_t>();

  ProcessScratch sc;
  sc.e = e_.get<double>();
  sc.keys = keys_.get<uint64_t>();
  sc.sorted = sorted_.get<uint64_t>();
  sc.sort_tmp = sort_tmp_.get();
  sc.sort_bytes = sort_bytes;
  sc.scan = scan_.get<double>();
  for (int64_t i = 0; i < max_k; ++i) {
    launch_domino_walk_step(a, i, greedy_.get<uint8_t>(), s);
    for (int64_t c = 0; c < chains; ++c) {
      if (greedy_host_[c] || call.first[c + 1] - call.first[c] <= i) continue;
      const DominoWalkSampler& w = call.samplers[c];
      const int64_t row = call.first[c] + i;
      sc.stats = stats_.get<RowStats>() + row;
      int32_t* ids = ids_.get<int32_t>() + row * vd;
      double* probs = probs_.get<double>() + row * vd;
      // A row after an invalid one is processed too (its correction skipped: the base stays);
      // nothing reads it, because the host throws at the invalid row first.
      launch_process_row(a.logits + row * vd, n, static_cast<double>(w.cfg.temperature),
                         w.cfg.top_k, static_cast<double>(w.cfg.top_p),
                         static_cast<double>(w.cfg.min_p), sc, ids, probs, s);
      launch_draw_row(probs, ids, sc.stats, w.cfg.seed, w.stream,
                      w.step + static_cast<uint32_t>(i), kLaneDominoDraft, sc.scan,
                      tokens_.get<int32_t>() + row, s);
    }
  }
  launch_pack_rows(stats_.get<RowStats>(), static_cast<int32_t>(rows), vd, ids_.get<int32_t>(),
                   probs_.get<double>(), off_.get<int64_t>(), packed_ids_.get<int32_t>(),
                   packed_probs_.get<double>(), s);

  std::vector<int32_t> index(urows);
  std::vector<RowStats> stats(urows);
  DominoWalkLists& out = *call.lists;
  out.off.resize(urows + 1);
  SSD_CUDA_CHECK(cudaMemcpyAsync(index.data(), tokens_.get(), urows * sizeof(int32_t),
                                 cudaMemcpyDeviceToHost, s));
  SSD_CUDA_CHECK(cudaMemcpyAsync(stats.data(), stats_.get(), urows * sizeof(RowStats),
                                 cudaMemcpyDeviceToHost, s));
  SSD_CUDA_CHECK(cudaMemcpyAsync(out.off.data(), off_.get(), (urows + 1) * sizeof(int64_t),
                                 cudaMemcpyDeviceToHost, s));
  SSD_CUDA_CHECK(cudaStreamSynchronize(s));

  // The first invalid row in the host walk's order: its error, as the CPU would raise it.
  const auto target_id = [&call](int32_t i) {
    return call.vocab_ids_host && i >= 0 ? call.vocab_ids_host[i] : i;
  };
  for (int64_t i = 0; i < max_k; ++i)
    for (int64_t c = 0; c < chains; ++c) {
      const int64_t row = call.first[c] + i;
      if (row >= call.first[c + 1]) continue;
      if (i > 0 && index[row - 1] < 0) continue;  // the chain stopped before this row
      if (index[row] >= 0) continue;
      if (greedy_host_[c]) SSD_CHECK(false, "argmax: all {} logits are NaN", vd);
      const RowStats& st = stats[row];
      SSD_CHECK(st.inf_at < 0, "sampler: logit of token {} is +inf", target_id(st.inf_at));
      SSD_CHECK(false, "sampler: all {} logits are -inf or NaN", call.token_embd->rows);
    }
  for (int64_t r = 0; r < rows; ++r) call.tokens[r] = target_id(index[r]);

  const size_t entries = static_cast<size_t>(out.off[urows]);
  out.ids.resize(entries);
  out.probs.resize(entries);
  if (entries > 0) {
    SSD_CUDA_CHECK(cudaMemcpyAsync(out.ids.data(), packed_ids_.get(), entries * sizeof(int32_t),
                                   cudaMemcpyDeviceToHost, s));
    SSD_CUDA_CHECK(cudaMemcpyAsync(out.probs.data(), packed_probs_.get(),
                                   entries * sizeof(double), cudaMemcpyDeviceToHost, s));
    SSD_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  for (int32_t& id : out.ids) id = target_id(id);
}

}  // namespace ssd::cuda
