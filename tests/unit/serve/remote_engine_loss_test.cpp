// The server's SSD engine (RemoteEngine) losing a drafter rank under a continue policy
// (actors/roles/drafter_loss.h), in one process over loopback: a scripted drafter lead answers
// the start and rounds 0..2, then falls silent at round 3's outcome while the liveness probe
// says a drafter rank's process is gone (the lead itself, or a secondary drafter rank of a
// 3-rank layout). The engine must record the loss once, naming that rank, in the round it waited
// for; finish the requests in flight and one admitted after the loss with the target's greedy
// tokens (generate_ar_batch's); send the lost drafter nothing more; and say so in /metrics
// (ssd:drafter_lost). Every wait has a 600 s deadline: only the probe can end it in time.
// With the leader's lookup copy (an n-gram primary), held from the start (--miss-at leader) or
// built at the loss from the running sequences' prompts and tokens (--miss-at drafter), every
// round after the loss drafts its speculations with it (the line says so, the draft tokens and
// leader-drafted counts go on growing); when no copy can be built (a recipe with neither lookup)
// the rounds after it offer no tokens at all.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include "actors/serve/remote_engine.h"
#include "runtime/drafters/ngram_drafter.h"
#include "actors/transport/loopback_transport.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/serve/serve_fixture.h"
#include "tests/unit/spec/drafting_fixture.h"

namespace ssd {
namespace {

using namespace std::chrono_literals;
using test::drafting::Engine;

GenerationRequest request(size_t i) {
  GenerationRequest r;
  for (size_t t = 0; t < 4 + i; ++t) r.prompt.push_back(static_cast<int32_t>(3 + 11 * t + i));
  r.max_new_tokens = 20;
  r.stream = i;
  return r;
}

// The drafter lead's script: a two-token chain for every sequence asked for (its length > 0) in
// the answers to StartSeqs and to the outcomes of rounds up to 2; at round 3's outcome it falls
// silent (`silent`), and from then on counts the frames it still gets (`after`) until a
// DrafterShutdown.
void scripted_lead(Transport& link, std::atomic<bool>& silent, std::atomic<int>& after) {
  std::map<int32_t, int32_t> joined;  // JoinSeqs: answered with the next outcome
  for (;;) {
    const Envelope env = link.recv(600s);
    if (env.kind == MsgKind::kDrafterShutdown) return;
    if (silent) {
      ++after;
      continue;
    }
    std::map<int32_t, int32_t> ask;  // sequence -> the length asked of this answer
    int64_t round = 0;
    if (env.kind == MsgKind::kStartSeqs) {
      const StartSeqs m = decode<StartSeqs>(env);
      for (size_t i = 0; i < m.seqs.size(); ++i) ask[m.seqs[i]] = m.first_k.at(i);
    } else if (env.kind == MsgKind::kJoinSeqs) {
      const JoinSeqs m = decode<JoinSeqs>(env);
      for (size_t i = 0; i < m.seqs.size(); ++i) joined[m.seqs[i]] = m.first_k.at(i);
      continue;
    } else if (env.kind == MsgKind::kOutcome) {
      const Outcome m = decode<Outcome>(env);
      round = m.round;
      for (const SeqOutcome& o : m.seqs) ask[o.seq] = o.next_k;
      ask.merge(joined);
      joined.clear();
    } else {
      continue;  // FinishSeqs
    }
    if (round >= 3) {
      silent = true;
      continue;
    }
    SpeculationMsg m;
    m.round = round;
    ProcessedDist q;
    q.tokens = {TokenProb{7, 1.0f}};
    for (const auto& [seq, k] : ask)
      if (k != 0)
        m.seqs.push_back(
            SeqSpeculation{seq, static_cast<uint8_t>(SpecSource::kPrimary), {7, 7}, {q, q}});
    if (!m.seqs.empty()) link.send(env.peer, m);
  }
}

// The leader's lookup copy: none can be built, held from the start, or built at the loss.
enum class Copy { kNone, kFromStart, kAtLoss };

LeaderLookups lookups(Copy copy) {
  auto ngram = [] {
    return std::make_unique<LeaderLookup>(std::make_unique<NgramDrafter>(NgramOptions{}), nullptr);
  };
  switch (copy) {
    case Copy::kNone:
      return {nullptr, [] { return std::make_unique<LeaderLookup>(nullptr, nullptr); }};
    case Copy::kFromStart: return {ngram(), nullptr};
    case Copy::kAtLoss: return {nullptr, ngram};
  }
  return {};
}

// The rank whose process goes, and the leader's lookup copy.
class RemoteEngineLoss : public ::testing::TestWithParam<std::tuple<int, Copy>> {};

TEST_P(RemoteEngineLoss, RequestsInFlightAndAfterFinishWithTheTargetsTokens) {
  const auto [lost, copy] = GetParam();
  const bool with_lookup = copy != Copy::kNone;
  const int world = lost == 1 ? 2 : 3;  // a secondary needs a 3-rank layout
  test::TempDir tmp;
  const std::string path =
      test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::F32), tmp.file("t.gguf"));
  Engine target_engine(path, 1, 4096);
  LocalTarget target(*target_engine.model, *target_engine.kv);
  const std::vector<GenerationRequest> reqs = {request(0), request(1), request(2)};
  const std::vector<GenerationResult> ar = generate_ar_batch(target, reqs);

  LoopbackHub hub(world);
  std::atomic<bool> silent{false};
  std::atomic<int> after{0};
  std::thread lead([&] { scripted_lead(hub.endpoint(1), silent, after); });
  std::string fired = "(not fired)";
  Watchdog dog(0, Role::kTarget, [&](const std::string& m) { fired = m; });
  ServeMetrics metrics("tiny", 3);
  const RankLayout leader = RankLayout::make(world, 0, 1);
  {
    RemoteEngineOptions ro;
    ro.k = 3;
    ro.step_s = 600;
    ro.loss_policy.continue_on_loss = true;
    ro.loss_policy.slice = 10ms;
    ro.loss_policy.ranks = leader.drafter_ranks();
    ro.loss_policy.probe = [&](int rank) {
      return silent && rank == lost ? ProcessState::kGone : ProcessState::kRunning;
    };
    RemoteEngine eng(target, hub.endpoint(0), leader, dog, ro, metrics);
    eng.set_leader_lookups(lookups(copy));
    std::vector<Slot> slots(reqs.size());
    for (size_t i = 0; i < slots.size(); ++i) {
      slots[i].id = static_cast<int64_t>(i + 1);
      slots[i].req = reqs[i];
    }
    std::vector<Slot*> running;
    const auto admit = [&](size_t i) {
      Slot* s = &slots[i];
      eng.admit(std::span<Slot* const>(&s, 1));
      if (s->running) running.push_back(s);
    };
    const auto round = [&] {
      eng.round(running);
      std::erase_if(running, [](Slot* s) { return !s->running; });
    };
    admit(0);  // StartSeqs
    round();
    EXPECT_EQ(test::metric(metrics.prometheus_text(), "ssd:drafter_lost"), 0);
    admit(1);  // JoinSeqs: in flight when the drafter goes
    for (int r = 0; r < 50 && !eng.loss(); ++r) round();
    ASSERT_TRUE(eng.loss().has_value()) << "no loss recorded";
    ASSERT_FALSE(running.empty()) << "the requests ended before the loss";
    EXPECT_EQ(metrics.prometheus_text().find("ssd:drafter_lost{model_name=\"tiny\"} 0"),
              std::string::npos);
    const std::string at_loss = metrics.prometheus_text();
    admit(2);  // after the loss
    for (int r = 0; r < 100 && !running.empty(); ++r) round();
    ASSERT_TRUE(running.empty());
    const DrafterLoss& loss = *eng.loss();
    EXPECT_EQ(loss.rank, lost);
    EXPECT_EQ(loss.round, 3);  // rounds 0..2 were answered
    EXPECT_TRUE(loss.died);
    EXPECT_EQ(loss.cause.rfind("died (its process is gone", 0), 0u) << loss.cause;
    EXPECT_NE(loss.cause.find("while waiting for the speculation of round 3 from the drafter "
                              "(rank 1)"),
              std::string::npos)
        << loss.cause;
    EXPECT_EQ(loss.fallback, with_lookup ? "the leader's n-gram drafts" : "plain decoding");
    EXPECT_TRUE(loss.line().ends_with(with_lookup ? "(output unchanged)"
                                                  : "(output unchanged, slower)"))
        << loss.line();
    // The rounds after the loss: speculations drafted here with the lookup, or none at all.
    const std::string end = metrics.prometheus_text();
    const auto grown = [&](const char* name) {
      return test::metric(end, name) - test::metric(at_loss, name);
    };
    const double drafted_after = grown("ssd:spec_decode_num_draft_tokens_total");
    const double leader_after = grown("ssd:spec_decode_leader_drafted_misses_total");
    if (with_lookup) {
      EXPECT_GT(drafted_after, 0) << "no tokens drafted after the loss";
      EXPECT_GT(leader_after, 0) << "no speculation drafted by the leader after the loss";
    } else {
      EXPECT_EQ(drafted_after, 0) << "plain decoding offers no tokens";
      EXPECT_EQ(leader_after, 0);
    }
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(slots[i].gen.tokens, ar[i].tokens) << "request " << i;
      EXPECT_EQ(slots[i].kv, -1) << "request " << i << " still holds its KV sequence";
    }
    EXPECT_EQ(target_engine.kv->pages_in_use(), 0);
  }
  hub.endpoint(0).send(1, DrafterShutdown{});
  lead.join();
  EXPECT_EQ(after.load(), 0) << "frames sent to the drafter after its loss";
  EXPECT_EQ(fired, "(not fired)");  // the wait's own probe decided, not the watchdog
  const std::string text = metrics.prometheus_text();
  EXPECT_EQ(test::metric(text, "ssd:drafter_lost", fmt::format("rank=\"{}\"", lost)), 1) << text;
  EXPECT_GT(test::metric(text, "ssd:spec_decode_num_draft_tokens_total"), 0);  // before the loss
}

INSTANTIATE_TEST_SUITE_P(LeadOrSecondary, RemoteEngineLoss,
                         ::testing::Combine(::testing::Values(1, 2),
                                            ::testing::Values(Copy::kNone, Copy::kFromStart,
                                                              Copy::kAtLoss)),
                         [](const auto& info) {
                           const Copy c = std::get<1>(info.param);
                           return std::string(std::get<0>(info.param) == 1 ? "Lead"
                                                                           : "Secondary") +
                                  (c == Copy::kNone        ? "PlainDecoding"
                                   : c == Copy::kFromStart ? "LeaderNgram"
                                                           : "LeaderNgramBuiltAtTheLoss");
                         });

}  // namespace
}  // namespace ssd
