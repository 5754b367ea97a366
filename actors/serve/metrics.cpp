#include "actors/serve/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace ssd {
namespace {

const std::vector<double> kLatencyBounds = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                            0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0,
                                            20.0,  40.0,  80.0};
// 0, 1, .., k: one bucket per speculation length.
std::vector<double> length_bounds(int32_t k) {
  std::vector<double> b;
  for (int32_t i = 0; i <= k; ++i) b.push_back(i);
  return b;
}

const std::vector<double> kTokenBounds = {0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04,
                                          0.05,  0.075,  0.1,   0.15, 0.2,   0.3,  0.4,  0.5,
                                          0.75,  1.0,    2.5};

void header(std::string& out, const std::string& name, const std::string& help,
            const char* type) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

template <class T>
void sample(std::string& out, const std::string& name, const std::string& help, const char* type,
            const std::string& labels, T value) {
  header(out, name, help, type);
  out += fmt::format("{}{{{}}} {}\n", name, labels, value);
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  counts_[i]++;
  sum_ += v;
  count_++;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& help,
                      const std::string& labels) const {
  header(out, name, help, "histogram");
  int64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, bounds_[i], cum);
  }
  cum += counts_.back();
  out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels, cum);
  out += fmt::format("{}_sum{{{}}} {}\n", name, labels, sum_);
  out += fmt::format("{}_count{{{}}} {}\n", name, labels, count_);
}

ServeMetrics::ServeMetrics(std::string model, int32_t k)
    : labels_(fmt::format("model_name=\"{}\"", model)),
      accepted_per_pos_(static_cast<size_t>(std::max(k, 0)), 0),
      ttft_(kLatencyBounds),
      tpot_(kTokenBounds),
      e2e_(kLatencyBounds),
      chosen_k_(length_bounds(std::max(k, 0))) {
  for (const char* r : {"stop", "length", "abort", "error"}) finished_.emplace_back(r, 0);
}

void ServeMetrics::add_batch_round(int64_t sequences) {
  std::lock_guard lk(mu_);
  rounds_++;
  sequence_rounds_ += sequences;
}

void ServeMetrics::add_round(int64_t draft_tokens, int64_t accepted) {
  std::lock_guard lk(mu_);
  if (draft_tokens == 0) return;
  drafts_++;
  draft_tokens_ += draft_tokens;
  accepted_ += accepted;
  for (int64_t j = 0; j < accepted && j < static_cast<int64_t>(accepted_per_pos_.size()); ++j)
    accepted_per_pos_[j]++;
}

void ServeMetrics::add_chosen_length(int32_t k) {
  std::lock_guard lk(mu_);
  chosen_k_.observe(k);
}

void ServeMetrics::add_speculations(int64_t hits, int64_t misses, double target_wait_s) {
  std::lock_guard lk(mu_);
  hits_ += hits;
  misses_ += misses;
  target_wait_s_ += target_wait_s;
}

void ServeMetrics::add_ahead(int64_t pushed, int64_t leader_drafted) {
  std::lock_guard lk(mu_);
  pushed_ += pushed;
  leader_drafted_ += leader_drafted;
}

void ServeMetrics::add_request(int64_t prompt_tokens, int64_t completion_tokens, double ttft_s,
                               double e2e_s, const std::string& finish_reason) {
  std::lock_guard lk(mu_);
  prompt_tokens_ += prompt_tokens;
  generation_tokens_ += completion_tokens;
  for (auto& [reason, n] : finished_)
    if (reason == finish_reason) n++;
  if (completion_tokens > 0) ttft_.observe(ttft_s);
  if (completion_tokens > 1) tpot_.observe((e2e_s - ttft_s) / double(completion_tokens - 1));
  e2e_.observe(e2e_s);
}

void ServeMetrics::set_load(int64_t waiting, int64_t running) {
  std::lock_guard lk(mu_);
  waiting_ = waiting;
  running_ = running;
}

void ServeMetrics::set_drafter_lost(int rank) {
  std::lock_guard lk(mu_);
  if (lost_rank_ < 0) lost_rank_ = rank;
}

void ServeMetrics::add_rejected() {
  std::lock_guard lk(mu_);
  rejected_++;
}

std::string ServeMetrics::prometheus_text() const {
  std::lock_guard lk(mu_);
  std::string o;
  const std::string& l = labels_;
  sample(o, "ssd:num_requests_running", "Requests in the running batch.", "gauge", l, running_);
  sample(o, "ssd:num_requests_waiting", "Requests queued for the batch.", "gauge", l, waiting_);
  sample(o, "ssd:num_requests_rejected_total", "Requests refused with 503 (queue full, draining).",
         "counter", l, rejected_);
  sample(o, "ssd:rounds_total", "Engine rounds (one target forward each).", "counter", l,
         rounds_);
  sample(o, "ssd:sequence_rounds_total",
         "Sequences decoded over all rounds (/ rounds = the mean running batch).", "counter", l,
         sequence_rounds_);
  sample(o, "ssd:prompt_tokens_total", "Prompt tokens of finished requests.", "counter", l,
         prompt_tokens_);
  sample(o, "ssd:generation_tokens_total", "Generated tokens of finished requests.", "counter", l,
         generation_tokens_);
  header(o, "ssd:request_success_total", "Finished requests by finish reason.", "counter");
  for (const auto& [reason, n] : finished_)
    o += fmt::format("ssd:request_success_total{{{},finished_reason=\"{}\"}} {}\n", l, reason, n);
  sample(o, "ssd:spec_decode_num_drafts_total", "Verified drafts (sequence-rounds with a draft).",
         "counter", l, drafts_);
  sample(o, "ssd:spec_decode_num_draft_tokens_total", "Draft tokens verified.", "counter", l,
         draft_tokens_);
  sample(o, "ssd:spec_decode_num_accepted_tokens_total", "Draft tokens accepted.", "counter", l,
         accepted_);
  header(o, "ssd:spec_decode_num_accepted_tokens_per_pos_total",
         "Drafts whose draft position i was accepted.", "counter");
  for (size_t j = 0; j < accepted_per_pos_.size(); ++j)
    o += fmt::format("ssd:spec_decode_num_accepted_tokens_per_pos_total{{{},position=\"{}\"}} {}\n",
                     l, j, accepted_per_pos_[j]);
  sample(o, "ssd:spec_decode_cache_hits_total",
         "SSD: speculations answered from the pre-speculation cache.", "counter", l, hits_);
  sample(o, "ssd:spec_decode_cache_misses_total",
         "SSD: speculations drafted after the outcome (fallback).", "counter", l, misses_);
  sample(o, "ssd:spec_decode_cache_hit_rate", "SSD: hits / (hits + misses) so far.", "gauge", l,
         hits_ + misses_ ? double(hits_) / double(hits_ + misses_) : 0.0);
  sample(o, "ssd:spec_decode_target_wait_seconds_total",
         "Time the target leader waited for the drafter's answer.", "counter", l, target_wait_s_);
  sample(o, "ssd:spec_decode_pushed_hits_total",
         "SSD: cache hits the target leader found in the drafter's pushed pre-speculation and "
         "verified without waiting for its answer.",
         "counter", l, pushed_);
  sample(o, "ssd:spec_decode_leader_drafted_misses_total",
         "SSD, --miss-at leader: misses the target leader drafted itself with its copy of the "
         "drafter's lookup, without waiting for its answer.",
         "counter", l, leader_drafted_);
  header(o, "ssd:drafter_lost",
         "1 once a drafter rank was lost (label rank): the target decodes alone since, its "
         "output unchanged, slower.",
         "gauge");
  o += lost_rank_ < 0 ? fmt::format("ssd:drafter_lost{{{}}} 0\n", l)
                      : fmt::format("ssd:drafter_lost{{{},rank=\"{}\"}} 1\n", l, lost_rank_);
  if (!accepted_per_pos_.empty())
    chosen_k_.write(o, "ssd:spec_length_chosen",
                    "Speculation length chosen per sequence-round (--k auto: per sequence and "
                    "round; a fixed --k: K, less for a request's last tokens).",
                    l);
  ttft_.write(o, "ssd:time_to_first_token_seconds", "Time from arrival to the first token.", l);
  tpot_.write(o, "ssd:time_per_output_token_seconds",
              "Per request: (end - first token) / (output tokens - 1).", l);
  e2e_.write(o, "ssd:e2e_request_latency_seconds", "Time from arrival to the last token.", l);
  return o;
}

}  // namespace ssd
