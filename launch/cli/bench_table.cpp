#include "launch/cli/bench_table.h"

#include <fmt/format.h>

namespace ssd {

void BenchRow::add(const BenchRow& o) {
  tokens += o.tokens;
  after_first += o.after_first;
  rounds += o.rounds;
  accepted += o.accepted;
  decode_s += o.decode_s;
  draft_s += o.draft_s;
  verify_s += o.verify_s;
  exact += o.exact;
  compared += o.compared;
  add_chosen_k(o.chosen_k);
  if (o.split) {
    split = true;
    fig.add(o.fig);
  }
}

void BenchRow::add_chosen_k(const std::vector<int64_t>& hist) {
  if (chosen_k.size() < hist.size()) chosen_k.resize(hist.size(), 0);
  for (size_t c = 0; c < hist.size(); ++c) chosen_k[c] += hist[c];
}

BenchRow& BenchTable::row(const std::string& mode, const std::string& drafter, int32_t k,
                          bool auto_k) {
  for (auto& r : rows_)
    if (r.mode == mode && r.drafter == drafter && r.k == k && r.auto_k == auto_k) return r;
  rows_.push_back(BenchRow{mode, drafter, k, auto_k});
  return rows_.back();
}

void BenchTable::merge(const BenchTable& o) {
  for (const BenchRow& r : o.rows_) row(r.mode, r.drafter, r.k, r.auto_k).add(r);
}

double BenchTable::ar_tps() const {
  for (const auto& r : rows_)
    if (r.mode == "ar") return r.tps();
  return 0;
}

std::string BenchTable::markdown() const {
  const double ar = ar_tps();
  std::string md = fmt::format(
      "| mode | drafter | k | mean acceptance length | decode tok/s | vs AR | draft s | verify s | "
      "greedy == AR | hit rate | target wait s |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& r : rows_)
    md += fmt::format(
        "| {} | {} | {} | {:.2f} | {:.1f} | {:.2f}x | {:.2f} | {:.2f} | {} | {} | {} |\n", r.mode,
        r.mode == "ar" ? "-" : r.drafter, r.mode == "ar" ? "-" : r.k_text(), r.mal(),
        r.tps(), ar > 0 ? r.tps() / ar : 0, r.draft_s, r.verify_s,
        r.mode == "ar" || r.compared == 0 ? std::string("-")
                                          : fmt::format("{}/{}", r.exact, r.compared),
        r.mode == "ssd" ? r.fig.hit_rate_text() : std::string("-"),
        r.split ? fmt::format("{:.2f}", r.fig.target_wait_s) : std::string("-"));
  for (const auto& r : rows_) {  // the lengths --k auto chose, per configuration
    if (!r.auto_k || r.mode == "ar") continue;
    md += fmt::format("\nchosen k, {} {} k=auto (rounds at k = 0..{}):", r.mode, r.drafter, r.k);
    for (int64_t c : r.chosen_k) md += fmt::format(" {}", c);
  }
  for (const auto& r : rows_) {  // which rounds waited for the drafter's answer
    if (!r.split) continue;
    md += fmt::format("\nrounds, {} {}: {} verified, {} waited for the drafter's answer", r.mode,
                      r.drafter, r.fig.rounds, r.fig.rounds_waited);
    if (r.mode == "ssd")
      md += fmt::format("; sequence-rounds speculated by a pushed hit {}, by the leader {}",
                        r.fig.pushed, r.fig.leader_drafted);
  }
  if (md.back() != '\n') md += "\n";
  return md;
}

nlohmann::json BenchTable::json() const {
  const double ar = ar_tps();
  nlohmann::json summary = nlohmann::json::array();
  for (const auto& r : rows_) {
    summary.push_back({{"mode", r.mode}, {"drafter", r.drafter}, {"k", r.k},
                       {"k_auto", r.auto_k}, {"chosen_k_histogram", r.chosen_k},
                       {"mean_acceptance_length", r.mal()}, {"decode_tokens_per_s", r.tps()},
                       {"decode_s", r.decode_s}, {"tokens_generated", r.tokens},
                       {"tokens_after_first", r.after_first}, {"rounds", r.rounds},
                       {"speedup_vs_ar", ar > 0 ? r.tps() / ar : 0},
                       {"draft_time_s", r.draft_s}, {"verify_time_s", r.verify_s},
                       {"greedy_exact", r.exact}, {"greedy_compared", r.compared}});
    if (!r.split) continue;
    nlohmann::json& e = summary.back();
    e["target_wait_s"] = r.fig.target_wait_s;
    e["bytes_exchanged"] = r.fig.bytes_exchanged;
    e["drafter_busy_s"] = r.fig.drafter.busy_s;
    e["decode_steps"] = r.fig.decode_steps;
    e["rounds"] = r.fig.rounds;
    e["rounds_prespec_off"] = r.fig.rounds_prespec_off;
    e["rounds_waited"] = r.fig.rounds_waited;
    if (r.mode != "ssd") continue;
    e["cache_hit_rate"] = r.fig.hit_rate();
    e["pushed_hits"] = r.fig.pushed;
    e["leader_drafted"] = r.fig.leader_drafted;
    e["mean_acceptance_length_hit"] = r.fig.mean_acceptance_length_hit();
    e["mean_acceptance_length_miss"] = r.fig.mean_acceptance_length_miss();
    e["fan_out"] = r.fig.drafter.fan_out_after_hit;
    e["fan_out_after_miss"] = r.fig.drafter.fan_out_after_miss;
    e["critical_batch"] = r.fig.drafter.critical_batch;
    e["branches_planned"] = r.fig.drafter.branches_planned;
    e["branches_cached"] = r.fig.drafter.branches_cached;
    e["prespeculations_cut"] = r.fig.drafter.prespec_cut;
    e["outcome_predicted_rate"] = r.fig.predicted_rate();
  }
  return summary;
}

std::string category_matrix(const std::vector<std::string>& names,
                            const std::vector<BenchTable>& tables) {
  std::vector<const BenchRow*> configs;  // the non-AR configurations, in first-use order
  BenchTable all;
  for (const auto& t : tables) all.merge(t);
  for (const auto& r : all.rows())
    if (r.mode != "ar") configs.push_back(&r);
  std::string md = "| category |";
  std::string rule = "|---|";
  for (const BenchRow* c : configs) {
    md += fmt::format(" {} {} k={} MAL | vs AR |", c->mode, c->drafter, c->k_text());
    rule += "---|---|";
  }
  md += "\n" + rule + "\n";
  for (size_t i = 0; i < tables.size(); ++i) {
    md += "| " + names[i] + " |";
    BenchTable t = tables[i];  // row() creates: work on a copy
    const double ar = t.ar_tps();
    for (const BenchRow* c : configs) {
      const BenchRow& r = t.row(c->mode, c->drafter, c->k, c->auto_k);
      md += fmt::format(" {:.2f} | {} |", r.mal(),
                        ar > 0 && r.tps() > 0 ? fmt::format("{:.2f}x", r.tps() / ar) : "-");
    }
    md += "\n";
  }
  return md;
}

}  // namespace ssd
