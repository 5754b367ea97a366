// The committed Domino drafter of the default model (models/smollm2-domino/domino.safetensors, see
// its README) on held-out prompts, greedy: SD output equals AR token for token, its mean
// acceptance length (MAL) stays at the level the card reports, and the Domino head adds to the
// backbone alone. Greedy decoding is deterministic and a token's logits are bitwise the same at
// any batch size, thread count and SIMD level, so these MALs are fixed numbers for a given
// checkpoint; the floors sit below the values measured when the checkpoint was committed (in the
// comments) so that only a real regression (a broken feature path, a changed head, a bad
// checkpoint) fails. Skipped visibly without SSD_MODEL or SSD_SOURCE_DIR.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "actors/roles/drafter_factory.h"
#include "launch/cli/run_report.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/train/prompt_set.h"

namespace ssd {
namespace {

// Measured on the committed checkpoint (the 4-layer one; tokens / rounds over these 8 prompts):
// 1.575 with the head, 1.219 for the backbone alone (the 2-layer checkpoint before it: 1.536,
// 1.176).
constexpr double kMalFloorHead = 1.45;

struct Setup {
  std::string model, checkpoint, heldout;
};

std::optional<Setup> setup() {
  const char* m = std::getenv("SSD_MODEL");
  const char* src = std::getenv("SSD_SOURCE_DIR");
  if (!m || !src || !std::filesystem::exists(m)) return std::nullopt;
  Setup s{m, std::string(src) + "/models/smollm2-domino/domino.safetensors",
          std::string(src) + "/perf/prompts/distill-heldout.txt"};
  if (!std::filesystem::exists(s.checkpoint)) return std::nullopt;
  return s;
}

// MAL summed over prompts: tokens emitted / verification rounds.
struct Totals {
  int64_t tokens = 0, rounds = 0;
  double mal() const { return rounds ? static_cast<double>(tokens) / rounds : 0; }
};

TEST(TrainedDomino, HeldOutGreedyEqualsArAndKeepsItsAcceptance) {
  const auto st = setup();
  if (!st) GTEST_SKIP() << "needs SSD_MODEL (launch/fetch-model.sh), SSD_SOURCE_DIR and the "
                           "committed models/smollm2-domino/domino.safetensors";
  // The first 8 held-out prompts, 48 tokens each, k = 7 (block 8); AR once per prompt.
  ModelSession s(SessionOptions{st->model, 2, 1024});
  const ChatTemplate tmpl = ChatTemplate::from_spec(s.tokenizer().spec());
  const std::vector<std::string> prompts = read_prompt_file(st->heldout, 8);
  const DrafterSpec spec = parse_drafter_spec("domino:" + st->checkpoint);
  auto with_head = make_drafter(spec, s, DrafterOptions{.domino_head = true});
  auto backbone = make_drafter(spec, s, DrafterOptions{.domino_head = false});
  LocalTarget target(s.model(), s.kv());
  Totals on, off;
  for (const std::string& p : prompts) {
    const ChatMessage m{"user", p};
    GenerationRequest req;
    req.prompt = s.tokenizer().encode(tmpl.render({&m, 1}, true), true, true);
    req.max_new_tokens = 48;
    req.stop_ids = s.tokenizer().spec().eog_ids;
    const RunReport ar = run_request(target, nullptr, req, {});
    for (auto [d, t] : {std::pair{with_head.get(), &on}, std::pair{backbone.get(), &off}}) {
      const RunReport sd = run_request(target, d, req, SdOptions{7, 1});
      EXPECT_EQ(sd.gen.tokens, ar.gen.tokens) << "greedy SD != AR on held-out prompt: " << p;
      t->tokens += static_cast<int64_t>(sd.gen.tokens.size());
      t->rounds += sd.sd.rounds;
    }
  }
  std::printf("trained Domino, 8 held-out prompts x 48 tokens, k=7: MAL %.3f with the head, "
              "%.3f backbone alone\n", on.mal(), off.mal());
  EXPECT_GE(on.mal(), kMalFloorHead) << "the committed drafter's acceptance regressed";
  EXPECT_GT(on.mal(), off.mal()) << "the Domino head no longer adds to the backbone";
}

}  // namespace
}  // namespace ssd
