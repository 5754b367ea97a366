// Speculative decoding on one sequence (draft, then verify), the synchronous baseline of SSD:
// each round the drafter proposes a tree of up to K tokens deep after the last emitted token (the
// root), the target runs ONE forward over root + tree with a tree mask, the verifier accepts a
// path and emits one more token (correction or bonus), and the KV cache keeps only root + path.
// Output equals AR output token for token under greedy decoding, and has the target's
// distribution under sampling, whatever the drafter does.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/generate/generation.h"
#include "runtime/spec/drafter.h"

namespace ssd {

struct SdOptions {
  int32_t k = 4;      // draft depth (tokens per branch), 1..32
  int32_t width = 1;  // first-level branches asked of the drafter (1 = chain)
};

struct SdStats {
  int64_t rounds = 0;             // target verification forwards
  int64_t accepted = 0;           // draft tokens accepted over all rounds
  int64_t drafted = 0;            // draft tree nodes proposed over all rounds
  std::vector<int64_t> accept_hist;      // [k + 1]: rounds that accepted 0..k tokens
  std::vector<int64_t> pos_accepted;     // [k]: rounds whose path reached depth j + 1
  std::vector<int64_t> pos_offered;      // [k]: rounds whose draft had depth >= j + 1
  double draft_s = 0;   // wall time inside the drafter (draft, commit, observe)
  double verify_s = 0;  // wall time of the target's verification forwards and the verifier

  // Tokens emitted per target forward, bonus included: 1 + accepted / rounds.
  double mean_acceptance_length() const;
  // Per draft position j: P(position j accepted | the draft offered position j).
  std::vector<double> acceptance_rate_per_position() const;
};

struct SdResult {
  GenerationResult gen;
  SdStats stats;
};

// Runs the request with `drafter` on a fresh sequence of `kv` (released afterwards). The drafter
// sees sequence id 0. Throws ssd::Error before any work for a bad K or a request that does not
// fit the context (prompt + max_new_tokens + K positions are needed).
SdResult generate_sd(Transformer& target, KvCache& kv, Drafter& drafter,
                     const GenerationRequest& req, const SdOptions& opts,
                     const TokenCallback& on_token = {});

}  // namespace ssd
