// Autoregressive generation: prefill the prompt (in chunks of up to `prefill_chunk` tokens, each
// one causal batched forward), then one forward per generated token, sampling with the request's
// sampler and stopping at an end-of-generation token or the budget. This is the AR baseline every
// speculative mode is compared with, token for token.
//
// A batch of B requests runs the same loop with ONE forward per step over every request still
// generating (one row each); a request that finishes leaves the batch and gives its KV sequence
// back at once. Prompts are prefilled one request after the other. Each request draws from its
// own Philox stream at step = its output index, so its tokens do not depend on the batch it ran
// in (up to float rounding of differently grouped sums, see the engine tests).
//
// The target is reached only through TargetModel (runtime/model/target_model.h), so the same
// drivers run a local model or a tensor-parallel one whose calls are mirrored to other ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "runtime/model/target_model.h"
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
  int64_t forwards = 0;  // decode forwards this request took part in
};

// Called with each new token as soon as it is chosen; return false to stop early.
using TokenCallback = std::function<bool(int32_t)>;
// The batch form: (index of the request in the batch, token); false stops that request only.
using BatchTokenCallback = std::function<bool(size_t, int32_t)>;

// Runs the request on a fresh target sequence (released afterwards). Throws ssd::Error before
// any work when the prompt is empty or prompt + max_new_tokens exceeds the context available.
GenerationResult generate_ar(TargetModel& target, const GenerationRequest& req,
                             const TokenCallback& on_token = {});

// Runs every request together (results in request order). Throws ssd::Error before any work
// when a request is malformed or the batch does not fit the target's cache
// (check_batch_context).
std::vector<GenerationResult> generate_ar_batch(TargetModel& target,
                                                std::span<const GenerationRequest> reqs,
                                                const BatchTokenCallback& on_token = {});

// The context a request needs (prompt + max_new_tokens + `extra` positions, e.g. the K positions
// a verification forward writes ahead), checked against the model's context length and the
// target's cache; also checks the request's sampler and prefill chunk.
void check_context(const TargetModel& target, const GenerationRequest& req, int64_t extra = 0);

// check_context for each request, then the batch as a whole: every request's sequence at its
// longest (prompt + max_new_tokens + extra), rounded up to whole KV pages, must fit the target's
// cache at the same time.
void check_batch_context(const TargetModel& target, std::span<const GenerationRequest> reqs,
                         int64_t extra = 0);

// ---- pieces shared by the AR and SD loops ----

// Appends `tok` to request `index`'s result, streams it, and says whether the request goes on:
// false once the callback declines, an end-of-generation token was emitted (stopped_by_eog), or
// the budget is spent. Every driver (AR, SD, the distributed leader) emits through this.
bool emit_token(const GenerationRequest& req, GenerationResult& g, size_t index, int32_t tok,
                const BatchTokenCallback& on_token);

double monotonic_seconds();

struct PrefillResult {
  ForwardResult last;          // the final chunk's forward (logits of the last prompt token)
  std::vector<float> features; // [prompt, layers x dim] hidden states at `hidden_layers`
  double seconds = 0;
};

// The prompt through the target in causal chunks of `chunk` tokens on sequence `seq`.
PrefillResult prefill(TargetModel& target, SeqId seq, const std::vector<int32_t>& prompt,
                      int64_t chunk, const std::vector<int32_t>& hidden_layers = {});

// Rows `rows` of a forward's hidden states, every requested layer side by side:
// [rows.size(), layers x dim].
std::vector<float> gather_features(const ForwardResult& fr, const std::vector<int32_t>& rows);

}  // namespace ssd
