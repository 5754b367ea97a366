#include "actors/frontend/run_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace ssd {

double RunReport::prefill_tokens_per_s() const {
  return gen.prefill_s > 0 ? gen.prompt_tokens / gen.prefill_s : 0;
}

double RunReport::decode_tokens_per_s() const {
  // The first token comes from the prefill's logits; decode speed counts the ones after it.
  const int64_t after_first = std::max<int64_t>(0, static_cast<int64_t>(gen.tokens.size()) - 1);
  return gen.decode_s > 0 && after_first > 0 ? after_first / gen.decode_s : 0;
}

double RunReport::mean_acceptance_length() const {
  return mode == "ar" ? 1.0 : sd.mean_acceptance_length();
}

std::string RunReport::figures_line() const {
  std::string s = fmt::format(
      "prompt {} tokens, prefill {:.1f} tok/s | generated {} tokens, decode {:.1f} tok/s",
      gen.prompt_tokens, prefill_tokens_per_s(), gen.tokens.size(), decode_tokens_per_s());
  if (mode == "sd")
    s += fmt::format(" | sd {} k={}: {} rounds, mean acceptance length {:.2f}, draft {:.3f} s, verify {:.3f} s",
                     drafter, k, sd.rounds, sd.mean_acceptance_length(), sd.draft_s, sd.verify_s);
  s += fmt::format(" | stop: {}", gen.stopped_by_eog ? "end-of-generation token" : "token budget");
  return s;
}

std::string RunReport::sd_summary() const {
  if (mode != "sd" || sd.rounds == 0) return {};
  std::string s = "acceptance rate per draft position:";
  for (double r : sd.acceptance_rate_per_position()) s += fmt::format(" {:.2f}", r);
  s += "\naccepted tokens per round (histogram):\n";
  const int64_t peak = std::max<int64_t>(1, *std::max_element(sd.accept_hist.begin(), sd.accept_hist.end()));
  for (size_t a = 0; a < sd.accept_hist.size(); ++a) {
    const int bar = static_cast<int>(40.0 * sd.accept_hist[a] / peak + 0.5);
    s += fmt::format("  {:>2} | {:<40} {}\n", a, std::string(bar, '#'), sd.accept_hist[a]);
  }
  return s;
}

nlohmann::json RunReport::to_json() const {
  nlohmann::json j;
  j["mode"] = mode;
  j["drafter"] = mode == "sd" ? nlohmann::json(drafter) : nlohmann::json(nullptr);
  j["k"] = k;
  j["prompt_tokens"] = gen.prompt_tokens;
  j["tokens_generated"] = gen.tokens.size();
  j["prefill_s"] = gen.prefill_s;
  j["decode_s"] = gen.decode_s;
  j["prefill_tokens_per_s"] = prefill_tokens_per_s();
  j["decode_tokens_per_s"] = decode_tokens_per_s();
  j["stop_reason"] = gen.stopped_by_eog ? "eog" : "length";
  j["rounds"] = mode == "sd" ? sd.rounds : gen.forwards + 1;
  j["mean_acceptance_length"] = mean_acceptance_length();
  j["acceptance_rate_per_position"] = sd.acceptance_rate_per_position();
  j["accepted_length_histogram"] = sd.accept_hist;
  j["draft_time_s"] = sd.draft_s;
  j["verify_time_s"] = sd.verify_s;
  j["output_token_ids"] = gen.tokens;
  return j;
}

RunReport run_request(Transformer& target, KvCache& kv, Drafter* drafter,
                      const GenerationRequest& req, const SdOptions& sd,
                      const TokenCallback& on_token) {
  RunReport r;
  if (!drafter) {
    r.mode = "ar";
    r.gen = generate_ar(target, kv, req, on_token);
    return r;
  }
  r.mode = "sd";
  r.drafter = drafter->name();
  r.k = sd.k;
  SdResult res = generate_sd(target, kv, *drafter, req, sd, on_token);
  r.gen = std::move(res.gen);
  r.sd = std::move(res.stats);
  return r;
}

}  // namespace ssd
