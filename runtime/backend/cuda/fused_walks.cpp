// CudaBackend (cuda_backend_impl.h): the fused Domino head walk (Backend::domino_walk).
// Greedy: one kernel (kernels/cuda/domino_walk.cu) walks every chain's positions on the device
// (GRU step, low-rank correction, argmax) and only the tokens come back. Sampled: a launch per
// position with the device sampler's kernels between (domino_sampled_walk.h). Neither returns
// to the host before its end, neither is graphed.
// Precision: both walks multiply the head's matrices (W_ih, W_hh, W1, W2) in the type the
// checkpoint stores, decoded per element (kernels/common/dequant.h), so an F32 or F16 head
// drafts with its own values, as the op-by-op head does on this backend.
// Compiled here against CUDA 13 (no GPU on the build machine): not yet run on a device.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"
#include "runtime/backend/cuda/cuda_backend_impl.h"
#include "runtime/core/error.h"

namespace ssd::cuda {

// The fused Domino walk (kernels/cuda/domino_walk.cu): the block's logits and hidden rows are
// already in device memory (the backbone left them there); the small host inputs are staged and
// the tokens come back with the one wait of the call.
void CudaBackend::domino_walk(const DominoWalkCall& c) {
  enter();
  SSD_CHECK(region_ == Region::None, "cuda backend: a Domino walk inside a replayable region");
  SSD_CHECK(c.chains >= 0 && c.d > 0 && c.g > 0 && c.r > 0 && c.vd > 0,
            "domino walk: bad shape chains={} d={} g={} r={} Vd={}", c.chains, c.d, c.g, c.r, c.vd);
  const auto check_shape = [](const Weight* w, int64_t rows, int64_t cols, const char* what) {
    SSD_CHECK(w && w->rows == rows && w->cols == cols,
              "domino walk: {} must be [{}, {}], got [{}, {}]", what, rows, cols, w ? w->rows : 0,
              w ? w->cols : 0);
  };
  check_shape(c.w_ih, 3 * c.g, c.d, "W_ih");
  check_shape(c.w_hh, 3 * c.g, c.g, "W_hh");
  check_shape(c.w1, c.r, c.d + c.g, "W1");
  check_shape(c.w2, c.vd, c.r, "W2");
  SSD_CHECK(c.token_embd && c.token_embd->cols == c.d,
            "domino walk: the token embedding must have {} columns", c.d);
  if (c.chains == 0 || c.first[c.chains] == 0) return;
  SSD_CHECK(is_device_pointer(c.logits) && is_device_pointer(c.hidden),
            "domino walk: logits and hidden rows must be this backend's memory");
  for (int64_t i = 0; i < c.chains; ++i) {
    SSD_CHECK(c.first[i + 1] >= c.first[i], "domino walk: chain {} has negative length", i);
    SSD_CHECK(c.anchors[i] >= 0 && c.anchors[i] < c.token_embd->rows,
              "token id {} is outside the vocabulary (0..{})", c.anchors[i],
              c.token_embd->rows - 1);
  }
  SSD_CHECK(c.first[0] == 0, "domino walk: the first chain must start at row 0");
  const int64_t rows = c.first[c.chains];
  const size_t scratch_bytes =
      static_cast<size_t>(c.chains * domino_walk_scratch_floats(c.d, c.g, c.r)) * sizeof(float);
  if (walk_scratch_.bytes() < scratch_bytes) {  // an earlier walk may still use the old one
    SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));
    walk_scratch_.grow(scratch_bytes);
  }
  weight(*c.token_embd);  // prepared here: its data are this backend's device bytes
  DominoWalkArgs a;
  a.embd = c.token_embd->data;
  a.embd_type = c.token_embd->type;
  a.embd_row_bytes = c.token_embd->row_bytes;
  const auto stored = [this](const Weight& w) {
    weight(w);  // prepared by this backend: w.data are its device bytes
    return WalkMatrix{w.data, w.type, w.row_bytes};
  };
  a.w_ih = stored(*c.w_ih);
  a.w_hh = stored(*c.w_hh);
  a.w1 = stored(*c.w1);
  a.w2 = stored(*c.w2);
  a.b_ih = staging_->in(c.b_ih, static_cast<size_t>(3 * c.g));
  a.b_hh = staging_->in(c.b_hh, static_cast<size_t>(3 * c.g));
  a.vocab_ids = c.vocab_ids ? staging_->in(c.vocab_ids, static_cast<size_t>(c.vd)) : nullptr;
  a.d = c.d;
  a.g = c.g;
  a.r = c.r;
  a.vd = c.vd;
  a.use_head = c.use_head;
  a.logits = c.logits;
  a.hidden = c.hidden;
  a.first = staging_->in(c.first, static_cast<size_t>(c.chains + 1));
  a.anchors = staging_->in(c.anchors, static_cast<size_t>(c.chains));
  a.chains = c.chains;
  a.scratch = walk_scratch_.get<float>();
  if (c.samplers) {  // one launch per position, the sampler's kernels between (see its header)
    SSD_CHECK(c.lists, "domino walk: a sampled walk needs its lists' output");
    SSD_CHECK(!c.vocab_ids || c.vocab_ids_host,
              "domino walk: a sampled walk needs the draft vocabulary's ids on the host");
    sampled_walk_.run(a, c, stream_);
    staging_->finish();
    return;
  }
  a.tokens = staging_->out(c.tokens, static_cast<size_t>(rows));
  launch_domino_walk(a, stream_);
  staging_->finish();  // the tokens are on the host when this returns
}

}  // namespace ssd::cuda
