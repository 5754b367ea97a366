// The speculation flags that `ssd generate`, `ssd bench` and `ssd serve` share, declared once
// (name, default, help): the speculation length (--k, --k-max) and the drafters' own options,
// turned into the DrafterOptions every rank builds its drafter with; and, for generate and serve,
// the mode and the drafter (ModeFlags; bench compares lists of them under other names). A
// command's argument struct holds one of each it takes and calls their visit() from its own.
#pragma once

#include <string>
#include <vector>

#include "actors/roles/drafter_factory.h"
#include "runtime/core/error.h"

namespace ssd {

// A --k value: a fixed speculation length, or auto (runtime/spec/spec_length.h) over 0..k.
struct KChoice {
  int32_t k = 4;  // fixed: the length; automatic: the top of the range (--k-max)
  bool automatic = false;
  std::string text() const { return automatic ? "auto" : std::to_string(k); }
};

struct DrafterFlags {
  std::string k = "auto";  // one choice; `ssd bench` takes a comma-separated list of them
  bool online_learning = false;
  std::string domino_head = "on", domino_block = "trim";
  int64_t suffix_cache_tokens = int64_t{1} << 20;
  double suffix_min_prob = 0.1;
  double suffix_depth_per_match = 4.0;
  int32_t suffix_unsure_root_depth = 1;
  int32_t suffix_earlier_sure_match = 2;
  double suffix_earlier_min_share = 0.5;
  std::string suffix_spelling = "on";
  double ngram_depth_per_match = 0.0;
  int32_t k_max = 8;

  template <class V>
  void visit(V&& v) {
    v(k, "k",
      "sd/ssd: draft tokens per round (1..32), or auto: per sequence and round the length in "
      "0..--k-max with the most expected tokens per second, from the run's own measured costs "
      "and acceptance (ssd bench: a comma-separated list to compare)");
    v(k_max, "k-max",
      "--k auto: the longest speculation the per-round choice may take (it picks 0..k-max)",
      {.min = 1, .max = 32});
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
    v(suffix_depth_per_match, "suffix-depth-per-match",
      "suffix drafter: a draft is at most this many tokens per token of the text it matched",
      {.min = 1e-6, .max = 64});
    v(suffix_unsure_root_depth, "suffix-unsure-root-depth",
      "suffix drafter: a draft whose first token is not the only continuation the matched text "
      "had stops after this many tokens; 0 = no such cut",
      {.min = 0, .max = 64});
    v(suffix_earlier_sure_match, "suffix-earlier-sure-match",
      "suffix drafter: a first token from earlier requests' text after a match of fewer tokens "
      "than this counts as unsure (cut as --suffix-unsure-root-depth says); 0 = no such rule",
      {.min = 0, .max = 64});
    v(suffix_earlier_min_share, "suffix-earlier-min-share",
      "suffix drafter: an unsure first token from earlier requests' text is not offered when it "
      "followed less than this share of the matches there; 0 = always offered",
      {.min = 0, .max = 1});
    v(suffix_spelling, "suffix-spelling",
      "suffix drafter: with nothing to offer, offer the token that followed the own text's latest "
      "other spelling of the last token (a leading space and ASCII case ignored)",
      {.choices = {"on", "off"}});
    v(ngram_depth_per_match, "ngram-depth-per-match",
      "ngram drafter: a draft after an n-token match is at most this many tokens per matched "
      "token; 0 = up to k",
      {.min = 0, .max = 64});
  }

  // --k as one choice (generate, serve); throws ssd::Error naming --k for a list or a bad value.
  KChoice k_choice() const { return k_choice(k); }

  // "auto", or a length 1..32; throws ssd::Error naming --k otherwise.
  KChoice k_choice(const std::string& text) const {
    if (text == "auto") return {k_max, true};
    int32_t v = 0;
    size_t used = 0;
    try {
      v = std::stoi(text, &used);
    } catch (...) {
      used = 0;
    }
    SSD_CHECK(used == text.size() && !text.empty() && v >= 1 && v <= 32,
              "--k '{}' is not auto or a length between 1 and 32", text);
    return {v, false};
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
    o.suffix_depth_per_match = suffix_depth_per_match;
    o.suffix_unsure_root_depth = suffix_unsure_root_depth;
    o.suffix_earlier_sure_match = suffix_earlier_sure_match;
    o.suffix_earlier_min_share = suffix_earlier_min_share;
    o.suffix_spelling = suffix_spelling == "on";
    o.ngram_depth_per_match = ngram_depth_per_match;
    return o;
  }
};

// --mode and --drafter of `ssd generate` and `ssd serve`.
struct ModeFlags {
  std::string mode = "ar";
  std::string drafter = "ngram";

  template <class V>
  void visit(V&& v) {
    v(mode, "mode",
      "ar: the target alone; sd: draft with --drafter, verify with the target; ssd: the drafter "
      "on its own rank pre-speculates while the target verifies (needs mpirun)",
      {.choices = {"ar", "sd", "ssd"}});
    v(drafter, "drafter",
      "sd/ssd drafter: ngram[:MIN-MAX], model:PATH, early-exit:L, domino:PATH, suffix, "
      "oracle:ALPHA (research)");
  }
};

}  // namespace ssd
