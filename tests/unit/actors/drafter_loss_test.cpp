// The leader going on without its drafter lead (actors/roles/drafter_loss.h), in one process over
// loopback: a drafter that answers a few rounds and then falls silent
//   - under a continue policy: the loss is recorded once (rank, round, cause) and the run ends
//     with generate_ar_batch's tokens; a probe that says the process is gone names it "died"
//     without waiting for the deadline;
//   - with the leader's lookup copy, held from the start (--miss-at leader) or built at the loss
//     (--miss-at drafter): every round after the loss verifies a speculation the leader drafted
//     with it (its outcome records say "leader", and it offers tokens), the line names the
//     fallback, and the tokens are still generate_ar_batch's; a copy built at the loss drafts
//     exactly what the copy held from the start drafts (it starts on the same context);
//   - when no lookup can be built (a recipe with neither copy): plain decode steps;
//   - under the default (abort) policy: the wait ends in TransportTimeout, as before.
// And the pieces: the /proc process state, the per-host liveness table, auto's reading of the
// launcher's recovery mode, and the watchdog's replaceable callback.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <tuple>

#include "actors/roles/drafter_loss.h"
#include "actors/roles/remote_decode.h"
#include "runtime/drafters/ngram_drafter.h"
#include "tests/unit/actors/split_fixture.h"

namespace ssd {
namespace {

using namespace std::chrono_literals;
using test::split::TinyTarget;

std::vector<GenerationRequest> requests(size_t b) {
  return test::split::tiny_requests(b, 5, 24);
}

struct LossRun {
  RemoteDecodeResult result;
  std::string error = "(no error)";
  std::string watchdog = "(not fired)";
};

LossRun run_with_silent_drafter(TinyTarget& t, const std::vector<GenerationRequest>& reqs,
                                DrafterLossPolicy policy, double step_s,
                                std::atomic<bool>& silent, LeaderLookups lookups = {}) {
  LoopbackHub hub(2);
  // A two-token chain for every sequence in rounds 0..2, then silence (the mailbox still drained).
  std::thread drafter([&] {
    test::split::run_scripted_drafter_lead(hub.endpoint(1), {.chain = {7, 7}, .last_round = 2},
                                           &silent);
  });
  LossRun out;
  Watchdog dog(0, Role::kTarget, [&](const std::string& m) { out.watchdog = m; });
  {
    LocalTarget target(*t.engine->model, *t.engine->kv);
    const RankLayout leader = RankLayout::make(2, 0, 1);
    RemoteDecoder dec(target, hub.endpoint(0), leader, {}, 3, dog, step_s);
    dec.set_loss_policy(std::move(policy));
    dec.set_leader_lookups(std::move(lookups));
    try {
      out.result = dec.run(reqs, true);
      dec.shutdown_drafters();  // the lost lead is not told (nothing to send on one drafter rank)
    } catch (const Error& e) {
      out.error = e.what();
    }
  }
  hub.endpoint(0).send(1, DrafterShutdown{});
  drafter.join();
  return out;
}

void expect_ar_tokens(TinyTarget& t, const std::vector<GenerationRequest>& reqs,
                      const RemoteDecodeResult& got) {
  LocalTarget target(*t.engine->model, *t.engine->kv);
  const std::vector<GenerationResult> ar = generate_ar_batch(target, reqs);
  ASSERT_EQ(got.gen.size(), ar.size());
  for (size_t i = 0; i < ar.size(); ++i) {
    EXPECT_EQ(got.gen[i].tokens, ar[i].tokens) << "request " << i;
    EXPECT_EQ(got.gen[i].tokens.size(), 24u) << "request " << i;
  }
}

TEST(DrafterLoss, SilentDrafterUnderContinueFinishesWithArTokens) {
  TinyTarget t;
  const std::vector<GenerationRequest> reqs = requests(2);
  std::atomic<bool> silent{false};
  DrafterLossPolicy policy;
  policy.continue_on_loss = true;
  policy.slice = 20ms;
  // 2 s: far beyond what the answered rounds take, so the loss is always in round 3.
  const LossRun r = run_with_silent_drafter(t, reqs, policy, 2, silent);
  ASSERT_EQ(r.error, "(no error)");
  EXPECT_EQ(r.watchdog, "(not fired)");  // the wait's own deadline decided, not the watchdog
  ASSERT_TRUE(r.result.drafter_loss.has_value());
  const DrafterLoss& loss = *r.result.drafter_loss;
  EXPECT_EQ(loss.rank, 1);
  EXPECT_EQ(loss.round, 3);  // rounds 0..2 were answered
  EXPECT_FALSE(loss.died);
  EXPECT_EQ(loss.cause,
            "deadline of 2 s expired while waiting for the speculation of round 3 from the "
            "drafter (rank 1)");
  EXPECT_EQ(loss.fallback, "plain decoding");
  EXPECT_NE(loss.line().find("ssd: lost drafter rank 1: deadline of 2 s expired"),
            std::string::npos);
  EXPECT_EQ(loss.to_json()["round"], 3);
  expect_ar_tokens(t, reqs, r.result);
}

// A continue policy whose probe sees the drafter's process gone once `silent` is set.
DrafterLossPolicy gone_once_silent(const std::atomic<bool>& silent) {
  DrafterLossPolicy policy;
  policy.continue_on_loss = true;
  policy.slice = 20ms;
  policy.probe = [&silent](int) { return silent ? ProcessState::kGone : ProcessState::kRunning; };
  return policy;
}

// Prompts that repeat, so the n-gram lookup finds matches from the first round.
std::vector<GenerationRequest> repetitive_requests(size_t b) {
  std::vector<GenerationRequest> reqs = requests(b);
  for (GenerationRequest& r : reqs) {
    const std::vector<int32_t> p = r.prompt;
    for (int rep = 0; rep < 2; ++rep) r.prompt.insert(r.prompt.end(), p.begin(), p.end());
  }
  return reqs;
}

// The leader's n-gram copy as the primary (an n-gram drafter rank) or as the backup alone (a
// model drafter rank with the n-gram backup speculator).
std::unique_ptr<LeaderLookup> ngram_copy(bool primary) {
  auto ngram = std::make_unique<NgramDrafter>(NgramOptions{});
  return primary ? std::make_unique<LeaderLookup>(std::move(ngram), nullptr)
                 : std::make_unique<LeaderLookup>(nullptr, std::move(ngram));
}

// The copy held from the start (--miss-at leader), or only a recipe the link builds it with at
// the loss (--miss-at drafter), as LeaderJob::leader_lookups() hands them out.
LeaderLookups lookups(bool primary, bool at_loss) {
  if (at_loss) return {nullptr, [primary] { return ngram_copy(primary); }};
  return {ngram_copy(primary), nullptr};
}

// Primary or backup copy, held from the start or built at the loss: the same fallback each way.
class DrafterLossLookup : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(DrafterLossLookup, RoundsAfterTheLossAreDraftedByTheLeadersLookup) {
  const auto [primary, at_loss] = GetParam();
  TinyTarget t;
  const std::vector<GenerationRequest> reqs = repetitive_requests(2);
  std::atomic<bool> silent{false};
  const DrafterLossPolicy policy = gone_once_silent(silent);
  const LossRun r =
      run_with_silent_drafter(t, reqs, policy, 600, silent, lookups(primary, at_loss));
  ASSERT_EQ(r.error, "(no error)");
  ASSERT_TRUE(r.result.drafter_loss.has_value());
  const DrafterLoss& loss = *r.result.drafter_loss;
  EXPECT_EQ(loss.round, 3);
  EXPECT_EQ(loss.fallback, "the leader's n-gram drafts");
  EXPECT_NE(loss.line().find("; the target finishes every sequence with the leader's n-gram "
                             "drafts (output unchanged)"),
            std::string::npos)
      << loss.line();
  EXPECT_EQ(loss.line().find("slower"), std::string::npos) << loss.line();
  EXPECT_EQ(loss.to_json()["fallback"], "the leader's n-gram drafts");
  // Every round from the loss on verified a speculation the leader drafted: the record of the
  // round before it says so (rounds 2.. of each request, but for its last two: a request's last
  // round may be a decode step, its last token), and they offered tokens (the prompts repeat,
  // so the lookup finds matches). Before the loss the leader drafted nothing (the scripted
  // drafter names no lookup for its misses).
  int64_t leader = 0, offered_after = 0;
  std::vector<int64_t> last_round(reqs.size(), -1);
  for (const sim::OutcomeRecord& o : r.result.outcomes)
    last_round[static_cast<size_t>(o.seq)] =
        std::max(last_round[static_cast<size_t>(o.seq)], o.round);
  for (const sim::OutcomeRecord& o : r.result.outcomes) {
    if (o.round >= loss.round) offered_after += o.k;
    if (o.round < loss.round - 1) {
      EXPECT_EQ(o.leader, std::optional<bool>(false)) << "round " << o.round;
    }
    if (o.round < loss.round - 1 || o.round + 1 >= last_round[static_cast<size_t>(o.seq)])
      continue;
    EXPECT_EQ(o.leader, std::optional<bool>(true)) << "request " << o.seq << ", round " << o.round;
    ++leader;
  }
  EXPECT_GT(leader, 0);
  EXPECT_GE(r.result.split.leader_drafted, leader);
  EXPECT_GT(offered_after, 0) << "the leader's lookup offered no tokens after the loss";
  expect_ar_tokens(t, reqs, r.result);
}

INSTANTIATE_TEST_SUITE_P(PrimaryOrBackup, DrafterLossLookup,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "Primary" : "Backup") +
                                  (std::get<1>(info.param) ? "BuiltAtTheLoss" : "FromTheStart");
                         });

// The copy built at the loss starts on each running sequence's prompt and emitted tokens, the
// context the copy held from the start has by then: every round from the loss on offers and
// accepts exactly the same tokens either way (the scripted drafter's rounds before it are alike).
TEST(DrafterLoss, ACopyBuiltAtTheLossDraftsWhatACopyHeldFromTheStartDrafts) {
  TinyTarget t;
  const std::vector<GenerationRequest> reqs = repetitive_requests(3);
  std::vector<RemoteDecodeResult> runs;
  for (bool at_loss : {false, true}) {
    std::atomic<bool> silent{false};
    const LossRun r = run_with_silent_drafter(t, reqs, gone_once_silent(silent), 600, silent,
                                              lookups(/*primary=*/false, at_loss));
    ASSERT_EQ(r.error, "(no error)") << (at_loss ? "built at the loss" : "from the start");
    ASSERT_TRUE(r.result.drafter_loss.has_value());
    EXPECT_EQ(r.result.drafter_loss->round, 3);
    expect_ar_tokens(t, reqs, r.result);
    runs.push_back(r.result);
  }
  const auto& a = runs[0].outcomes;
  const auto& b = runs[1].outcomes;
  ASSERT_EQ(a.size(), b.size());
  int64_t offered = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(std::tie(a[i].round, a[i].seq, a[i].k, a[i].accepted, a[i].leader),
              std::tie(b[i].round, b[i].seq, b[i].k, b[i].accepted, b[i].leader))
        << "record " << i << " (round " << a[i].round << ", request " << a[i].seq << ")";
    if (a[i].round >= 3) offered += a[i].k;
  }
  EXPECT_GT(offered, 0) << "no tokens offered after the loss: the comparison shows nothing";
  EXPECT_EQ(runs[0].split.leader_drafted, runs[1].split.leader_drafted);
}

// A recipe whose copy holds neither lookup (no lookup can be built; LeaderJob's always has the
// backup speculator, so only a recipe like this one, or none, reaches it).
TEST(DrafterLoss, WhenNoLookupCanBeBuiltTheRoundsAfterTheLossArePlainDecodeSteps) {
  TinyTarget t;
  const std::vector<GenerationRequest> reqs = repetitive_requests(2);
  std::atomic<bool> silent{false};
  const DrafterLossPolicy policy = gone_once_silent(silent);
  LeaderLookups none{nullptr, [] { return std::make_unique<LeaderLookup>(nullptr, nullptr); }};
  const LossRun r = run_with_silent_drafter(t, reqs, policy, 600, silent, std::move(none));
  ASSERT_EQ(r.error, "(no error)");
  ASSERT_TRUE(r.result.drafter_loss.has_value());
  EXPECT_EQ(r.result.drafter_loss->fallback, "plain decoding");
  EXPECT_TRUE(r.result.drafter_loss->line().ends_with("(output unchanged, slower)"));
  for (const sim::OutcomeRecord& o : r.result.outcomes)
    if (o.round >= r.result.drafter_loss->round) {
      EXPECT_EQ(o.k, 0) << "round " << o.round;
    }
  EXPECT_EQ(r.result.split.leader_drafted, 0);
  EXPECT_GT(r.result.split.decode_steps, 0);
  expect_ar_tokens(t, reqs, r.result);
}

TEST(DrafterLoss, ProbeSeeingTheProcessGoneNamesItDiedBeforeTheDeadline) {
  TinyTarget t;
  const std::vector<GenerationRequest> reqs = requests(1);
  std::atomic<bool> silent{false};
  DrafterLossPolicy policy;
  policy.continue_on_loss = true;
  policy.slice = 20ms;
  policy.probe = [&](int rank) {
    EXPECT_EQ(rank, 1);
    return silent ? ProcessState::kGone : ProcessState::kRunning;
  };
  // A 600 s deadline: only the probe can end the wait within the test's time limit.
  const LossRun r = run_with_silent_drafter(t, reqs, policy, 600, silent);
  ASSERT_EQ(r.error, "(no error)");
  ASSERT_TRUE(r.result.drafter_loss.has_value());
  EXPECT_TRUE(r.result.drafter_loss->died);
  EXPECT_EQ(r.result.drafter_loss->cause,
            "died (its process is gone) while waiting for the speculation of round 3 from the "
            "drafter (rank 1)");
  expect_ar_tokens(t, reqs, r.result);
}

TEST(DrafterLoss, AbortPolicyKeepsTheTimeoutError) {
  TinyTarget t;
  std::atomic<bool> silent{false};
  const LossRun r = run_with_silent_drafter(t, requests(1), DrafterLossPolicy{}, 0.3, silent);
  EXPECT_NE(r.error.find("timed out after"), std::string::npos) << r.error;
  EXPECT_FALSE(r.result.drafter_loss.has_value());
}

TEST(DrafterLoss, ProcessStateFollowsAChildThroughStopAndKill) {
  EXPECT_EQ(local_process_state(getpid()), ProcessState::kRunning);
  EXPECT_EQ(local_process_state(0), ProcessState::kUnknown);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (;;) pause();
  }
  // Waits (bounded) for the kernel to show `want`.
  const auto reaches = [&](ProcessState want) {
    for (int i = 0; i < 2000; ++i) {
      if (local_process_state(child) == want) return true;
      std::this_thread::sleep_for(5ms);
    }
    return false;
  };
  EXPECT_TRUE(reaches(ProcessState::kRunning));  // sleeping in pause() counts as running
  kill(child, SIGSTOP);
  EXPECT_TRUE(reaches(ProcessState::kStopped));
  kill(child, SIGKILL);
  EXPECT_TRUE(reaches(ProcessState::kGone));  // a zombie until reaped
  waitpid(child, nullptr, 0);
  EXPECT_EQ(local_process_state(child), ProcessState::kGone);
}

TEST(DrafterLoss, RankLivenessProbesOnlyRanksOnThisHost) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const nlohmann::json places = nlohmann::json::array(
      {{{"rank", 0}, {"host", host}, {"pid", static_cast<int>(getpid())}},
       {{"rank", 1}, {"host", "another-host.invalid"}, {"pid", static_cast<int>(getpid())}}});
  const RankLiveness live(places);
  EXPECT_EQ(live.state(0), ProcessState::kRunning);
  EXPECT_EQ(live.state(1), ProcessState::kUnknown);  // its pid means nothing here
  EXPECT_EQ(live.state(2), ProcessState::kUnknown);
  EXPECT_EQ(RankLiveness().state(0), ProcessState::kUnknown);
}

TEST(DrafterLoss, AutoContinuesOnlyUnderTheLaunchersRecoveryMode) {
  const char* var = "OMPI_MCA_orte_enable_recovery";
  const char* saved = std::getenv(var);
  const std::string keep = saved ? saved : "";
  unsetenv(var);
  EXPECT_FALSE(continue_on_drafter_loss("auto"));
  for (const char* on : {"1", "true", "TRUE", "yes", "on"}) {
    setenv(var, on, 1);
    EXPECT_TRUE(continue_on_drafter_loss("auto")) << on;
    EXPECT_FALSE(continue_on_drafter_loss("abort")) << on;
  }
  for (const char* off : {"0", "false", ""}) {
    setenv(var, off, 1);
    EXPECT_FALSE(continue_on_drafter_loss("auto")) << off;
    EXPECT_TRUE(continue_on_drafter_loss("continue")) << off;
  }
  EXPECT_THROW(continue_on_drafter_loss("sometimes"), Error);
  if (saved) setenv(var, keep.c_str(), 1);
  else unsetenv(var);
}

TEST(DrafterLoss, WatchdogCallsTheCallbackSetLast) {
  std::atomic<int> first{0}, second{0};
  Watchdog dog(1, Role::kDrafter, [&](const std::string&) { ++first; });
  dog.set_abort([&](const std::string& m) {
    EXPECT_EQ(m, "rank 1 (drafter) timed out after 0.05 s while drafting");
    ++second;
  });
  dog.arm("drafting", 0.05);
  for (int i = 0; i < 2000 && !dog.fired(); ++i) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(dog.fired());
  for (int i = 0; i < 2000 && second == 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(first, 0);
  EXPECT_EQ(second, 1);
}

}  // namespace
}  // namespace ssd
