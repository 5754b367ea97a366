#include "runtime/drafters/lora_head.h"

#include <cmath>

#include "runtime/core/error.h"
#include "runtime/sampling/philox.h"

namespace ssd {

LoraHead::LoraHead(int64_t dim, int64_t vocab, const LoraOptions& opts)
    : r_(opts.rank), dim_(dim), vocab_(vocab), scale_(opts.scale) {
  SSD_CHECK(opts.rank >= 1 && opts.rank <= 256, "early-exit head: LoRA rank {} must be in 1..256",
            opts.rank);
  SSD_CHECK(std::isfinite(opts.scale), "early-exit head: LoRA scale {} must be finite", opts.scale);
  SSD_CHECK(opts.init_range >= 0 && std::isfinite(opts.init_range),
            "early-exit head: LoRA init range {} must be >= 0", opts.init_range);
  SSD_CHECK(dim > 0 && vocab > 0, "early-exit head: dim {} and vocab {} must be positive", dim,
            vocab);
  const double a = opts.init_range > 0 ? opts.init_range : 1.0 / std::sqrt(static_cast<double>(dim));
  A_.resize(static_cast<size_t>(r_ * dim_));
  // Philox addressed by element index: the init is a pure function of (seed, shape).
  for (size_t i = 0; i < A_.size(); ++i)
    A_[i] = static_cast<float>(a * (2.0 * philox_uniform(opts.seed, 0x10A4, static_cast<uint32_t>(i)) - 1.0));
  B_.assign(static_cast<size_t>(vocab_ * r_), 0.0f);
}

void LoraHead::add_correction(const float* z, float* logits, int64_t n) const {
  if (b_zero_) return;
  const LoraView<float> v = view();
  std::vector<float> u(static_cast<size_t>(r_));
  for (int64_t row = 0; row < n; ++row) {
    lora_project(v, z + row * dim_, u.data());
    lora_expand_add(v, u.data(), logits + row * vocab_);
  }
}

}  // namespace ssd
