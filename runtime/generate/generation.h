// Autoregressive generation on one sequence: prefill the prompt (in chunks of up to
// `prefill_chunk` tokens, each one causal batched forward), then one forward per generated token,
// sampling with the request's sampler and stopping at an end-of-generation token or the budget.
// This is the AR baseline every speculative mode is compared with, token for token.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/model/transformer.h"
#include "runtime/sampling/sampler.h"

namespace ssd {

struct GenerationRequest {
  std::vector<int32_t> prompt;   // token ids, non-empty
  int64_t max_new_tokens = 128;
  SamplerConfig sampler;
  uint64_t stream = 0;           // Philox stream of this request (the step is the output index)
  std::vector<int32_t> stop_ids; // end-of-generation tokens (emitted, then generation stops)
  int64_t prefill_chunk = 512;
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids (including a final stop token if one was drawn)
  bool stopped_by_eog = false;
  int64_t prompt_tokens = 0;
  double prefill_s = 0;  // wall time of the prompt's forwards
  double decode_s = 0;   // wall time from the first sampled token to the last
  int64_t forwards = 0;  // decode forwards run
};

// Called with each new token as soon as it is chosen; return false to stop early.
using TokenCallback = std::function<bool(int32_t)>;

// Runs the request on a fresh sequence of `kv` (released afterwards). Throws ssd::Error before
// any work when the prompt is empty or prompt + max_new_tokens exceeds the context available.
GenerationResult generate_ar(Transformer& model, KvCache& kv, const GenerationRequest& req,
                             const TokenCallback& on_token = {});

// The context a request needs, checked against the model's context length and the cache.
void check_context(const Transformer& model, const KvCache& kv, const GenerationRequest& req);

// ---- pieces shared by the AR and SD loops ----

double monotonic_seconds();

// Releases a KV sequence on every exit path.
struct SeqGuard {
  KvCache& kv;
  SeqId id;
  ~SeqGuard() {
    if (kv.alive(id)) kv.release(id);
  }
};

struct PrefillResult {
  ForwardResult last;          // the final chunk's forward (logits of the last prompt token)
  std::vector<float> features; // [prompt, layers x dim] hidden states at `hidden_layers`
  double seconds = 0;
};

// The prompt through the model in causal chunks of `chunk` tokens on sequence `seq`.
PrefillResult prefill(Transformer& model, KvCache& kv, SeqId seq, const std::vector<int32_t>& prompt,
                      int64_t chunk, const std::vector<int32_t>& hidden_layers = {});

// Rows `rows` of a forward's hidden states, every requested layer side by side:
// [rows.size(), layers x dim].
std::vector<float> gather_features(const ForwardResult& fr, const std::vector<int32_t>& rows);

}  // namespace ssd
