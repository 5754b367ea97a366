#include "runtime/generate/generation.h"

#include <algorithm>
#include <chrono>

#include "runtime/core/error.h"

namespace ssd {
namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// Releases a KV sequence on every exit path.
struct SeqGuard {
  KvCache& kv;
  SeqId id;
  ~SeqGuard() {
    if (kv.alive(id)) kv.release(id);
  }
};

}  // namespace

void check_context(const Transformer& model, const KvCache& kv, const GenerationRequest& req) {
  SSD_CHECK(!req.prompt.empty(), "the prompt is empty (no tokens to condition on)");
  SSD_CHECK(req.max_new_tokens >= 0, "-n {} must not be negative", req.max_new_tokens);
  SSD_CHECK(req.prefill_chunk >= 1, "prefill chunk {} must be positive", req.prefill_chunk);
  const int64_t ctx = std::min<int64_t>(model.config().context_length, kv.capacity_tokens());
  const int64_t need = static_cast<int64_t>(req.prompt.size()) + req.max_new_tokens;
  SSD_CHECK(static_cast<int64_t>(req.prompt.size()) < ctx,
            "the prompt has {} tokens, more than the context of {} allows (--ctx-size)",
            req.prompt.size(), ctx);
  SSD_CHECK(need <= ctx,
            "prompt ({} tokens) + -n {} = {} exceeds the context of {} tokens; lower -n or raise "
            "--ctx-size",
            req.prompt.size(), req.max_new_tokens, need, ctx);
  validate(req.sampler);
}

GenerationResult generate_ar(Transformer& model, KvCache& kv, const GenerationRequest& req,
                             const TokenCallback& on_token) {
  check_context(model, kv, req);
  const int32_t vocab = static_cast<int32_t>(model.config().vocab);
  Sampler sampler(req.sampler);
  GenerationResult res;
  res.prompt_tokens = static_cast<int64_t>(req.prompt.size());
  SeqGuard seq{kv, kv.create()};

  // Prefill: all prompt tokens, logits only for the last one.
  const double t0 = now_s();
  ForwardResult fr;
  const int64_t n_prompt = res.prompt_tokens;
  for (int64_t start = 0; start < n_prompt; start += req.prefill_chunk) {
    const int64_t end = std::min(n_prompt, start + req.prefill_chunk);
    std::vector<int32_t> chunk(req.prompt.begin() + start, req.prompt.begin() + end);
    Batch b = Batch::sequence(seq.id, chunk, static_cast<int32_t>(start));
    if (end < n_prompt) b.logits_rows.clear();
    fr = model.forward(b, kv);
  }
  res.prefill_s = now_s() - t0;

  const double t1 = now_s();
  int32_t pos = static_cast<int32_t>(n_prompt);
  for (int64_t i = 0; i < req.max_new_tokens; ++i) {
    const int32_t tok = sampler.sample(fr.logits_row(0), vocab, req.stream, static_cast<uint32_t>(i));
    res.tokens.push_back(tok);
    const bool stop = std::find(req.stop_ids.begin(), req.stop_ids.end(), tok) != req.stop_ids.end();
    if (on_token && !on_token(tok)) break;
    if (stop) {
      res.stopped_by_eog = true;
      break;
    }
    if (i + 1 == req.max_new_tokens) break;
    fr = model.forward(Batch::sequence(seq.id, {tok}, pos++), kv);
    res.forwards++;
  }
  res.decode_s = now_s() - t1;
  return res;
}

}  // namespace ssd
