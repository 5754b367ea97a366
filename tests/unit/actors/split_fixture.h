// What the tests of a split run in one process share (the target leader on the test's thread, the
// drafter side on another, over the loopback transport: the frames the MPI transport carries):
//   - TinyTarget: a tiny target model written to disk, and that model drafting for itself (every
//     draft agrees with the target, so pre-speculation hits); tiny_requests (equal lengths) and
//     staggered_requests (unequal) for it;
//   - DrafterActorThread: a real drafter actor on rank 1, its failure kept for the test to check
//     (its reads skip the heartbeats a drafter lead sends a leader that takes pushes);
//   - ScriptedDrafterLead: a stand-in drafter lead with no drafter behind it, answering each round
//     with a fixed chain for every sequence, except as its script says (leave a sequence out, fall
//     silent after a round), for the tests of what the leader does with a bad or missing answer.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actors/roles/drafter_actor.h"
#include "actors/transport/loopback_transport.h"
#include "runtime/drafters/model_drafter.h"
#include "runtime/drafters/ngram_drafter.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/spec/drafting_fixture.h"

namespace ssd::test::split {

struct TinyTarget {
  test::TempDir tmp;
  std::string path;
  std::unique_ptr<drafting::Engine> engine;
  // The drafter's own backend: the drafter computes on its own thread while the target verifies
  // on the test's (on separate ranks in a real run), and a backend serves one caller at a time.
  std::unique_ptr<Backend> drafter_backend = make_cpu_backend(1);

  TinyTarget() {
    path = test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::F32), tmp.file("t.gguf"));
    engine = std::make_unique<drafting::Engine>(path, 1, 4096);
  }
  // The target drafting for itself.
  std::unique_ptr<Drafter> self_drafter() {
    ModelFile f = ModelFile::open(path);
    ModelDrafterOptions o;
    o.target_vocab = drafting::gguf_vocab(engine->file);
    o.draft_vocab = drafting::gguf_vocab(f);
    o.target_logits = engine->vocab();
    return std::make_unique<ModelDrafter>(std::move(f), *drafter_backend, o);
  }
};

// b greedy requests of prompt_len tokens each (request i's token t is 5 + 7t + i), each asking
// for new_tokens tokens, request i on sampling stream i.
inline std::vector<GenerationRequest> tiny_requests(size_t b, size_t prompt_len,
                                                    int64_t new_tokens) {
  std::vector<GenerationRequest> reqs(b);
  for (size_t i = 0; i < b; ++i) {
    for (size_t t = 0; t < prompt_len; ++t)
      reqs[i].prompt.push_back(static_cast<int32_t>(5 + 7 * t + i));
    reqs[i].max_new_tokens = new_tokens;
    reqs[i].stream = i;
  }
  return reqs;
}

// Request i of a batch of unequal requests: 3 + 2i prompt tokens (token t is 5 + 7t + i), asking
// for new_tokens + 3i tokens, drawn with `s` (greedy by default) on sampling stream i.
inline GenerationRequest staggered_request(size_t i, int64_t new_tokens,
                                           const SamplerConfig& s = {}) {
  GenerationRequest r;
  for (size_t t = 0; t < 3 + 2 * i; ++t) r.prompt.push_back(static_cast<int32_t>(5 + 7 * t + i));
  r.max_new_tokens = new_tokens + 3 * static_cast<int64_t>(i);
  r.sampler = s;
  r.stream = i;
  return r;
}
inline std::vector<GenerationRequest> staggered_requests(size_t b, int64_t new_tokens,
                                                         const SamplerConfig& s = {}) {
  std::vector<GenerationRequest> reqs;
  for (size_t i = 0; i < b; ++i) reqs.push_back(staggered_request(i, new_tokens, s));
  return reqs;
}

// A drafter actor (primary, an n-gram backup unless `with_backup` is false, `opts`) on rank 1
// of `hub`, on its own thread from construction; the leader is rank 0, played by RemoteDecoder or
// by the test through leader(), recv() and expect<T>(). ready() waits for its kDrafterReady;
// join() (after the leader sent DrafterShutdown) rethrows what the actor threw, and checks that
// no watchdog fired; stop() joins an actor that ended on its own and returns what it threw. A
// test that ends without either shuts the actor down in the destructor.
class DrafterActorThread {
 public:
  DrafterActorThread(LoopbackHub& hub, Drafter& primary, const SsdDrafterOptions& opts,
                     double step_s = 30, bool with_backup = true)
      : hub_(hub), thread_([this, &primary, opts, step_s, with_backup] {
          try {
            run_drafter_actor(hub_.endpoint(1), drafter_layout, primary,
                              with_backup ? &backup_ : nullptr, opts, actor_options(step_s),
                              drafter_dog);
          } catch (...) {
            error_ = std::current_exception();
          }
        }) {}
  ~DrafterActorThread() {  // a test that stopped early: stop the actor rather than hang
    if (!thread_.joinable()) return;
    leader().send(1, DrafterShutdown{});
    thread_.join();
  }

  // Every planned branch is drafted (--prespec-fit all): draft-what-fits decides from this
  // machine's timings, which the protocol's tests must not depend on (a tiny model drafting for
  // itself never fits a window); runtime/saguaro/prespec_budget.h and the simulator's tests
  // check it.
  static DrafterActorOptions actor_options(double step_s) {
    DrafterActorOptions o;
    o.step_s = step_s;
    o.fit_window = false;
    return o;
  }

  Transport& leader() { return hub_.endpoint(0); }
  // The next frame to the leader, past the lead's heartbeats (counted in heartbeats, as the
  // leader's reads skip them).
  Envelope recv() {
    for (;;) {
      Envelope env = leader().recv(std::chrono::seconds(30));
      if (env.kind != MsgKind::kHeartbeat) return env;
      ++heartbeats;
    }
  }
  template <class T>
  T expect() {
    const Envelope env = recv();
    EXPECT_EQ(env.kind, T::kKind) << "got " << kind_name(env.kind);
    return env.kind == T::kKind ? decode<T>(env) : T{};
  }
  void ready() {
    const Envelope env = recv();
    EXPECT_EQ(env.kind, MsgKind::kDrafterReady) << "got " << kind_name(env.kind);
  }
  void join() {
    if (std::exception_ptr e = stop()) std::rethrow_exception(e);
    EXPECT_EQ(failure, "");
  }
  std::exception_ptr stop() {
    thread_.join();
    return error_;
  }

  const RankLayout leader_layout = RankLayout::make(2, 0, 1);
  const RankLayout drafter_layout = RankLayout::make(2, 1, 1);
  std::string failure;  // what a watchdog said when it fired ("" while none did)
  int64_t heartbeats = 0;  // skipped by recv()
  Watchdog leader_dog{0, Role::kTarget, [this](const std::string& m) { failure = m; }};
  Watchdog drafter_dog{1, Role::kDrafter, [this](const std::string& m) { failure = m; }};

 private:
  LoopbackHub& hub_;
  NgramDrafter backup_{NgramOptions{}};
  std::exception_ptr error_;
  std::thread thread_;  // last: it starts once everything above exists
};

// A test that plays the target leader itself against one drafter actor with no backup: SetUp
// calls start_actor(); TearDown shuts the actor down and checks that it ended cleanly, unless
// the test set stopped_ after stopping it itself (DrafterActorThread::stop()). Members the
// derived fixture declares (the drafter) are gone before the actor: TearDown has joined it.
class LeaderSeatTest : public ::testing::Test {
 public:
  void start_actor(Drafter& primary, const SsdDrafterOptions& opts) {
    actor_.emplace(hub_, primary, opts, /*step_s=*/30, /*with_backup=*/false);
    actor_->ready();
  }
  void TearDown() override {
    if (!actor_ || stopped_) return;
    leader().send(1, DrafterShutdown{});
    actor_->join();
  }
  Transport& leader() { return actor_->leader(); }
  Envelope recv() { return actor_->recv(); }
  template <class T>
  T expect() {
    return actor_->expect<T>();
  }

  LoopbackHub hub_{2};
  std::optional<DrafterActorThread> actor_;
  bool stopped_ = false;
};

// How a scripted drafter lead answers StartSeqs (round 0) and each Outcome (its round).
struct DrafterScript {
  std::vector<int32_t> chain = {1};  // every speculation: these tokens, each certain under its q
  int32_t skip = -1;                 // leave this sequence out ...
  int64_t skip_from = 0;             // ... from this round on
  int64_t last_round = std::numeric_limits<int64_t>::max();  // answer nothing after this round
};

// Plays the drafter lead on `link` until a DrafterShutdown: answers as `script` says, for every
// sequence of the last StartSeqs; past script.last_round it sets `silent` (when given) and keeps
// draining its mailbox without answering.
inline void run_scripted_drafter_lead(Transport& link, const DrafterScript& script,
                                      std::atomic<bool>* silent = nullptr) {
  std::vector<int32_t> seqs;
  for (;;) {
    const Envelope env = link.recv(std::chrono::seconds(60));
    int64_t round = 0;
    if (env.kind == MsgKind::kStartSeqs) {
      seqs = decode<StartSeqs>(env).seqs;
    } else if (env.kind == MsgKind::kOutcome) {
      round = decode<Outcome>(env).round;
    } else if (env.kind == MsgKind::kDrafterShutdown) {
      return;
    } else {
      continue;  // FinishSeqs
    }
    if (round > script.last_round) {
      if (silent) *silent = true;
      continue;
    }
    SpeculationMsg m;
    m.round = round;
    for (int32_t s : seqs) {
      if (s == script.skip && round >= script.skip_from) continue;
      SeqSpeculation spec{s, static_cast<uint8_t>(SpecSource::kPrimary), script.chain, {}};
      for (int32_t t : script.chain) {
        ProcessedDist q;
        q.tokens = {TokenProb{t, 1.0f}};
        spec.q.push_back(q);
      }
      m.seqs.push_back(std::move(spec));
    }
    link.send(env.peer, m);
  }
}

}  // namespace ssd::test::split
