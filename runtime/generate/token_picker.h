// Where the decoding loops turn a forward's logits into tokens: the AR decode step's sample
// (greedy argmax or a sampled draw), and a verification round's accept / correction / bonus
// decision. The loops (runtime/generate/generation.cpp, runtime/spec/verify_round.cpp, and
// through them SD and the SSD target leader) never sample or verify by themselves; they ask the
// target's picker (TargetModel::picker()), which is chosen once, when the session builds its
// target:
//   host    (HostTokenPicker) today's code: Sampler::sample, verify_greedy / verify_sampling on
//           host logits rows. The CPU backend always uses it, so CPU output is what it always
//           was, bit for bit.
//   device  (runtime/backend/cuda/device_token_picker.h) the CUDA backend's: decode and verification
//           forwards leave their logits on the device (Batch::logits_in_backend), the argmax,
//           the sampled draw and the chain verifier run there, and only token ids (and, for a
//           sampled tree, the kept candidates of the rows it visits) come back.
// Both give the same tokens for the same logits (the device code shares its arithmetic with the
// CPU code, kernels/common/*_math.h); tests/unit/cuda/device_token_picker_test.cpp compares them
// where a GPU exists.
//
// A picker reads `fr` right after the forward that produced it: backend rows stay valid only
// until that model's next forward (ForwardResult::backend_logits).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/model/batch.h"
#include "runtime/sampling/sampler.h"
#include "runtime/spec/draft_tree.h"
#include "runtime/spec/verify.h"

namespace ssd {

class TokenPicker {
 public:
  virtual ~TokenPicker() = default;
  virtual const char* name() const = 0;
  // True when this picker reads logits where the forward left them: the loops then set
  // Batch::logits_in_backend on decode and verification forwards. Either way a picker accepts
  // host rows too (a prefill's, or a tensor-parallel forward's, which are gathered on the host).
  virtual bool reads_backend_logits() const = 0;

  // The token Sampler(cfg).sample(row `row` of fr, vocab, stream, step) draws (greedy: the
  // argmax). Throws the sampler's errors.
  virtual int32_t sample(const ForwardResult& fr, size_t row, const SamplerConfig& cfg,
                         uint64_t stream, uint32_t step) = 0;

  // One decode step's draws: row r of fr with draws[r]'s config, stream and step, for every r
  // (the same tokens as sample() row by row, which is what this default does). The device
  // picker takes the argmax of all greedy rows in one launch: one sync per step, not per request.
  struct RowDraw {
    const SamplerConfig* cfg = nullptr;
    uint64_t stream = 0;
    uint32_t step = 0;
  };
  virtual std::vector<int32_t> sample_rows(const ForwardResult& fr, std::span<const RowDraw> draws);

  // verify_sampling(tree, rows [first_row, first_row + 1 + tree.size()) of fr, ...): greedy or
  // sampled by cfg, with the uniforms of rng. The tree is valid (DraftTree::validate).
  virtual VerifyResult verify(const DraftTree& tree, const ForwardResult& fr, size_t first_row,
                              const SamplerConfig& cfg, const VerifyRng& rng) = 0;
};

// Sampling and verification on host logits rows (the code the loops always ran). Stateless.
class HostTokenPicker final : public TokenPicker {
 public:
  const char* name() const override { return "host"; }
  bool reads_backend_logits() const override { return false; }
  int32_t sample(const ForwardResult& fr, size_t row, const SamplerConfig& cfg, uint64_t stream,
                 uint32_t step) override;
  VerifyResult verify(const DraftTree& tree, const ForwardResult& fr, size_t first_row,
                      const SamplerConfig& cfg, const VerifyRng& rng) override;
};

// The one host picker every target without its own uses.
TokenPicker& host_token_picker();

}  // namespace ssd
