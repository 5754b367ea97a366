#include "launch/cli/run_report.h"

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
  if (mode != "ar")
    s += fmt::format(" | {} {} k={}: {} rounds, mean acceptance length {:.2f}, draft {:.3f} s, verify {:.3f} s",
                     mode, drafter, k_text(), sd.rounds, sd.mean_acceptance_length(), sd.draft_s, sd.verify_s);
  if (split) {
    const DrafterStatsMsg& d = split_figures.drafter;
    s += fmt::format(" | target waited {:.3f} s, drafter busy {:.3f} s, {} bytes exchanged",
                     split_figures.target_wait_s, d.busy_s, split_figures.bytes_exchanged);
    if (mode == "ssd" && split_figures.rounds_prespec_off > 0)
      s += fmt::format(", pre-speculation off in {} rounds (measured not to pay)",
                       split_figures.rounds_prespec_off);
    if (split_figures.decode_steps > 0)
      s += fmt::format(", {} decode steps (k = 0: no speculation, no wait)",
                       split_figures.decode_steps);
    if (mode == "ssd")
      s += fmt::format(" | cache hit rate {} (accept length {:.2f} after hits, {:.2f} after "
                       "misses)",
                       split_figures.hit_rate_text(), split_figures.mean_acceptance_length_hit(),
                       split_figures.mean_acceptance_length_miss());
    if (mode == "ssd" && d.prespec_cut > 0)
      s += fmt::format(" | {} of {} planned branches drafted in time, {} pre-speculations cut",
                       d.branches_cached, d.branches_planned, d.prespec_cut);
  }
  s += fmt::format(" | stop: {}", gen.stopped_by_eog ? "end-of-generation token" : "token budget");
  if (drafter_loss)
    s += fmt::format(" | drafter rank {} lost {}: {} after it", drafter_loss->rank,
                     drafter_loss->round >= 0 ? fmt::format("in round {}", drafter_loss->round)
                                              : std::string("outside the rounds"),
                     drafter_loss->fallback);
  return s;
}

namespace {

// One bar per entry, the longest 40 characters.
std::string histogram_text(const std::vector<int64_t>& h) {
  std::string s;
  if (h.empty()) return s;
  const int64_t peak = std::max<int64_t>(1, *std::max_element(h.begin(), h.end()));
  for (size_t a = 0; a < h.size(); ++a) {
    const int bar = static_cast<int>(40.0 * h[a] / peak + 0.5);
    s += fmt::format("  {:>2} | {:<40} {}\n", a, std::string(bar, '#'), h[a]);
  }
  return s;
}

}  // namespace

std::string RunReport::k_text() const {
  return auto_k ? fmt::format("auto<={}", k) : std::to_string(k);
}

std::string RunReport::sd_summary() const {
  if (mode == "ar" || sd.rounds == 0) return {};
  std::string s = "acceptance rate per draft position:";
  for (double r : sd.acceptance_rate_per_position()) s += fmt::format(" {:.2f}", r);
  s += "\naccepted tokens per round (histogram):\n" + histogram_text(sd.accept_hist);
  if (auto_k)
    s += "chosen speculation length k per round (histogram, --k auto):\n" +
         histogram_text(sd.chosen_k_hist);
  return s;
}

nlohmann::json RunReport::to_json() const {
  nlohmann::json j;
  j["mode"] = mode;
  j["drafter"] = mode != "ar" ? nlohmann::json(drafter) : nlohmann::json(nullptr);
  j["k"] = k;
  j["k_auto"] = auto_k;
  j["chosen_k_histogram"] = sd.chosen_k_hist;
  j["prompt_tokens"] = gen.prompt_tokens;
  j["tokens_generated"] = gen.tokens.size();
  j["prefill_s"] = gen.prefill_s;
  j["decode_s"] = gen.decode_s;
  j["prefill_tokens_per_s"] = prefill_tokens_per_s();
  j["decode_tokens_per_s"] = decode_tokens_per_s();
  j["drafter_loss"] = drafter_loss ? drafter_loss->to_json() : nlohmann::json(nullptr);
  j["stop_reason"] = gen.stopped_by_eog ? "eog" : "length";
  j["rounds"] = mode != "ar" ? sd.rounds : gen.forwards + 1;
  j["mean_acceptance_length"] = mean_acceptance_length();
  j["acceptance_rate_per_position"] = sd.acceptance_rate_per_position();
  j["accepted_length_histogram"] = sd.accept_hist;
  j["draft_time_s"] = sd.draft_s;
  j["verify_time_s"] = sd.verify_s;
  j["output_token_ids"] = gen.tokens;
  if (split) {
    const DrafterStatsMsg& d = split_figures.drafter;
    j["target_wait_s"] = split_figures.target_wait_s;
    j["drafter_busy_s"] = d.busy_s;
    j["bytes_exchanged"] = split_figures.bytes_exchanged;
    j["decode_steps"] = split_figures.decode_steps;
    j["rounds_prespec_off"] = split_figures.rounds_prespec_off;
    j["rounds_waited"] = split_figures.rounds_waited;
    if (mode == "ssd") {
      j["cache_hit_rate"] = split_figures.hit_rate();
      j["cache_hits"] = split_figures.hits;
      j["pushed_hits"] = split_figures.pushed;
      j["leader_drafted"] = split_figures.leader_drafted;
      j["cache_misses"] = split_figures.misses;
      j["hits_per_k"] = d.hits_at_k;
      j["outcomes_per_k"] = d.outcomes_at_k;
      j["mean_acceptance_length_hit"] = split_figures.mean_acceptance_length_hit();
      j["mean_acceptance_length_miss"] = split_figures.mean_acceptance_length_miss();
      j["fan_out"] = d.fan_out_after_hit;
      j["fan_out_after_miss"] = d.fan_out_after_miss;
      j["fallback_primary"] = d.fallback_primary;
      j["fallback_backup"] = d.fallback_backup;
      j["critical_batch"] = d.critical_batch;
      j["prespeculated_branches"] = d.branches;
      j["prespeculation_s"] = d.prespec_s;
      j["branches_planned"] = d.branches_planned;
      j["branches_cached"] = d.branches_cached;
      j["prespeculations_cut"] = d.prespec_cut;
      j["outcome_predicted_rate"] = split_figures.predicted_rate();
    }
  }
  return j;
}

RunReport run_request(TargetModel& target, Drafter* drafter, const GenerationRequest& req,
                      const SdOptions& sd, const TokenCallback& on_token) {
  RunReport r;
  if (!drafter) {
    r.mode = "ar";
    r.gen = generate_ar(target, req, on_token);
    return r;
  }
  r.mode = "sd";
  r.drafter = drafter->name();
  r.k = sd.k;
  r.auto_k = sd.auto_k;
  SdResult res = generate_sd(target, *drafter, req, sd, on_token);
  r.gen = std::move(res.gen);
  r.sd = std::move(res.stats);
  return r;
}

RunReport run_remote_request(RemoteDecoder& remote, const std::string& mode,
                             const std::string& drafter, const GenerationRequest& req, int32_t k,
                             bool auto_k, const TokenCallback& on_token) {
  RunReport r;
  r.mode = mode;
  r.drafter = drafter;
  r.k = k;
  r.auto_k = auto_k;
  r.split = true;
  const DrafterStatsMsg before = remote.drafter_stats();
  RemoteDecodeResult res = remote.run({&req, 1}, mode == "ssd", [&](size_t, int32_t tok) {
    return on_token ? on_token(tok) : true;
  });
  r.gen = std::move(res.gen[0]);
  r.sd = std::move(res.sd[0]);
  r.split_figures = res.split;
  r.split_figures.drafter = since(remote.drafter_stats(), before);
  r.drafter_loss = remote.loss();
  return r;
}

}  // namespace ssd
