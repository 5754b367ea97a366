// Greedy SD == AR, token for token, on the real default model (env SSD_MODEL; skipped visibly
// without it), for every drafter kind built through the same factory the CLI uses, several K,
// and varied prompts (chat, code, math, JSON). The Domino checkpoint is random (a trained one is
// a later issue): exactness must hold whatever the drafter proposes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "actors/roles/drafter_factory.h"
#include "launch/cli/run_report.h"
#include "runtime/core/error.h"
#include "runtime/drafters/domino/domino_config.h"
#include "runtime/tokenizer/chat_template.h"
#include "tests/support/domino_writer.h"
#include "tests/support/temp_dir.h"

namespace ssd {
namespace {

std::string model_path() {
  const char* p = std::getenv("SSD_MODEL");
  return p && std::filesystem::exists(p) ? p : "";
}

// A small random Domino checkpoint shaped for the real target (d 576, vocab 49152).
std::string write_real_domino(const ModelConfig& target, const std::string& path) {
  test::DominoSpec spec = test::tiny_domino_spec();
  spec.cfg.n_layers = 1;
  spec.cfg.n_heads = 9;
  spec.cfg.n_kv_heads = 3;
  spec.cfg.head_dim = 64;
  spec.cfg.ffn_dim = 256;
  spec.cfg.target_layers = {10, 20};
  spec.cfg.gru_dim = 32;
  spec.cfg.rank = 16;
  spec.cfg.target_dim = target.dim;
  spec.cfg.target_vocab = target.vocab;
  spec.cfg.rope_theta = target.rope_theta;
  spec.type = DType::BF16;
  return test::write_domino(spec, path);
}

TEST(RealModelSd, GreedyOutputEqualsArForEveryDrafterKind) {
  const std::string model = model_path();
  if (model.empty()) GTEST_SKIP() << "SSD_MODEL is not set or missing (launch/fetch-model.sh)";
  ModelSession s(SessionOptions{model, 2, 512});
  test::TempDir tmp;
  const std::string domino = write_real_domino(s.file().config(), tmp.file("domino.safetensors"));
  const std::vector<std::string> drafters = {"ngram", "suffix", "model:" + model, "early-exit:8",
                                             "oracle:0.7", "domino:" + domino};
  const std::vector<std::string> prompts = {
      "Tell me about the moon.", "Write a Python function to add two numbers.",
      "What is 15 + 27?", "Give a JSON object with keys a and b."};
  const ChatTemplate tmpl = ChatTemplate::from_spec(s.tokenizer().spec());
  const std::vector<int32_t>& stops = s.tokenizer().spec().eog_ids;

  LocalTarget target(s.model(), s.kv());
  for (size_t p = 0; p < prompts.size(); ++p) {
    const ChatMessage m{"user", prompts[p]};
    GenerationRequest req;
    req.prompt = s.tokenizer().encode(tmpl.render({&m, 1}, true), true, true);
    req.max_new_tokens = 16;
    req.stop_ids = stops;
    const RunReport ar = run_request(target, nullptr, req, {});
    ASSERT_FALSE(ar.gen.tokens.empty());
    for (const auto& spec : drafters) {
      auto d = make_drafter(parse_drafter_spec(spec), s, DrafterOptions{});
      for (const SdOptions o : {SdOptions{2, 1}, SdOptions{5, 1}, SdOptions{.k = 5, .auto_k = true}}) {
        const RunReport sd = run_request(target, d.get(), req, o);
        EXPECT_EQ(sd.gen.tokens, ar.gen.tokens)
            << spec << " k=" << sd.k_text() << " prompt " << p;
        EXPECT_GE(sd.sd.rounds, 1);
      }
    }
  }
  EXPECT_EQ(s.kv().pages_in_use(), 0) << "every run releases its sequence";
}

TEST(RealModelSd, FactoryRefusesImpossibleDrafters) {
  const std::string model = model_path();
  if (model.empty()) GTEST_SKIP() << "SSD_MODEL is not set or missing (launch/fetch-model.sh)";
  ModelSession s(SessionOptions{model, 1, 256});
  EXPECT_THROW(make_drafter(parse_drafter_spec("early-exit:31"), s, {}), Error);  // 30 layers
  EXPECT_THROW(make_drafter(parse_drafter_spec("oracle:1.5"), s, {}), Error);
  EXPECT_THROW(make_drafter(parse_drafter_spec("model:/nonexistent.gguf"), s, {}), Error);
  EXPECT_THROW(parse_drafter_spec("medusa"), Error);
  EXPECT_THROW(parse_drafter_spec("suffix:3"), Error);
  EXPECT_THROW(
      make_drafter(parse_drafter_spec("ngram"), s, DrafterOptions{.online_learning = true}), Error);
  test::TempDir tmp;
  auto cfg = s.file().config();
  const std::string bad = write_real_domino(cfg, tmp.file("d.safetensors"));
  // A Domino checkpoint for a deeper target: layer 40 does not exist in the 30-layer target.
  test::DominoSpec spec = test::tiny_domino_spec();
  spec.cfg.target_layers = {40};
  spec.cfg.target_dim = cfg.dim;
  spec.cfg.target_vocab = cfg.vocab;
  spec.cfg.n_heads = 9;
  spec.cfg.n_kv_heads = 3;
  spec.cfg.n_layers = 1;
  spec.cfg.gru_dim = 8;
  spec.cfg.rank = 4;
  spec.cfg.ffn_dim = 64;
  const std::string deep = test::write_domino(spec, tmp.file("deep.safetensors"));
  try {
    make_drafter(parse_drafter_spec("domino:" + deep), s, {});
    FAIL() << "a Domino checkpoint referencing target layer 40 must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("40"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(make_drafter(parse_drafter_spec("domino:" + bad), s, {}));
}

}  // namespace
}  // namespace ssd
