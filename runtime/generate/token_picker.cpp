// HostTokenPicker (token_picker.h): exactly the calls the decoding loops made before pickers
// existed, on host rows. Rows left in backend memory (a picker mix-up) are a programming error,
// not something to download silently.
#include "runtime/generate/token_picker.h"

#include "runtime/core/error.h"

namespace ssd {
namespace {

const float* host_row(const ForwardResult& fr, size_t row) {
  SSD_ASSERT(fr.backend_logits == nullptr);  // the host picker never asks for backend rows
  SSD_ASSERT(fr.logits.size() >= (row + 1) * static_cast<size_t>(fr.vocab));
  return fr.logits_row(row);
}

}  // namespace

int32_t HostTokenPicker::sample(const ForwardResult& fr, size_t row, const SamplerConfig& cfg,
                                uint64_t stream, uint32_t step) {
  return Sampler(cfg).sample(host_row(fr, row), static_cast<int32_t>(fr.vocab), stream, step);
}

std::vector<int32_t> TokenPicker::sample_rows(const ForwardResult& fr,
                                             std::span<const RowDraw> draws) {
  std::vector<int32_t> out(draws.size());
  for (size_t r = 0; r < draws.size(); ++r)
    out[r] = sample(fr, r, *draws[r].cfg, draws[r].stream, draws[r].step);
  return out;
}

VerifyResult HostTokenPicker::verify(const DraftTree& tree, const ForwardResult& fr,
                                     size_t first_row, const SamplerConfig& cfg,
                                     const VerifyRng& rng) {
  (void)host_row(fr, first_row + tree.size());  // the sequence's last row is there
  const float* logits = host_row(fr, first_row);
  const auto vocab = static_cast<int32_t>(fr.vocab);
  return is_greedy(cfg) ? verify_greedy(tree, logits, vocab)
                        : verify_sampling(tree, logits, vocab, cfg, rng);
}

TokenPicker& host_token_picker() {
  static HostTokenPicker picker;
  return picker;
}

}  // namespace ssd
