// The drafter flags that `ssd generate` and `ssd bench` share, declared once (name, default,
// help) and turned into the DrafterOptions every rank builds its drafter with. A command's
// argument struct holds one DrafterFlags and calls its visit() from its own.
#pragma once

#include <string>

#include "actors/roles/drafter_factory.h"

namespace ssd {

struct DrafterFlags {
  bool online_learning = false;
  std::string domino_head = "on", domino_block = "trim";
  int64_t suffix_cache_tokens = int64_t{1} << 20;
  double suffix_min_prob = 0.1;

  template <class V>
  void visit(V&& v) {
    v(online_learning, "online-learning", "early-exit drafter: train its head online (DVI)");
    v(domino_head, "domino-head", "domino drafter: on, or off for the backbone alone",
      {.choices = {"on", "off"}});
    v(domino_block, "domino-block",
      "domino drafter: trim (only the k MASK rows wanted: the same acceptance, cheaper) or full "
      "(the trained B-1)",
      {.choices = {"full", "trim"}});
    v(suffix_cache_tokens, "suffix-cache-tokens",
      "suffix drafter: tokens of earlier requests (prompts + outputs) remembered; the oldest "
      "requests are evicted past it; 0 = the sequence's own text only",
      {.min = 0});
    v(suffix_min_prob, "suffix-min-prob",
      "suffix drafter: a draft branch stops when the empirical probability of its path falls "
      "below this",
      {.min = 1e-6, .max = 1});
  }

  // The options for a drafter whose own models run on `threads` CPU threads.
  DrafterOptions options(int threads) const {
    DrafterOptions o;
    o.online_learning = online_learning;
    o.domino_head = domino_head == "on";
    o.domino_trim = domino_block == "trim";
    o.threads = threads;
    o.suffix_cache_tokens = suffix_cache_tokens;
    o.suffix_min_prob = suffix_min_prob;
    return o;
  }
};

}  // namespace ssd
