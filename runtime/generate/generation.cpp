#include "runtime/generate/generation.h"

#include <algorithm>
#include <chrono>

#include "runtime/core/error.h"

namespace ssd {
double monotonic_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::vector<float> gather_features(const ForwardResult& fr, const std::vector<int32_t>& rows) {
  std::vector<float> out;
  if (fr.hidden.empty()) return out;
  out.reserve(rows.size() * fr.hidden.size() * fr.dim);
  for (int32_t r : rows)
    for (const auto& layer : fr.hidden)
      out.insert(out.end(), layer.begin() + r * fr.dim, layer.begin() + (r + 1) * fr.dim);
  return out;
}

PrefillResult prefill(Transformer& model, KvCache& kv, SeqId seq, const std::vector<int32_t>& prompt,
                      int64_t chunk, const std::vector<int32_t>& hidden_layers) {
  PrefillResult r;
  const double t0 = monotonic_seconds();
  const int64_t n = static_cast<int64_t>(prompt.size());
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t end = std::min(n, start + chunk);
    std::vector<int32_t> part(prompt.begin() + start, prompt.begin() + end);
    Batch b = Batch::sequence(seq, part, static_cast<int32_t>(start));
    if (end < n) b.logits_rows.clear();  // only the last prompt token's logits are needed
    b.hidden_layers = hidden_layers;
    r.last = model.forward(b, kv);
    if (!hidden_layers.empty()) {
      std::vector<int32_t> rows(part.size());
      for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int32_t>(i);
      const auto f = gather_features(r.last, rows);
      r.features.insert(r.features.end(), f.begin(), f.end());
    }
  }
  r.seconds = monotonic_seconds() - t0;
  return r;
}

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

  PrefillResult pre = prefill(model, kv, seq.id, req.prompt, req.prefill_chunk);
  ForwardResult& fr = pre.last;
  res.prefill_s = pre.seconds;

  const double t1 = monotonic_seconds();
  int32_t pos = static_cast<int32_t>(res.prompt_tokens);
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
  res.decode_s = monotonic_seconds() - t1;
  return res;
}

}  // namespace ssd
