#include "actors/roles/drafter_factory.h"

#include <charconv>

#include "runtime/core/error.h"
#include "runtime/drafters/domino/domino_drafter.h"
#include "runtime/drafters/early_exit_drafter.h"
#include "runtime/drafters/model_drafter.h"
#include "runtime/drafters/ngram_drafter.h"
#include "runtime/drafters/oracle_drafter.h"
#include "runtime/drafters/spelling_classes.h"
#include "runtime/drafters/suffix_drafter.h"

namespace ssd {
namespace {

constexpr const char* kKinds =
    "ngram[:MIN-MAX], suffix, model:PATH, early-exit:L, domino:PATH, oracle:ALPHA";

int64_t parse_int(std::string_view s, std::string_view what) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  SSD_CHECK(ec == std::errc() && p == s.data() + s.size(), "--drafter: {} '{}' is not an integer",
            what, s);
  return v;
}

std::unique_ptr<Drafter> make_ngram(const DrafterSpec& spec, const DrafterOptions& opts) {
  NgramOptions o;
  o.depth_per_match = opts.ngram_depth_per_match;
  if (!spec.arg.empty()) {
    const auto dash = spec.arg.find('-');
    SSD_CHECK(dash != std::string::npos, "--drafter ngram:{}: expected ngram:MIN-MAX, e.g. ngram:1-4",
              spec.arg);
    o.n_min = static_cast<int32_t>(parse_int(std::string_view(spec.arg).substr(0, dash), "n min"));
    o.n_max = static_cast<int32_t>(parse_int(std::string_view(spec.arg).substr(dash + 1), "n max"));
  }
  return std::make_unique<NgramDrafter>(o);
}

}  // namespace

DrafterSpec parse_drafter_spec(std::string_view text) {
  DrafterSpec s;
  const auto colon = text.find(':');
  s.kind = std::string(text.substr(0, colon));
  if (colon != std::string_view::npos) s.arg = std::string(text.substr(colon + 1));
  const bool known = s.kind == "ngram" || s.kind == "suffix" || s.kind == "model" ||
                     s.kind == "early-exit" || s.kind == "domino" || s.kind == "oracle";
  SSD_CHECK(known, "--drafter '{}': unknown kind '{}' (known: {})", text, s.kind, kKinds);
  SSD_CHECK(s.kind != "suffix" || s.arg.empty(), "--drafter suffix takes no argument (got '{}')",
            s.arg);
  SSD_CHECK(s.kind == "ngram" || s.kind == "suffix" || !s.arg.empty(),
            "--drafter {} needs an argument ({})", s.kind, kKinds);
  return s;
}

namespace {

double parse_double(std::string_view s, std::string_view what) {
  try {
    size_t used = 0;
    const double v = std::stod(std::string(s), &used);
    if (used == s.size()) return v;
  } catch (...) {
  }
  fail(fmt::format("--drafter: {} '{}' is not a number", what, s));
}

std::unique_ptr<Drafter> make_model(const DrafterSpec& spec, ModelSession& target) {
  ModelFile draft = ModelFile::open(spec.arg);
  ModelDrafterOptions o;
  o.target_vocab = VocabFingerprint::of(target.file().path(), target.tokenizer().spec().tokens);
  o.draft_vocab = VocabFingerprint::of(draft.path(), load_tokenizer(draft).spec().tokens);
  o.target_logits = target.file().config().vocab;
  o.kv_tokens = target.ctx_size() + 1024;
  return std::make_unique<ModelDrafter>(std::move(draft), target.backend(), o);
}

std::unique_ptr<Drafter> make_early_exit(const DrafterSpec& spec, ModelSession& target,
                                         const DrafterOptions& opts) {
  EarlyExitOptions o;
  o.layers = parse_int(spec.arg, "early-exit layer count");
  o.online_learning = opts.online_learning;
  o.kv_tokens = target.ctx_size() + 1024;
  return std::make_unique<EarlyExitDrafter>(target.file(), target.backend(), o);
}

std::unique_ptr<Drafter> make_oracle(const DrafterSpec& spec, ModelSession& target,
                                     const DrafterOptions& opts) {
  OracleOptions o;
  o.alpha = parse_double(spec.arg, "oracle ALPHA");
  SSD_CHECK(o.alpha >= 0 && o.alpha <= 1, "--drafter oracle:{}: ALPHA must be in [0, 1]", spec.arg);
  o.cost_us = opts.oracle_cost_us;
  o.kv_tokens = target.ctx_size() + 1024;
  return std::make_unique<OracleDrafter>(target.model(), o);
}

}  // namespace

SuffixDrafterOptions suffix_options(const DrafterOptions& opts) {
  return SuffixDrafterOptions{.cache_tokens = opts.suffix_cache_tokens,
                              .min_prob = opts.suffix_min_prob,
                              .depth_per_match = opts.suffix_depth_per_match,
                              .unsure_root_depth = opts.suffix_unsure_root_depth,
                              .earlier_sure_match = opts.suffix_earlier_sure_match,
                              .earlier_unsure_min_share = opts.suffix_earlier_min_share};
}

std::unique_ptr<Drafter> make_drafter(const DrafterSpec& spec, ModelSession& target,
                                      const DrafterOptions& opts) {
  SSD_CHECK(!opts.online_learning || spec.kind == "early-exit",
            "--online-learning applies to the early-exit drafter, not {}", spec.kind);
  if (spec.kind == "ngram") return make_ngram(spec, opts);
  if (spec.kind == "suffix") {  // with the target's spellings, for the no-match fallback
    SuffixDrafterOptions o = suffix_options(opts);
    if (opts.suffix_spelling)
      o.spelling_classes = std::make_shared<const std::vector<int32_t>>(
          spelling_classes(target.tokenizer().spec().tokens));
    return std::make_unique<SuffixDrafter>(o);
  }
  if (spec.kind == "model") return make_model(spec, target);
  if (spec.kind == "early-exit") return make_early_exit(spec, target, opts);
  if (spec.kind == "oracle") return make_oracle(spec, target, opts);
  DominoOptions o;
  o.path = spec.arg;
  o.head = opts.domino_head;
  o.trim_block = opts.domino_trim;
  return std::make_unique<DominoDrafter>(target.model(), o);
}

}  // namespace ssd
