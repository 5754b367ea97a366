// The server's figures in the Prometheus text format (GET /metrics), named after vLLM's so that
// dashboards built for it read them: spec-decode counters (drafts, draft tokens, accepted tokens,
// accepted tokens per draft position), the SSD drafter's speculation-cache hits and misses and
// the time the target waited for the drafter, queue length and running requests, and histograms
// of time to first token, time per output token and end-to-end latency. Names with no vLLM
// counterpart: ssd:spec_length_chosen, the histogram of the speculation lengths the length
// policy chose per sequence-round (runtime/spec/spec_length.h; --k auto); ssd:drafter_lost,
// 1 (with the rank) once a drafter rank was lost under recovery mode (docs/faults.md); and
// ssd:spec_decode_pushed_hits_total / ssd:spec_decode_leader_drafted_misses_total, the next
// speculations the leader had without waiting for the drafter's answer (drafter_lead_link.h).
//
// Thread-safe: the engine thread adds, the HTTP threads read (one mutex; every call is short).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace ssd {

// A Prometheus histogram: cumulative counts per upper bound, plus sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Appends the _bucket / _sum / _count lines of `name` (with the TYPE and HELP lines).
  void write(std::string& out, const std::string& name, const std::string& help,
             const std::string& labels) const;
  int64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // [bounds + 1]: per bucket, the last one +Inf (not cumulative)
  double sum_ = 0;
  int64_t count_ = 0;
};

class ServeMetrics {
 public:
  // model: the model_name label; k: draft depth (per-position counters), 0 for AR.
  ServeMetrics(std::string model, int32_t k);

  // One round of the engine over `sequences` running sequences.
  void add_batch_round(int64_t sequences);
  // One sequence-round: `draft_tokens` verified (0: an AR step, not counted as a draft), of them
  // `accepted`.
  void add_round(int64_t draft_tokens, int64_t accepted);
  // One sequence-round's speculation length as the length policy chose it (0..K; --k auto varies
  // it per sequence and round, a fixed --k gives K but for a request's last tokens).
  void add_chosen_length(int32_t k);
  // SSD with drafter ranks: where sequence-rounds' speculations came from, and the time the target
  // leader waited for the drafter's answer.
  void add_speculations(int64_t hits, int64_t misses, double target_wait_s);
  // SSD with drafter ranks: next speculations the target leader had without waiting for the
  // drafter's answer: hits found in its pushed pre-speculation, misses drafted on the leader
  // (--miss-at leader).
  void add_ahead(int64_t pushed, int64_t leader_drafted);
  // A finished request: tokens in and out, its times (seconds), and why it ended
  // (stop | length | abort | error).
  void add_request(int64_t prompt_tokens, int64_t completion_tokens, double ttft_s,
                   double e2e_s, const std::string& finish_reason);
  void set_load(int64_t waiting, int64_t running);
  void add_rejected();  // a request refused with 503 (queue full, draining)
  // A drafter rank was lost (actors/roles/drafter_loss.h): ssd:drafter_lost{rank="N"} 1 from now
  // on (the first loss is kept).
  void set_drafter_lost(int rank);

  std::string prometheus_text() const;

 private:
  mutable std::mutex mu_;
  std::string labels_;  // model_name="..."
  int64_t rounds_ = 0, sequence_rounds_ = 0;
  int64_t drafts_ = 0, draft_tokens_ = 0, accepted_ = 0;
  std::vector<int64_t> accepted_per_pos_;  // [k]
  int64_t hits_ = 0, misses_ = 0;
  double target_wait_s_ = 0;
  int64_t pushed_ = 0, leader_drafted_ = 0;
  int64_t waiting_ = 0, running_ = 0, rejected_ = 0;
  int lost_rank_ = -1;  // the lost drafter rank, -1: none
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  std::vector<std::pair<std::string, int64_t>> finished_;  // by finish reason
  Histogram ttft_, tpot_, e2e_;
  Histogram chosen_k_;  // bounds 0..K; written only when K > 0
};

}  // namespace ssd
