// The server's SSD engine (RemoteEngine) against a real drafter actor in one process (the leader
// on the test's thread, the drafter actor on another, over the loopback transport: the frames the
// MPI transport carries), with sequences joining and leaving the running batch between rounds:
// a request admitted while others run is announced with JoinSeqs and takes part from the next
// round; one admitted when nothing runs starts a new batch (StartSeqs); one whose client leaves
// is finished mid-run (FinishSeqs). Greedy output must equal AR's token for token, in --mode ssd
// (pre-speculation, with hits from a self-drafting model) and --mode sd, each under a fixed --k
// and --k auto (the leader's length policy: every next length sent with the outcome, StartSeqs
// or JoinSeqs; its warm-up asks K, then 1, which a fixed K never asks of a long request).
//
// What the engine takes ahead of the drafter's answer (actors/roles/drafter_lead_link.h), against
// an n-gram drafter actor (--miss-at leader and drafter; sampled output the same token for token
// whichever rank drafts the misses) and against a scripted drafter lead that
// knows the target's tokens: a pushed hit is verified without an answer (the lead sends none); a
// miss drafted on the leader goes out with the outcome; a sequence that leaves while its pushed
// speculation is held, or while the answer for it is on its way, is dropped cleanly.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "actors/roles/leader_lookup.h"
#include "actors/serve/remote_engine.h"
#include "runtime/drafters/ngram_drafter.h"
#include "tests/unit/serve/engine_fixture.h"
#include "tests/unit/serve/serve_fixture.h"

namespace ssd {
namespace {


class RemoteEngineJoins : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(RemoteEngineJoins, JoiningAndLeavingSequencesKeepGreedyOutputExact) {
  const auto [prespeculate, automatic] = GetParam();
  constexpr size_t kRequests = 5;
  test::EngineCase c(kRequests, 10);

  LoopbackHub hub(2);
  SsdDrafterOptions so;
  so.k = 3;
  so.fan_out.budget = 6;
  test::split::DrafterActorThread actor(hub, *c.drafter, so);
  actor.ready();
  const RankLayout& leader = actor.leader_layout;
  ServeMetrics metrics("tiny", 3);
  {
    RemoteEngineOptions ro;
    ro.k = 3;
    ro.auto_k = automatic;
    ro.prespeculate = prespeculate;
    ro.step_s = 30;
    RemoteEngine eng(c.target, hub.endpoint(0), leader, actor.leader_dog, ro, metrics);
    std::vector<GenerationRequest> reqs = c.reqs;
    reqs.push_back(c.reqs[1]);  // slot 5: request 1 again, a client that leaves mid-run
    test::EngineDriver d(eng, reqs);
    d.admit({0});                                       // an idle engine: StartSeqs
    d.round();
    d.round();
    ASSERT_TRUE(d.slots[0].running) << "request 0 ended before the others could join it";
    const std::string early = metrics.prometheus_text();  // request 0's lengths: K, then 1 or K
    EXPECT_EQ(test::metric(early, "ssd:spec_length_chosen_count"), 2);
    EXPECT_EQ(test::metric(early, "ssd:spec_length_chosen_bucket", "le=\"1\""), automatic ? 1 : 0);
    d.admit({1, 5});                                    // join a running batch: JoinSeqs
    d.round();
    d.round();
    ASSERT_TRUE(d.slots[5].running && d.slots[5].gen.tokens.size() > 1);
    d.leave(5);                                         // its client leaves mid-run: FinishSeqs
    d.admit({2});
    for (int r = 0; r < 100 && !d.running.empty(); ++r) d.round();
    ASSERT_TRUE(d.running.empty());
    d.admit({3, 4});                                    // idle again: a new batch
    for (int r = 0; r < 100 && !d.running.empty(); ++r) {
      d.round();
      if (r == 1) d.admit({});                          // an empty boundary changes nothing
    }
    ASSERT_TRUE(d.running.empty());
    for (size_t i = 0; i < kRequests; ++i) {
      EXPECT_EQ(d.slots[i].gen.tokens, c.ar[i].tokens) << "request " << i;
      EXPECT_EQ(d.slots[i].kv, -1) << "request " << i << " still holds its KV sequence";
    }
    // Every sequence, the one that left too, gave its pages back.
    EXPECT_EQ(c.tiny.engine->kv->pages_in_use(), 0);
    hub.endpoint(0).send(leader.drafter_lead(), DrafterShutdown{});
  }
  actor.join();
  const std::string text = metrics.prometheus_text();
  EXPECT_GT(test::metric(text, "ssd:spec_decode_num_accepted_tokens_total"), 0);
  const double chosen = test::metric(text, "ssd:spec_length_chosen_count");
  EXPECT_GT(chosen, 0);
  EXPECT_EQ(test::metric(text, "ssd:spec_length_chosen_bucket", "le=\"3\""), chosen);
  if (prespeculate) {  // the self-draft agrees with the target: pre-speculation hits
    EXPECT_GT(test::metric(text, "ssd:spec_decode_cache_hits_total"), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, RemoteEngineJoins,
                         ::testing::Combine(::testing::Values(true, false),
                                            ::testing::Values(true, false)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "ssd" : "sd") +
                                  (std::get<1>(info.param) ? "_auto" : "_fixed");
                         });

// ---- against an n-gram drafter actor ---------------------------------------------------------

// Repetitive prompts, so the n-gram lookup finds matches.
std::vector<GenerationRequest> repetitive(std::vector<GenerationRequest> reqs) {
  for (GenerationRequest& r : reqs)
    for (int rep = 0; rep < 2; ++rep) {
      const std::vector<int32_t> p = r.prompt;
      r.prompt.insert(r.prompt.end(), p.begin(), p.end());
    }
  return reqs;
}

// One server run in --mode ssd with an n-gram drafter actor at a fixed K = 3, the leader drafting
// misses (`at_leader`, --miss-at leader) or not: request 0 alone, 1 and a copy of it (slot 4)
// join, slot 4's client leaves mid-run, 2 and 3 join. Pre-speculation in every round (the switch
// off, so no regime depends on time). Returns each slot's tokens and the metrics text.
struct NgramServerRun {
  std::vector<std::vector<int32_t>> tokens;  // [slot]
  std::string metrics;
};

NgramServerRun run_ngram_server(test::split::TinyTarget& tiny, LocalTarget& target,
                                std::vector<GenerationRequest> reqs, bool at_leader) {
  reqs.push_back(reqs[1]);  // slot 4: request 1 again, a client that leaves mid-run
  LoopbackHub hub(2);
  NgramDrafter primary(NgramOptions{});
  SsdDrafterOptions so;
  so.k = 3;
  so.fan_out.budget = 6;
  test::split::DrafterActorThread actor(hub, primary, so);
  actor.ready();
  ServeMetrics metrics("tiny", 3);
  NgramServerRun out;
  {
    RemoteEngineOptions ro;
    ro.k = 3;
    ro.step_s = 30;
    ro.prespec.adaptive = false;
    RemoteEngine eng(target, hub.endpoint(0), actor.leader_layout, actor.leader_dog, ro, metrics);
    if (at_leader)
      eng.set_leader_lookups(
          {std::make_unique<LeaderLookup>(std::make_unique<NgramDrafter>(NgramOptions{}),
                                          std::make_unique<NgramDrafter>(NgramOptions{}))});
    test::EngineDriver d(eng, reqs);
    d.admit({0});
    d.round();
    d.admit({1, 4});  // join a running batch
    d.round();
    d.round();
    EXPECT_TRUE(d.slots[4].running);
    d.leave(4);  // its client leaves: FinishSeqs, and the leader's lookup copy drops it too
    d.admit({2, 3});
    for (int r = 0; r < 100 && !d.running.empty(); ++r) d.round();
    EXPECT_TRUE(d.running.empty());
    for (const auto& slot : d.slots) out.tokens.push_back(slot.gen.tokens);
    EXPECT_EQ(tiny.engine->kv->pages_in_use(), 0);
    hub.endpoint(0).send(actor.leader_layout.drafter_lead(), DrafterShutdown{});
  }
  actor.join();
  out.metrics = metrics.prometheus_text();
  return out;
}

class RemoteEngineNgram : public ::testing::TestWithParam<bool> {};

// Under --miss-at leader every miss after a sequence's first round is drafted on the leader and
// sent with the outcome, with joins and a leave between rounds; under --miss-at drafter none is.
// Greedy output equals AR's either way.
TEST_P(RemoteEngineNgram, LeaderDraftedMissesKeepGreedyOutputExact) {
  const bool at_leader = GetParam();
  constexpr size_t kRequests = 4;
  test::split::TinyTarget tiny;
  const std::vector<GenerationRequest> reqs =
      repetitive(test::split::staggered_requests(kRequests, 12));
  LocalTarget target(*tiny.engine->model, *tiny.engine->kv);
  const std::vector<GenerationResult> ar = generate_ar_batch(target, reqs);
  const NgramServerRun run = run_ngram_server(tiny, target, reqs, at_leader);
  for (size_t i = 0; i < kRequests; ++i)
    EXPECT_EQ(run.tokens[i], ar[i].tokens) << "request " << i;
  const std::string& text = run.metrics;
  const double drafted = test::metric(text, "ssd:spec_decode_leader_drafted_misses_total");
  const double misses = test::metric(text, "ssd:spec_decode_cache_misses_total");
  EXPECT_GT(test::metric(text, "ssd:spec_decode_num_drafts_total"), 0);
  if (at_leader) {
    EXPECT_GT(drafted, 0);
    // A leader-drafted speculation is verified as a miss, but slot 4's last one, dropped when
    // it left, if it had one.
    EXPECT_LE(drafted, misses + 1);
  } else {
    EXPECT_EQ(drafted, 0);
  }
}

// Sampled: a miss the leader drafts is the very draft the drafter rank would have sent (the same
// lookup on the same tokens, q one-hot) and is verified with the request's own Philox draws, so
// the server's sampled output is the same token for token whichever rank drafts the misses.
TEST(RemoteEngineNgramSampled, LeaderDraftedMissesKeepSampledOutputAsTheDrafterWould) {
  constexpr size_t kRequests = 4;
  test::split::TinyTarget tiny;
  std::vector<GenerationRequest> reqs = repetitive(test::split::staggered_requests(kRequests, 12));
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].sampler.temperature = 0.3f;
    reqs[i].sampler.seed = 7;
    reqs[i].stream = i;
  }
  LocalTarget target(*tiny.engine->model, *tiny.engine->kv);
  std::vector<GenerationRequest> greedy = reqs;
  for (GenerationRequest& r : greedy) r.sampler = SamplerConfig{};
  const std::vector<GenerationResult> ar = generate_ar_batch(target, greedy);
  const NgramServerRun leader = run_ngram_server(tiny, target, reqs, true);
  const NgramServerRun drafter = run_ngram_server(tiny, target, reqs, false);
  EXPECT_GT(test::metric(leader.metrics, "ssd:spec_decode_leader_drafted_misses_total"), 0);
  EXPECT_EQ(test::metric(drafter.metrics, "ssd:spec_decode_leader_drafted_misses_total"), 0);
  EXPECT_GT(test::metric(leader.metrics, "ssd:spec_decode_num_accepted_tokens_total"), 0);
  size_t unlike_greedy = 0;  // the draws matter: sampling left the greedy path somewhere
  for (size_t i = 0; i < kRequests; ++i) {
    EXPECT_FALSE(leader.tokens[i].empty()) << "request " << i;
    EXPECT_EQ(leader.tokens[i], drafter.tokens[i]) << "request " << i;
    unlike_greedy += leader.tokens[i] != ar[i].tokens;
  }
  EXPECT_GT(unlike_greedy, 0u);
}

INSTANTIATE_TEST_SUITE_P(MissAt, RemoteEngineNgram, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "leader" : "drafter"; });

// ---- against a scripted drafter lead ----------------------------------------------------------

// A drafter lead that knows the target's greedy tokens of every sequence (`ar`, by sequence id):
// each speculation it sends is the next tokens of that list, cut to the length asked, so the
// target accepts it whole. With `push`, before each answer it pushes, for every sequence asked
// for tokens (but those of `no_push`), the entry for the outcome that speculation leads to: the
// accepted count and the bonus, and the K tokens after them. It answers an outcome only for the
// sequences that were neither pushed nor drafted by the leader (and the joiners), and sends no
// answer when none is left; its answers say misses are answered with `miss_lookup`.
struct ScriptedLead {
  std::map<int32_t, std::vector<int32_t>> ar;
  bool push = true;
  std::set<int32_t> no_push;
  MissLookup miss_lookup = MissLookup::kNone;
  int32_t k = 3;
  // What it saw (read after the thread ended).
  int64_t answers = 0, outcomes = 0, silent_outcomes = 0;  // silent: answered with nothing
  int64_t pushed = 0, leader_drafted = 0;  // SeqOutcome flags seen
  std::vector<int32_t> finished;
  std::string error;  // what the leader sent that the script did not expect

  void run(Transport& link) {
    std::map<int32_t, size_t> pos;    // tokens the target emitted so far, per sequence
    std::map<int32_t, int32_t> asked;  // the length asked of its next speculation
    for (;;) {
      const Envelope env = link.recv(std::chrono::seconds(60));
      int64_t round = 0;
      std::vector<int32_t> answer_for;
      if (env.kind == MsgKind::kDrafterShutdown) return;
      if (env.kind == MsgKind::kFinishSeqs) {
        for (int32_t s : decode<FinishSeqs>(env).seqs) {
          finished.push_back(s);
          pos.erase(s);
          asked.erase(s);
        }
        continue;
      }
      if (env.kind == MsgKind::kStartSeqs || env.kind == MsgKind::kJoinSeqs) {
        const bool start = env.kind == MsgKind::kStartSeqs;
        const auto add = [&](const auto& m) {
          for (size_t i = 0; i < m.seqs.size(); ++i) {
            pos[m.seqs[i]] = m.emitted[i].size();
            asked[m.seqs[i]] = m.first_k.at(i);
            if (start) answer_for.push_back(m.seqs[i]);
            else joined_.push_back(m.seqs[i]);
          }
        };
        if (start) {
          const StartSeqs m = decode<StartSeqs>(env);
          if (m.push != push) error = "StartSeqs::push is not the script's";
          joined_.clear();
          add(m);
        } else {
          add(decode<JoinSeqs>(env));
          continue;  // answered with the next outcome
        }
      } else if (env.kind == MsgKind::kOutcome) {
        const Outcome m = decode<Outcome>(env);
        round = m.round;
        ++outcomes;
        for (const SeqOutcome& o : m.seqs) {
          pos[o.seq] += o.emitted.size();
          asked[o.seq] = o.next_k;
          pushed += o.pushed;
          leader_drafted += o.leader_drafted;
          if (o.leader_drafted && (o.drafted.seq != o.seq || o.drafted.tokens.size() >
                                                                static_cast<size_t>(o.next_k)))
            error = "a malformed leader-drafted speculation";
          if (!o.pushed && !o.leader_drafted) answer_for.push_back(o.seq);
        }
        answer_for.insert(answer_for.end(), joined_.begin(), joined_.end());
        joined_.clear();
      } else {
        error = std::string("unexpected ") + kind_name(env.kind);
        continue;
      }
      if (push) link.send(env.peer, prespec_push(round, pos, asked));
      SpeculationMsg a;
      a.round = round;
      a.miss_lookup = static_cast<uint8_t>(miss_lookup);
      for (int32_t s : answer_for)
        if (asked[s] > 0) a.seqs.push_back(speculation(s, pos[s], asked[s]));
      if (a.seqs.empty()) {
        silent_outcomes += env.kind == MsgKind::kOutcome;
        continue;
      }
      ++answers;
      link.send(env.peer, a);
    }
  }

 private:
  static ProcessedDist one_hot(int32_t tok) {
    ProcessedDist q;
    q.tokens = {TokenProb{tok, 1.0f}};
    return q;
  }
  // Tokens [from, from + n) of sequence s's list, cut where it ends.
  std::pair<std::vector<int32_t>, std::vector<ProcessedDist>> tokens(int32_t s, size_t from,
                                                                     size_t n) const {
    const std::vector<int32_t>& t = ar.at(s);
    std::pair<std::vector<int32_t>, std::vector<ProcessedDist>> out;
    for (size_t i = from; i < std::min(t.size(), from + n); ++i) {
      out.first.push_back(t[i]);
      out.second.push_back(one_hot(t[i]));
    }
    return out;
  }
  // The speculation of a sequence that has emitted `at` tokens, asked for `len`: cut so that the
  // bonus after it is still in the list.
  size_t length(int32_t s, size_t at, int32_t len) const {
    const size_t n = ar.at(s).size();
    return at + 1 >= n ? 0 : std::min(static_cast<size_t>(len), n - at - 1);
  }
  SeqSpeculation speculation(int32_t s, size_t at, int32_t len) const {
    auto [t, q] = tokens(s, at, length(s, at, len));
    return SeqSpeculation{s, static_cast<uint8_t>(SpecSource::kPrimary), std::move(t),
                          std::move(q)};
  }
  PrespecPush prespec_push(int64_t round, const std::map<int32_t, size_t>& pos,
                           const std::map<int32_t, int32_t>& asked) const {
    PrespecPush p;
    p.round = round;
    p.miss_lookup = static_cast<uint8_t>(miss_lookup);
    for (const auto& [s, at] : pos) {
      if (asked.at(s) <= 0 || no_push.count(s)) continue;
      const size_t n = length(s, at, asked.at(s));
      auto [t, q] = tokens(s, at + n + 1, static_cast<size_t>(k));
      p.entries.push_back(PushedSpec{s, static_cast<int32_t>(n), ar.at(s).at(at + n),
                                     std::move(t), std::move(q)});
    }
    return p;
  }
  std::vector<int32_t> joined_;  // JoinSeqs since the last answer
};

// The scripted lead on rank 1 of `hub`, on its own thread until the test sends DrafterShutdown.
class ScriptedLeadThread {
 public:
  ScriptedLeadThread(LoopbackHub& hub, ScriptedLead& lead)
      : hub_(hub), thread_([this, &lead] { lead.run(hub_.endpoint(1)); }) {}
  ~ScriptedLeadThread() { join(); }
  void join() {
    if (!thread_.joinable()) return;
    hub_.endpoint(0).send(1, DrafterShutdown{});
    thread_.join();
  }

 private:
  LoopbackHub& hub_;
  std::thread thread_;
};

struct ScriptedCase {
  explicit ScriptedCase(size_t n) : c(n, 12) {
    for (size_t i = 0; i < n; ++i) lead.ar[static_cast<int32_t>(i + 1)] = c.ar[i].tokens;
  }
  RemoteEngineOptions options() const {
    RemoteEngineOptions ro;
    ro.k = 3;
    ro.step_s = 20;  // an answer the engine waits for and the lead never sends ends the test
    return ro;
  }
  std::unique_ptr<LeaderLookup> ngram_copy() const {
    return std::make_unique<LeaderLookup>(std::make_unique<NgramDrafter>(NgramOptions{}), nullptr);
  }
  // Requests 0 and 1 together to their end, under `ro` and with the leader's n-gram copy when
  // `lookup`: their tokens must be the target's, and neither side may have seen anything wrong.
  void run_two(const RemoteEngineOptions& ro, bool lookup) {
    {
      ScriptedLeadThread thread(hub, lead);
      RemoteEngine eng(c.target, hub.endpoint(0), layout, dog, ro, metrics);
      if (lookup) eng.set_leader_lookups({ngram_copy()});
      test::EngineDriver d(eng, c.reqs);
      d.admit({0, 1});
      for (int r = 0; r < 100 && !d.running.empty(); ++r) d.round();
      EXPECT_TRUE(d.running.empty());
      for (size_t i = 0; i < 2; ++i) EXPECT_EQ(d.slots[i].gen.tokens, c.ar[i].tokens) << i;
      thread.join();
    }
    EXPECT_EQ(lead.error, "");
    EXPECT_EQ(failure, "");
  }
  double metric(const std::string& name) const {
    return test::metric(metrics.prometheus_text(), name);
  }

  test::EngineCase c;
  ScriptedLead lead;
  LoopbackHub hub{2};
  const RankLayout layout = RankLayout::make(2, 0, 1);
  ServeMetrics metrics{"tiny", 3};
  std::string failure;
  Watchdog dog{0, Role::kTarget, [this](const std::string& m) { failure = m; }};
};

// Round 0's answer follows its push, so both outcomes of round 0 are found in it: round 1 is
// verified from the push alone, and the lead sends no answer for it.
TEST(RemoteEnginePush, APushedHitIsVerifiedWithoutAnAnswer) {
  ScriptedCase t(2);
  t.run_two(t.options(), /*lookup=*/false);
  EXPECT_GE(t.lead.pushed, 2) << "round 0's outcomes are in the push that came before its answer";
  EXPECT_GE(t.lead.silent_outcomes, 1) << "a round verified from the push alone";
  EXPECT_EQ(t.metric("ssd:spec_decode_pushed_hits_total"), t.lead.pushed);
  EXPECT_EQ(t.metric("ssd:spec_decode_leader_drafted_misses_total"), 0);
  EXPECT_GE(t.metric("ssd:spec_decode_cache_hits_total"), t.lead.pushed);
}

// Pushes off (RemoteEngineOptions::push), while the lead says misses are answered with its
// primary (a lookup) and the leader holds an n-gram copy. A leader that takes no pushes could
// miss a change of how misses are answered (told in a push when no answer comes): it drafts
// none and waits for every answer.
TEST(RemoteEnginePush, ALeaderThatTakesNoPushesDraftsNoMissAndWaitsForEveryAnswer) {
  ScriptedCase t(2);
  t.lead.push = false;
  t.lead.miss_lookup = MissLookup::kPrimary;
  RemoteEngineOptions ro = t.options();
  ro.push = false;
  t.run_two(ro, /*lookup=*/true);
  EXPECT_EQ(t.lead.leader_drafted, 0);
  EXPECT_EQ(t.lead.silent_outcomes, 0);
  EXPECT_GT(t.lead.outcomes, 0);
}

// Pushes that never hold the outcome, and the lead says misses are answered with its primary (a
// lookup): every outcome after round 0 goes out with the leader's own n-gram draft, and the
// lead answers none of them.
TEST(RemoteEnginePush, ALeaderDraftedMissGoesOutWithTheOutcome) {
  ScriptedCase t(2);
  t.lead.no_push = {1, 2};  // pushes that never hold these sequences: every outcome misses
  t.lead.miss_lookup = MissLookup::kPrimary;
  t.run_two(t.options(), /*lookup=*/true);
  EXPECT_EQ(t.lead.pushed, 0);
  EXPECT_GT(t.lead.leader_drafted, 0);
  EXPECT_EQ(t.lead.answers, 1) << "only StartSeqs was answered";
  EXPECT_EQ(t.lead.silent_outcomes, t.lead.outcomes);
  EXPECT_EQ(t.metric("ssd:spec_decode_leader_drafted_misses_total"), t.lead.leader_drafted);
  EXPECT_EQ(t.metric("ssd:spec_decode_pushed_hits_total"), 0);
}

// Sequence 1 leaves while the speculation pushed for it is held (and the lead's next push still
// holds it); later sequence 3, the only one running, leaves while the answer for it is on its
// way, and sequence 4 then starts a new batch: that answer is read and dropped, not mistaken for
// the new batch's.
TEST(RemoteEnginePush, ASequenceThatLeavesWhileItsSpeculationIsOnItsWayIsDropped) {
  ScriptedCase t(4);
  t.lead.no_push = {3};  // sequence 3's outcomes wait for the answer
  {
    ScriptedLeadThread lead(t.hub, t.lead);
    RemoteEngine eng(t.c.target, t.hub.endpoint(0), t.layout, t.dog, t.options(), t.metrics);
    eng.set_leader_lookups({t.ngram_copy()});
    test::EngineDriver d(eng, t.c.reqs);
    d.admit({0, 1});
    d.round();  // round 0: the answer, after a push that holds both outcomes
    d.round();  // round 1: from the push; its outcome's speculations are held again
    ASSERT_TRUE(d.slots[0].running && d.slots[1].running);
    d.leave(0);
    for (int r = 0; r < 100 && !d.running.empty(); ++r) d.round();
    ASSERT_TRUE(d.running.empty());
    d.admit({2});  // sequence 3: a new batch
    d.round();
    d.round();
    ASSERT_TRUE(d.slots[2].running);
    d.leave(2);    // its answer is on its way
    d.admit({3});  // sequence 4: nothing runs, a new batch
    for (int r = 0; r < 100 && !d.running.empty(); ++r) d.round();
    ASSERT_TRUE(d.running.empty());
    for (size_t i : {1, 3}) EXPECT_EQ(d.slots[i].gen.tokens, t.c.ar[i].tokens) << i;
    EXPECT_EQ(t.c.tiny.engine->kv->pages_in_use(), 0);
    lead.join();
  }
  EXPECT_EQ(t.lead.error, "");
  EXPECT_EQ(t.failure, "");
  EXPECT_NE(std::find(t.lead.finished.begin(), t.lead.finished.end(), 1), t.lead.finished.end());
  EXPECT_NE(std::find(t.lead.finished.begin(), t.lead.finished.end(), 3), t.lead.finished.end());
  EXPECT_GE(t.lead.pushed, 2);
}

}  // namespace
}  // namespace ssd
