// Greedy self-distillation over a prompt set (see distill_generate.h).
#include "runtime/train/distill_generate.h"

#include <algorithm>

#include "runtime/core/error.h"
#include "runtime/generate/generation.h"

namespace ssd {

std::vector<int32_t> default_distill_layers(int64_t n_layers) {
  SSD_CHECK(n_layers >= 1, "a target with {} layers", n_layers);
  std::vector<int32_t> out;
  for (int64_t l : {int64_t{1}, n_layers / 2, n_layers - 3}) {
    const auto c = static_cast<int32_t>(std::clamp<int64_t>(l, 0, n_layers - 1));
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<float> capture_features(TargetModel& target, const std::vector<int32_t>& tokens,
                                    const std::vector<int32_t>& layers, int64_t chunk) {
  SSD_CHECK(!tokens.empty(), "capture_features: no tokens");
  SSD_CHECK(!layers.empty(), "capture_features: no layers");
  TargetSeqs seqs(target);
  const SeqId seq = seqs.create();
  PrefillResult pre = prefill(target, seq, tokens, chunk, layers);
  return std::move(pre.features);  // [L, layers x dim]
}

DistillProgress distill_prompts(TargetModel& target,
                                std::span<const std::vector<int32_t>> prompts,
                                const DistillOptions& opts, DistillWriter& out,
                                const DistillProgressFn& progress) {
  const ModelConfig& cfg = target.config();
  SSD_CHECK(!opts.layers.empty(), "distill: no target layers to capture");
  for (int32_t l : opts.layers)
    SSD_CHECK(l >= 0 && l < cfg.n_layers, "layer {} is outside the model (layers 0..{})", l,
              cfg.n_layers - 1);
  SSD_CHECK(opts.batch >= 1, "distill: batch {} must be at least 1", opts.batch);
  SSD_CHECK(opts.max_new_tokens >= 1, "distill: -n {} must be at least 1", opts.max_new_tokens);
  for (size_t i = 0; i < prompts.size(); ++i)
    SSD_CHECK(!prompts[i].empty(), "distill: prompt {} has no tokens", i);

  DistillProgress p;
  p.total = prompts.size();
  const double t0 = monotonic_seconds();
  const size_t B = static_cast<size_t>(opts.batch);
  for (size_t first = 0; first < prompts.size(); first += B) {
    const size_t last = std::min(prompts.size(), first + B);
    std::vector<GenerationRequest> reqs;
    for (size_t i = first; i < last; ++i) {
      GenerationRequest r;
      r.prompt = prompts[i];
      r.max_new_tokens = opts.max_new_tokens;
      r.sampler = SamplerConfig{};  // temperature 0: greedy
      r.stream = i;
      r.stop_ids = opts.stop_ids;
      r.prefill_chunk = opts.prefill_chunk;
      reqs.push_back(std::move(r));
    }
    const double tg = monotonic_seconds();
    const std::vector<GenerationResult> gen = generate_ar_batch(target, reqs);
    p.generate_s += monotonic_seconds() - tg;

    for (size_t r = 0; r < reqs.size(); ++r) {
      std::vector<int32_t> seq = reqs[r].prompt;
      seq.insert(seq.end(), gen[r].tokens.begin(), gen[r].tokens.end());
      const double tc = monotonic_seconds();
      const std::vector<float> feats =
          capture_features(target, seq, opts.layers, opts.prefill_chunk);  // [L, F]
      p.capture_s += monotonic_seconds() - tc;
      out.add(seq, static_cast<int32_t>(reqs[r].prompt.size()), feats);
      p.prompt_tokens += static_cast<int64_t>(reqs[r].prompt.size());
      p.response_tokens += static_cast<int64_t>(gen[r].tokens.size());
    }
    p.done = last;
    p.seconds = monotonic_seconds() - t0;
    if (progress) progress(p);
  }
  return p;
}

}  // namespace ssd
