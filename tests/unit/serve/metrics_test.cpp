// The Prometheus text of ServeMetrics: counters add up, per-position acceptance counts drafts that
// reached each position, histograms are cumulative with +Inf equal to the count.
#include <gtest/gtest.h>

#include "actors/serve/metrics.h"
#include "tests/unit/serve/serve_fixture.h"

namespace ssd {
namespace {

using test::metric;

TEST(ServeMetrics, SpecDecodeCounters) {
  ServeMetrics m("tiny", 3);
  m.add_round(3, 2);
  m.add_round(3, 0);
  m.add_round(2, 2);
  m.add_round(0, 0);  // an AR step: not a draft
  m.add_speculations(3, 1, 0.25);
  m.add_ahead(2, 1);
  m.add_ahead(0, 3);
  const std::string t = m.prometheus_text();
  EXPECT_EQ(metric(t, "ssd:spec_decode_num_drafts_total"), 3);
  EXPECT_EQ(metric(t, "ssd:spec_decode_num_draft_tokens_total"), 8);
  EXPECT_EQ(metric(t, "ssd:spec_decode_num_accepted_tokens_total"), 4);
  EXPECT_EQ(metric(t, "ssd:spec_decode_num_accepted_tokens_per_pos_total", "position=\"0\""), 2);
  EXPECT_EQ(metric(t, "ssd:spec_decode_num_accepted_tokens_per_pos_total", "position=\"1\""), 2);
  EXPECT_EQ(metric(t, "ssd:spec_decode_num_accepted_tokens_per_pos_total", "position=\"2\""), 0);
  EXPECT_DOUBLE_EQ(metric(t, "ssd:spec_decode_cache_hit_rate"), 0.75);
  EXPECT_DOUBLE_EQ(metric(t, "ssd:spec_decode_target_wait_seconds_total"), 0.25);
  EXPECT_NE(t.find("# TYPE ssd:spec_decode_num_drafts_total counter"), std::string::npos);
  // The next speculations the leader did not wait for.
  EXPECT_EQ(metric(t, "ssd:spec_decode_pushed_hits_total"), 2);
  EXPECT_EQ(metric(t, "ssd:spec_decode_leader_drafted_misses_total"), 4);
  for (const char* name :
       {"ssd:spec_decode_pushed_hits_total", "ssd:spec_decode_leader_drafted_misses_total"}) {
    EXPECT_NE(t.find(std::string("# TYPE ") + name + " counter"), std::string::npos) << name;
    EXPECT_NE(t.find(std::string("# HELP ") + name + " "), std::string::npos) << name;
  }
}

TEST(ServeMetrics, ChosenSpeculationLengthHistogram) {
  ServeMetrics m("tiny", 4);
  for (int32_t k : {4, 1, 4, 0, 2}) m.add_chosen_length(k);
  const std::string t = m.prometheus_text();
  EXPECT_NE(t.find("# TYPE ssd:spec_length_chosen histogram"), std::string::npos);
  EXPECT_EQ(metric(t, "ssd:spec_length_chosen_bucket", "le=\"0\""), 1);
  EXPECT_EQ(metric(t, "ssd:spec_length_chosen_bucket", "le=\"1\""), 2);
  EXPECT_EQ(metric(t, "ssd:spec_length_chosen_bucket", "le=\"2\""), 3);
  EXPECT_EQ(metric(t, "ssd:spec_length_chosen_bucket", "le=\"3\""), 3);
  EXPECT_EQ(metric(t, "ssd:spec_length_chosen_bucket", "le=\"4\""), 5);
  EXPECT_EQ(metric(t, "ssd:spec_length_chosen_bucket", "le=\"+Inf\""), 5);
  EXPECT_EQ(metric(t, "ssd:spec_length_chosen_sum"), 11);
  EXPECT_EQ(metric(t, "ssd:spec_length_chosen_count"), 5);
  // AR (K = 0): no speculation, no histogram.
  EXPECT_EQ(metric(ServeMetrics("tiny", 0).prometheus_text(), "ssd:spec_length_chosen_count"), -1);
}

TEST(ServeMetrics, RequestsAndHistograms) {
  ServeMetrics m("tiny", 0);
  m.add_request(10, 5, 0.05, 0.45, "length");  // TPOT (0.45 - 0.05) / 4 = 0.1
  m.add_request(3, 1, 2.0, 2.0, "stop");
  m.add_request(3, 0, 0, 30.0, "abort");
  m.set_load(2, 4);
  const std::string t = m.prometheus_text();
  EXPECT_EQ(metric(t, "ssd:num_requests_waiting"), 2);
  EXPECT_EQ(metric(t, "ssd:num_requests_running"), 4);
  EXPECT_EQ(metric(t, "ssd:prompt_tokens_total"), 16);
  EXPECT_EQ(metric(t, "ssd:generation_tokens_total"), 6);
  EXPECT_EQ(metric(t, "ssd:request_success_total", "finished_reason=\"abort\""), 1);
  EXPECT_EQ(metric(t, "ssd:time_to_first_token_seconds_count"), 2);  // requests with a token
  EXPECT_EQ(metric(t, "ssd:time_per_output_token_seconds_count"), 1);
  EXPECT_NEAR(metric(t, "ssd:time_per_output_token_seconds_sum"), 0.1, 1e-12);
  EXPECT_EQ(metric(t, "ssd:e2e_request_latency_seconds_count"), 3);
  EXPECT_EQ(metric(t, "ssd:e2e_request_latency_seconds_bucket", "le=\"0.5\""), 1);
  EXPECT_EQ(metric(t, "ssd:e2e_request_latency_seconds_bucket", "le=\"2.5\""), 2);
  EXPECT_EQ(metric(t, "ssd:e2e_request_latency_seconds_bucket", "le=\"+Inf\""), 3);
}

}  // namespace
}  // namespace ssd
