// `--drafter oracle:ALPHA` -- RESEARCH ONLY. It reads the TARGET's own next-token distribution
// (it runs the target's weights over a KV cache of its own, separate from the target's), so it
// can never be a real speedup: its cost is a target forward per draft position. It exists to
// study acceptance-rate and fan-out theory with a drafter of known quality, never to claim speed;
// its name() says so in every report.
//
// At each draft position, with the target's logits l there:
//   t*    = the token the target would produce: argmax(l) (greedy), or a draw from the
//           target's processed p (sampling; Philox lane kLaneOracleTarget + branch);
//   other = greedy: one_hot(second-best token); sampling: p without t*, renormalised;
//   q     = ALPHA * one_hot(t*) + (1 - ALPHA) * other, and the proposed token is drawn exactly
//           from q (lane kLaneDrafter + branch), so q is the distribution the draft came from and
//           verification stays lossless (t* is drawn from uniforms the verifier never uses, so
//           conditioning on it is harmless). First-level siblings are drawn from q without
//           replacement, each with its renormalised q.
// Under greedy a position is accepted exactly when the draw picked t*: per-position acceptance
// is ALPHA, independently per position (up to float near-ties between the oracle's and the
// verifier's forward of the same prefix). When other is empty (a vocabulary of one token, or a
// one-hot p), q = one_hot(t*).
//
// Saguaro (DraftRequest::saguaro_top_f / saguaro_c, sampling only): the mixture q is reshaped
// by runtime/saguaro/saguaro_sampling.h before the draw. DraftTree::predicted (predict_top):
// greedy, the target's own ranking (its largest logits); sampling, the mixture q's top entries.
//
// Simulated cost: cost_us > 0 sleeps that many microseconds per draft() call, to study timing as
// if drafting had a given cost.
#pragma once

#include <memory>

#include "runtime/drafters/model_draft_runner.h"
#include "runtime/spec/drafter.h"

namespace ssd {

struct OracleOptions {
  double alpha = 0.8;         // probability of proposing the target's own token, in [0, 1]
  int64_t cost_us = 0;        // simulated drafting cost per draft() call (sleep), >= 0
  int64_t kv_tokens = 0;      // the oracle's own KV capacity; 0 = target context + 1024
  int64_t prefill_chunk = 256;
};

// q = alpha * one_hot(star) + (1 - alpha) * other (other must not contain star), sorted by
// probability (descending, then id). one_hot(star) when other is empty or alpha >= 1.
ProcessedDist oracle_mixture(int32_t star, const ProcessedDist& other, double alpha);

class OracleDrafter final : public Drafter {
 public:
  // `target` must outlive the drafter. Its forward() is called between the SD loop's own calls
  // (never concurrently with them), on the oracle's cache.
  OracleDrafter(Transformer& target, const OracleOptions& opts);
  ~OracleDrafter() override;

  std::string name() const override;  // "oracle:0.8 (research only)"
  void start(int32_t seq, std::span<const int32_t> prompt) override;
  void commit(int32_t seq, std::span<const int32_t> tokens) override;
  std::vector<DraftTree> draft(std::span<const DraftRequest> requests) override;
  void finish(int32_t seq) override;

  const OracleOptions& options() const { return opts_; }

 private:
  OracleOptions opts_;
  std::unique_ptr<ModelDraftRunner> runner_;
};

}  // namespace ssd
