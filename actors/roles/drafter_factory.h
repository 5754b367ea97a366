// `--drafter KIND[:ARG]` -> a Drafter, built once at start-up against the loaded target.
//   ngram[:MIN-MAX]   prompt lookup over the sequence so far (default n 1-4)
//   suffix            suffix-automaton lookup over the sequence and earlier requests
//                     (SuffixDecoding; --suffix-cache-tokens, --suffix-min-prob)
//   model:PATH        an independent small model with the target's tokenizer
//   early-exit:L      the target's first L layers + a LoRA draft head (--online-learning: DVI)
//   domino:PATH       Domino block drafter (safetensors checkpoint)
//   oracle:ALPHA      RESEARCH ONLY: proposes the target's own token with probability ALPHA
// A spec that cannot work with this target (unknown kind, bad argument, a vocabulary or layer
// mismatch) is an ssd::Error before any generation.
// Backend: every model-based drafter (model:, early-exit:, domino:) computes through the
// session's backend, so on a CUDA session (a drafter rank placed on a GPU) its forwards run on
// that GPU. Host-side pieces stay on the host whatever the backend: the early-exit LoRA head and
// its DVI trainer, the Domino GRU's gate arithmetic between its matmuls, and sampling.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "actors/roles/model_session.h"
#include "runtime/drafters/suffix_drafter.h"
#include "runtime/spec/drafter.h"

namespace ssd {

struct DrafterSpec {
  std::string kind;  // ngram, suffix, model, early-exit, domino, oracle
  std::string arg;   // text after the first ':' (may be empty)
};

// Parses KIND[:ARG]; throws ssd::Error listing the known kinds for an unknown one.
DrafterSpec parse_drafter_spec(std::string_view text);

struct DrafterOptions {
  bool online_learning = false;  // early-exit: DVI online training of the draft head
  bool domino_head = true;       // domino: false drafts with the backbone alone
  bool domino_trim = true;       // domino: blocks of the k wanted MASK rows, not the trained B - 1
  int64_t oracle_cost_us = 0;    // oracle: simulated cost per draft call
  int threads = 1;               // drafter-owned models
  int64_t suffix_cache_tokens = int64_t{1} << 20;  // suffix: earlier requests' tokens remembered
  double suffix_min_prob = 0.1;                    // suffix: a branch stops below this
  double suffix_depth_per_match = 4.0;             // suffix: depth cap per matched token
  int32_t suffix_unsure_root_depth = 1;            // suffix: depth cap after an unsure first token
  int32_t suffix_earlier_sure_match = 2;           // suffix: earlier requests' shorter match: unsure
  double suffix_earlier_min_share = 0.5;           // suffix: earlier requests' rarer unsure: none
  bool suffix_spelling = true;                     // suffix: the spelling fallback (primary only)
  double ngram_depth_per_match = 0.0;              // ngram: depth cap per matched token (0: k)
};

// The drafter for `spec` against the session's target. Drafter-owned models (model:, early-exit:)
// get their own KV caches sized to the session's context.
// The suffix drafter's options from the drafter flags (the primary's and SSD's backup alike; the
// spelling classes, which need the target's vocabulary, are the primary's alone: make_drafter).
SuffixDrafterOptions suffix_options(const DrafterOptions& opts);

std::unique_ptr<Drafter> make_drafter(const DrafterSpec& spec, ModelSession& target,
                                      const DrafterOptions& opts);

}  // namespace ssd
