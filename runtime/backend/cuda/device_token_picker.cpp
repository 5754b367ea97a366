// DeviceTokenPicker (see device_token_picker.h): a DeviceSampler and a DeviceVerifier on the
// CUDA backend's stream, and the choice of which serves a call.
#include "runtime/backend/cuda/device_token_picker.h"

#include <vector>

#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/backend/cuda/device_sampler.h"
#include "runtime/backend/cuda/device_verifier.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

class DeviceTokenPicker final : public TokenPicker {
 public:
  explicit DeviceTokenPicker(const CudaBackendHandle& h)
      : sampler_(h.device, h.stream), verifier_(h.device, h.stream) {}

  const char* name() const override { return "device"; }
  bool reads_backend_logits() const override { return true; }

  int32_t sample(const ForwardResult& fr, size_t row, const SamplerConfig& cfg, uint64_t stream,
                 uint32_t step) override {
    return sampler_.sample(rows(fr, row, 1), static_cast<int32_t>(fr.vocab), cfg, stream, step);
  }

  // Greedy rows: one argmax launch over every row of the step (sampled rows are in it too, which
  // costs a few microseconds and keeps the rows contiguous); sampled rows drawn one by one.
  std::vector<int32_t> sample_rows(const ForwardResult& fr,
                                   std::span<const RowDraw> draws) override {
    std::vector<int32_t> out(draws.size(), -1);
    const auto vocab = static_cast<int32_t>(fr.vocab);
    bool any_greedy = false;
    for (const RowDraw& d : draws) any_greedy = any_greedy || is_greedy(*d.cfg);
    std::vector<int32_t> best;
    if (any_greedy) {
      SSD_CHECK(vocab > 0, "argmax: vocabulary size must be positive (got {})", vocab);
      best = verifier_.argmax_rows(rows(fr, 0, draws.size()), static_cast<int64_t>(draws.size()),
                                   vocab);
    }
    for (size_t r = 0; r < draws.size(); ++r) {
      if (is_greedy(*draws[r].cfg)) {
        validate(*draws[r].cfg);  // as Sampler's constructor does on the host
        SSD_CHECK(best[r] >= 0, "argmax: all {} logits are NaN", vocab);
        out[r] = best[r];
      } else {
        out[r] = sample(fr, r, *draws[r].cfg, draws[r].stream, draws[r].step);
      }
    }
    return out;
  }

  VerifyResult verify(const DraftTree& tree, const ForwardResult& fr, size_t first_row,
                      const SamplerConfig& cfg, const VerifyRng& rng) override {
    const auto vocab = static_cast<int32_t>(fr.vocab);
    const float* logits = rows(fr, first_row, tree.size() + 1);
    if (is_greedy(cfg)) return verifier_.greedy(tree, logits, vocab);  // (validates the tree)
    return verifier_.sampled_tree(tree, logits, vocab, cfg, rng);
  }

 private:
  // Rows [first, first + count) of the forward's logits, where they are.
  static const float* rows(const ForwardResult& fr, size_t first, size_t count) {
    const size_t have = static_cast<size_t>(fr.backend_logits ? fr.rows
                                                              : static_cast<int64_t>(
                                                                    fr.logits.size()) / fr.vocab);
    SSD_ASSERT(fr.vocab > 0 && first + count <= have);
    const float* base = fr.backend_logits ? fr.backend_logits : fr.logits.data();
    return base + first * static_cast<size_t>(fr.vocab);
  }

  DeviceSampler sampler_;
  DeviceVerifier verifier_;
};

}  // namespace

std::unique_ptr<TokenPicker> make_device_token_picker(Backend& backend) {
  return std::make_unique<DeviceTokenPicker>(cuda_backend_handle(backend));
}

}  // namespace ssd
