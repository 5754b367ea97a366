#include "actors/roles/drafter_actor.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>

#include "actors/roles/drafter_wire.h"
#include "actors/roles/heartbeat.h"
#include "actors/transport/actor_loop.h"
#include "runtime/core/error.h"
#include "runtime/core/trace.h"
#include "runtime/saguaro/prespec_budget.h"
#include "runtime/generate/generation.h"

namespace ssd {
namespace {

// sd: no cache is ever filled, and the primary drafts every answer as single-process SD would
// (exactly the requested length, no ranking, no Saguaro reshaping).
SsdDrafterOptions sd_options(SsdDrafterOptions o) {
  o.miss.b_star = 1 << 20;
  o.plain = true;
  return o;
}

class DrafterActor {
 public:
  DrafterActor(Transport& world, const RankLayout& layout, Drafter& primary, Drafter* backup,
               const SsdDrafterOptions& core_opts, const DrafterActorOptions& opts,
               Watchdog& dog)
      : world_(world),
        layout_(layout),
        primary_(primary),
        ssd_core_(primary, backup, core_opts),
        sd_core_(primary, backup, sd_options(core_opts)),
        opts_(opts),
        dog_(dog),
        loop_(world) {
    const std::vector<int> ranks = layout.drafter_ranks();
    n_drafters_ = static_cast<int>(ranks.size());
    index_ = layout.drafter_index();
    for (MsgKind k : {MsgKind::kStartSeqs, MsgKind::kJoinSeqs, MsgKind::kOutcome,
                      MsgKind::kFinishSeqs,
                      MsgKind::kDrafterShutdown, MsgKind::kPrespecWork, MsgKind::kDrafterStatsAsk})
      loop_.on(k, [this](const Envelope& env) { enqueue(env); });
    loop_.on(MsgKind::kPrespecShare, [this](const Envelope& env) { on_share(env); });
    loop_.on(MsgKind::kPrespecCut, [this](const Envelope& env) { on_cut(env); });
    if (layout.is_drafter_lead()) {
      // The target leader's sign of life (heartbeat.h): a leader that stops sending ends the job.
      // Twice the step: heartbeats are read on the loop thread, which an answer (its own step,
      // watched) can hold for up to one step.
      leader_watch_.emplace(layout.rank, layout.role(), layout.target_leader(), 2 * opts.step_s);
      loop_.on(MsgKind::kHeartbeat, [this](const Envelope& env) {
        decode<Heartbeat>(env);
        if (!stopping_) leader_watch_->beat();
      });
    }
    loop_.on(MsgKind::kError, [](const Envelope& env) {
      const auto e = decode<ErrorMsg>(env);
      fail(fmt::format("rank {} ({}) failed: {}", e.rank, role_name(e.role), e.what));
    });
  }

  void run() {
    trace::set_track("drafter loop");
    if (layout_.is_drafter_lead()) {
      DrafterReady ready;
      ready.feature_layers = primary_.target_feature_layers();
      ready.name = primary_.name();
      world_.send(layout_.target_leader(), ready);
    }
    loop_.run();
  }

 private:
  bool busy() const { return job_running_ || shares_missing_ > 0; }

  void enqueue(const Envelope& env) {
    if ((env.kind == MsgKind::kOutcome || env.kind == MsgKind::kPrespecWork) && idle_since_us_ > 0) {
      // The timeline's drafter wait: from the round's answer (or share) to the next round's news.
      trace::complete(env.kind == MsgKind::kOutcome ? "wait for outcome" : "wait for work",
                      "drafter", idle_since_us_, round_, -1);
      idle_since_us_ = 0;
    }
    if (env.kind == MsgKind::kOutcome) {
      const double now = monotonic_seconds();
      if (verify_from_ > 0) budget_.observe_window(now - verify_from_);
      verify_from_ = 0;
      outcome_arrivals_.push_back(now);
    }
    if (env.kind == MsgKind::kOutcome && busy()) request_cut();
    queue_.push_back(env);
    drain();
  }

  // The lead: the next outcome is here while this round's branches are still being drafted. With
  // chunked pre-speculation every drafter rank stops at its next chunk boundary (the lead's own
  // job through the flag, the others through PrespecCut) so the answer waits for one chunk at
  // most; a job drafting in one call (prespec_chunk 0) cannot stop and runs to its end.
  void request_cut() {
    if (core_->options().prespec_chunk <= 0 || cut_sent_round_ == round_) return;
    cut_sent_round_ = round_;
    cut_.store(true);
    for (int r : layout_.drafter_ranks())
      if (r != layout_.rank) world_.send(r, PrespecCut{round_});
  }

  // A secondary rank: the lead has the next outcome. A cut for a round whose work has not been
  // handled yet is remembered for it (start_job); one for a finished round changes nothing.
  void on_cut(const Envelope& env) {
    const PrespecCut m = decode<PrespecCut>(env);
    cut_round_ = m.round;
    if (job_running_ && m.round == round_) cut_.store(true);
  }

  // Handles queued messages in order while the core is free.
  void drain() {
    while (!busy() && !queue_.empty() && !stopping_) {
      Envelope env = std::move(queue_.front());
      queue_.pop_front();
      handle(env);
    }
  }

  void handle(const Envelope& env) {
    switch (env.kind) {
      case MsgKind::kStartSeqs:
        relay<StartSeqs>(env);
        on_start(env);
        break;
      case MsgKind::kJoinSeqs:
        relay<JoinSeqs>(env);
        on_join(env);
        break;
      case MsgKind::kOutcome: on_outcome(env); break;
      case MsgKind::kPrespecWork: on_work(env); break;
      case MsgKind::kFinishSeqs:
        relay<FinishSeqs>(env);
        for (int32_t s : decode<FinishSeqs>(env).seqs) core_->finish(s);
        break;
      case MsgKind::kDrafterStatsAsk:
        world_.send(env.peer, stats_message(ssd_core_, busy_s_));
        break;
      case MsgKind::kDrafterShutdown:
        decode<DrafterShutdown>(env);
        if (layout_.is_drafter_lead())
          for (int r : layout_.drafter_ranks())
            if (r != layout_.rank) world_.send(r, DrafterShutdown{});
        stopping_ = true;
        dog_.disarm();
        if (leader_watch_) leader_watch_->stop();
        if (heartbeat_) heartbeat_->stop();
        loop_.stop();
        break;
      default:
        fail(fmt::format("drafter rank {}: unexpected {}", layout_.rank, kind_name(env.kind)));
    }
  }

  // The lead passes sequence starts and finishes on to the other drafter ranks, in order with
  // the kPrespecWork it sends them (one sender, so they arrive in that order).
  template <class T>
  void relay(const Envelope& env) {
    if (!layout_.is_drafter_lead()) return;
    const T m = decode<T>(env);
    for (int r : layout_.drafter_ranks())
      if (r != layout_.rank) world_.send(r, m, std::span<const std::byte>(env.bulk()));
  }

  void fault_point(FaultPhase phase, int64_t round, const std::string& where) const {
    if (opts_.faults) opts_.faults->at(phase, round, where);
  }

  void on_start(const Envelope& env) {
    const StartSeqs m = decode<StartSeqs>(env);
    fault_point(FaultPhase::kPrefill, 0, "starting the sequences (prefilling its drafter)");
    prespeculate_ = m.prespeculate;
    push_ = m.prespeculate && m.push;
    // A leader that takes pushes can go many rounds without waiting for an answer: it hears of
    // this lead from its heartbeats instead (heartbeat.h), from this batch to the shutdown.
    if (push_ && layout_.is_drafter_lead() && !heartbeat_)
      heartbeat_ = std::make_unique<HeartbeatSender>(world_, layout_.target_leader(),
                                                     opts_.step_s / 4);
    core_ = m.prespeculate ? &ssd_core_ : &sd_core_;
    cut_round_ = cut_sent_round_ = -1;  // rounds count from 0 again
    last_arrival_ = 0;                  // a new batch: no round before its first outcome
    core_->set_memory_scope(m.memory_scope);
    start_sequences(*core_, m, env.bulk_as<float>());
    if (!layout_.is_drafter_lead()) return;  // the lead's kPrespecWork brings round 0
    const double t0 = monotonic_seconds();
    std::vector<Speculation> next = [&] {
      trace::Span span("draft (first speculations)", "drafter", 0,
                       static_cast<int64_t>(m.seqs.size()));
      return core_->first_speculations(m.seqs, m.first_k);
    }();
    const double drafted_s = monotonic_seconds() - t0;
    busy_s_ += drafted_s;
    // The first speculations are a measured draft call (prespec_budget.h): with a branch's cost
    // known and no window yet, the job's first round drafts no chunk, and a later batch's chunks
    // are priced from the first call on.
    const auto drafted = std::count_if(next.begin(), next.end(),
                                       [](const Speculation& s) { return !s.decode_step(); });
    if (drafted > 0) budget_.observe_call(static_cast<int32_t>(drafted), drafted_s);
    answer(0, {}, {}, next);
  }

  // Sequences joining the running batch (the server): started now, their first speculations
  // drafted with the answer to the next outcome (the lead's; a secondary adopts them from its
  // PrespecWork).
  void on_join(const Envelope& env) {
    const JoinSeqs m = decode<JoinSeqs>(env);
    StartSeqs s;
    s.seqs = m.seqs;
    s.prompts = m.prompts;
    s.emitted = m.emitted;
    s.streams = m.streams;
    s.feature_rows = m.feature_rows;
    s.feature_dim = m.feature_dim;
    s.prespeculate = prespeculate_;
    start_sequences(*core_, s, env.bulk_as<float>());
    if (!layout_.is_drafter_lead()) return;
    SSD_CHECK(m.first_k.empty() || m.first_k.size() == m.seqs.size(),
              "JoinSeqs: {} speculation lengths for {} sequences", m.first_k.size(),
              m.seqs.size());
    for (size_t i = 0; i < m.seqs.size(); ++i) {
      joining_.push_back(m.seqs[i]);
      joining_k_.push_back(m.first_k.empty() ? -1 : m.first_k[i]);  // -1: K
    }
  }

  void on_outcome(const Envelope& env) {
    SSD_CHECK(layout_.is_drafter_lead(), "drafter rank {} got an outcome; only the lead does",
              layout_.rank);
    const Outcome m = decode<Outcome>(env);
    if (!outcome_arrivals_.empty()) {
      arrived_at_ = outcome_arrivals_.front();
      outcome_arrivals_.pop_front();
    }
    fault_point(FaultPhase::kRound, m.round, fmt::format("answering round {}", m.round));
    observe_round_overhead(m);
    const std::vector<RoundOutcome> outs =
        round_outcomes(m, env.bulk_as<float>(), core_->feature_dim());
    std::vector<Speculation> next;
    {
      // Scoped to the answer alone: answer() arms the pre-speculation's own phase, which the
      // scope's end would otherwise replace with the disarmed state it found.
      Watchdog::Scope scope(dog_, fmt::format("answering round {}", m.round), opts_.step_s);
      if (m.verify_s > 0)
        core_->miss_policy().observe_verify(static_cast<int32_t>(outs.size()), m.verify_s);
      const double t0 = monotonic_seconds();
      const double drafted0 = core_->stats().fallback_s + core_->stats().initial_s;
      trace::set_round(m.round);
      {
        trace::Span span("answer outcome", "drafter", m.round, static_cast<int64_t>(outs.size()));
        next = core_->on_outcome(outs);
      }
      if (!joining_.empty()) {
        std::vector<Speculation> first = core_->first_speculations(joining_, joining_k_);
        std::move(first.begin(), first.end(), std::back_inserter(next));
        joining_.clear();
        joining_k_.clear();
      }
      busy_s_ += monotonic_seconds() - t0;
      answer_draft_s_ = core_->stats().fallback_s + core_->stats().initial_s - drafted0;
      last_arrival_ = arrived_at_;
    }
    if (trace::active()) {
      const auto hits = std::count_if(next.begin(), next.end(), [](const Speculation& s) {
        return s.source == SpecSource::kCache;
      });
      const auto misses = std::count_if(next.begin(), next.end(), [](const Speculation& s) {
        return !s.hit() && !s.decode_step();
      });
      if (hits > 0) trace::instant("cache hit", "cache", m.round, hits);
      if (misses > 0) trace::instant("cache miss", "cache", m.round, misses);
    }
    // The leader already holds the speculations it found pushed (PrespecPush): they must be this
    // core's cache hits too, and get no entry in the answer; nor do those it drafted itself
    // (SeqOutcome::leader_drafted), which the core adopted.
    std::vector<int32_t> pushed;
    for (size_t i = 0; i < m.seqs.size(); ++i) {
      if (m.seqs[i].leader_drafted) {
        SSD_CHECK(prespeculate_,
                  "drafter lead: the target drafted sequence {}'s speculation in round {} of an "
                  "sd batch",
                  m.seqs[i].seq, m.round);
        pushed.push_back(m.seqs[i].seq);
        continue;
      }
      if (!m.seqs[i].pushed) continue;
      SSD_CHECK(push_ && next[i].source == SpecSource::kCache,
                "drafter lead: the target verifies a pushed speculation for sequence {} in round "
                "{}, but {}",
                m.seqs[i].seq, m.round,
                push_ ? "this drafter's cache has no entry for its outcome"
                      : "no pre-speculation was pushed to it");
      pushed.push_back(m.seqs[i].seq);
    }
    answer(m.round, m, env.bulk_as<float>(), next, pushed);
  }

  // The miss policy's T_o (miss_policy.h): the round between the previous outcome's arrival and
  // this one's, less the verification in it and the fallback draft that answered the previous
  // outcome; what is left is the exchange, the host work of both ranks and any wait for a
  // pre-speculation chunk, which a backup answer would not have saved. The first outcome of a
  // batch has no previous one (its round began with the start's first drafts).
  void observe_round_overhead(const Outcome& m) {
    if (last_arrival_ <= 0 || arrived_at_ <= 0 || m.verify_s <= 0) return;
    const double overhead = arrived_at_ - last_arrival_ - m.verify_s - answer_draft_s_;
    core_->miss_policy().observe_round_overhead(overhead);
  }

  // Sends the speculations to the target leader, then starts the round's pre-speculation.
  // `pushed`: sequences whose speculation the leader took from the push (no entry for them).
  void answer(int64_t round, const Outcome& outcome, std::span<const float> features,
              const std::vector<Speculation>& next, const std::vector<int32_t>& pushed = {}) {
    trace::set_round(round);
    // Sequences at length 0 get no entry, and a round of decode steps alone no answer: the leader
    // does not wait for it (protocol.h, SpeculationMsg); nor do pushed ones.
    SpeculationMsg msg = speculation_message(round, next);
    std::erase_if(msg.seqs, [&](const SeqSpeculation& w) {
      return std::find(pushed.begin(), pushed.end(), w.seq) != pushed.end();
    });
    // How the next misses would be answered (the leader may draft lookups itself): told with the
    // answer, else with the round's pushes, else, when it changed, in a push of no entries (only
    // to a leader that asked for pushes, StartSeqs::push).
    if (prespeculate_ && layout_.is_drafter_lead())
      miss_lookup_ = static_cast<uint8_t>(core_->miss_lookup(static_cast<int32_t>(next.size())));
    msg.miss_lookup = miss_lookup_;
    if (!msg.seqs.empty()) world_.send(layout_.target_leader(), msg);
    if (layout_.is_drafter_lead()) {
      idle_since_us_ = trace::active() ? trace::now_us() : 0;
      // The target verifies from this answer's arrival; with no answer to wait for (decode steps,
      // pushed hits) it began when it sent the outcome, about when the outcome arrived here.
      verify_from_ = msg.seqs.empty() && arrived_at_ > 0 ? arrived_at_ : monotonic_seconds();
    }
    const bool drafts = std::any_of(next.begin(), next.end(),
                                    [](const Speculation& s) { return s.plannable(); });
    // Nothing is pre-speculated after an unranked decode step, nor in a round the leader turned
    // it off for; with other drafter ranks the work still goes out, since they commit the
    // outcomes from it.
    const bool job = prespeculate_ && !next.empty() &&
                     ((drafts && outcome.prespeculate) || n_drafters_ > 1);
    if (!msg.seqs.empty() || (job && push_)) {
      miss_lookup_sent_ = miss_lookup_;
    } else if (push_ && miss_lookup_ != miss_lookup_sent_) {  // a leader that takes pushes
      PrespecPush notice;
      notice.round = round;
      notice.miss_lookup = miss_lookup_;
      world_.send(layout_.target_leader(), notice);
      miss_lookup_sent_ = miss_lookup_;
    }
    if (!job) return;
    if (n_drafters_ > 1) {
      PrespecWork w = prespec_work(round, outcome, next);
      for (int r : layout_.drafter_ranks())
        if (r != layout_.rank) world_.send(r, w, std::as_bytes(features));
      shares_missing_ = n_drafters_ - 1;
    }
    round_ = round;
    start_job();
  }

  // A secondary rank: adopt the lead's answers, draft this rank's share, send it to the lead.
  void on_work(const Envelope& env) {
    const PrespecWork w = decode<PrespecWork>(env);
    fault_point(FaultPhase::kRound, w.round,
                fmt::format("adopting the lead's work for round {}", w.round));
    const std::vector<RoundOutcome> outs =
        work_outcomes(w, env.bulk_as<float>(), core_->feature_dim());
    core_->adopt(outs, w.next);
    round_ = w.round;
    trace::set_round(round_);
    start_job();
  }

  void start_job() {
    std::vector<Branch> all = core_->plan_branches();
    planned_ = static_cast<int64_t>(all.size());
    auto mine = std::make_shared<std::vector<Branch>>();
    for (size_t i = 0; i < all.size(); ++i)
      if (static_cast<int>(i % n_drafters_) == index_) mine->push_back(std::move(all[i]));
    dog_.arm(fmt::format("pre-speculating {} branches for round {}", mine->size(), round_),
             opts_.step_s);
    job_running_ = true;
    cut_.store(cut_round_ == round_);  // a secondary whose work came after the lead's cut
    const size_t chunk = core_->options().prespec_chunk > 0
                             ? static_cast<size_t>(core_->options().prespec_chunk)
                             : mine->size();
    auto entries = std::make_shared<std::vector<CacheEntry>>();
    auto seconds = std::make_shared<double>(0);
    auto calls = std::make_shared<std::vector<std::pair<int32_t, double>>>();
    // One drafter rank: draft only what is expected to end before the outcome arrives (see
    // prespec_budget.h), so that a miss waits for no chunk.
    const bool gate = opts_.fit_window && n_drafters_ == 1 && verify_from_ > 0;
    const double deadline = verify_from_ + budget_.window();
    loop_.submit(
        [this, mine, entries, seconds, calls, chunk, gate, deadline, budget = budget_,
         round = round_, push = push_ && layout_.is_drafter_lead(), lookup = miss_lookup_] {
          trace::set_track("drafter compute");
          trace::set_round(round);
          // Likeliest branches first (plan_branches' order); between chunks, stop once the
          // outcome is here (cut_): what is drafted by then is the cache. The outcome never cuts
          // the first chunk (draft-what-fits may still size it to nothing): if verification beat
          // the job's start, the likeliest branches cost about what a fallback draft would, and
          // are a probable hit.
          fault_point(FaultPhase::kPrespec, round,
                      fmt::format("pre-speculating {} branches for round {}", mine->size(),
                                  round));
          const double t0 = monotonic_seconds();
          const std::span<const Branch> todo(*mine);
          for (size_t at = 0; at < todo.size() && (at == 0 || !cut_.load());) {
            size_t n = std::min(chunk, todo.size() - at);
            if (gate)
              n = static_cast<size_t>(budget.branches_within(deadline - monotonic_seconds(),
                                                             static_cast<int32_t>(n)));
            if (n == 0) break;
            trace::Span span("pre-speculate chunk", "drafter", round, static_cast<int64_t>(n));
            const double tc = monotonic_seconds();
            std::vector<CacheEntry> part = core_->draft_branches(todo.subspan(at, n));
            calls->emplace_back(static_cast<int32_t>(n), monotonic_seconds() - tc);
            if (push) push_chunk(prespec_push(round, part), lookup);
            std::move(part.begin(), part.end(), std::back_inserter(*entries));
            at += n;
          }
          if (entries->size() < todo.size())
            trace::instant("pre-speculation cut", "cache", round,
                           static_cast<int64_t>(todo.size() - entries->size()));
          *seconds = monotonic_seconds() - t0;
        },
        [this, entries, seconds, calls] {
          job_running_ = false;
          for (const auto& [n, dt] : *calls) budget_.observe_call(n, dt);
          busy_s_ += *seconds;
          dog_.disarm();
          if (layout_.is_drafter_lead()) {
            for (auto& e : *entries) merged_.push_back(std::move(e));
            maybe_install();
          } else {
            PrespecShare share;
            share.round = round_;
            share.from_rank = layout_.rank;
            share.entries = std::move(*entries);
            world_.send(layout_.drafter_lead(), share);
            idle_since_us_ = trace::active() ? trace::now_us() : 0;
          }
          drain();
        });
  }

  // The lead's job, after each chunk (compute thread): the chunk's entries go to the leader at
  // once, from the loop thread (the transport's), rather than with the last chunk: a
  // pre-speculation longer than the verification still lands its likeliest branches in time.
  // Every entry pushed is installed: the job's entries are all of its chunks.
  void push_chunk(PrespecPush push, uint8_t miss_lookup) {
    push.miss_lookup = miss_lookup;
    loop_.post([this, push = std::move(push)] { world_.send(layout_.target_leader(), push); });
  }

  void on_share(const Envelope& env) {
    PrespecShare s = decode<PrespecShare>(env);
    SSD_CHECK(s.round == round_ && shares_missing_ > 0,
              "drafter lead: a pre-speculation share for round {} from rank {} while at round {}",
              s.round, s.from_rank, round_);
    if (push_) {
      PrespecPush p = prespec_push(round_, s.entries);
      p.miss_lookup = miss_lookup_;
      world_.send(layout_.target_leader(), p);
    }
    for (auto& e : s.entries) merged_.push_back(std::move(e));
    --shares_missing_;
    maybe_install();
    drain();
  }

  void maybe_install() {
    if (job_running_ || shares_missing_ > 0) return;
    core_->install(std::move(merged_), planned_);
    merged_.clear();
  }

  Transport& world_;
  const RankLayout& layout_;
  Drafter& primary_;
  SsdDrafterCore ssd_core_, sd_core_;
  SsdDrafterCore* core_ = &ssd_core_;  // the core of the batch in progress
  bool prespeculate_ = true;
  bool push_ = false;  // the lead: the leader asked for the cache (StartSeqs::push)
  // The lead: how a miss would be answered now (MissLookup, as of the latest answer), and as the
  // leader last heard it.
  uint8_t miss_lookup_ = 0, miss_lookup_sent_ = 0;
  PrespecBudget budget_;     // the lead: what pre-speculation fits before the next outcome
  // The lead: when the target began verifying the round it just answered (0: none pending), and
  // the arrival times of the outcomes queued, the one being answered.
  double verify_from_ = 0;
  std::deque<double> outcome_arrivals_;
  double arrived_at_ = 0;
  double last_arrival_ = 0;    // the previous outcome's arrival (0: none in this batch)
  double answer_draft_s_ = 0;  // the fallback and first drafts that answered it
  DrafterActorOptions opts_;
  Watchdog& dog_;
  ActorLoop loop_;
  int n_drafters_ = 1, index_ = 0;
  std::deque<Envelope> queue_;
  std::vector<int32_t> joining_;  // the lead: joined sequences awaiting their first speculation
  std::vector<int32_t> joining_k_;  // their first speculations' lengths (-1: K)
  int shares_missing_ = 0;
  int64_t round_ = 0;
  std::vector<CacheEntry> merged_;
  int64_t planned_ = 0;            // branches of the round's plan (all ranks' shares)
  std::atomic<bool> cut_{false};   // read by the job between chunks
  int64_t cut_round_ = -1;         // a secondary: the latest round the lead cut
  int64_t cut_sent_round_ = -1;    // the lead: the latest round it cut
  double busy_s_ = 0;
  double idle_since_us_ = 0;  // the timeline: when this rank last finished its part of a round
  bool stopping_ = false;
  bool job_running_ = false;
  std::optional<LeaderWatch> leader_watch_;  // the lead: the target leader's heartbeats
  std::unique_ptr<HeartbeatSender> heartbeat_;  // the lead: its own, to a leader taking pushes
};

}  // namespace

void run_drafter_actor(Transport& world, const RankLayout& layout, Drafter& primary,
                       Drafter* backup, const SsdDrafterOptions& core_opts,
                       const DrafterActorOptions& opts, Watchdog& dog) {
  DrafterActor actor(world, layout, primary, backup, core_opts, opts, dog);
  actor.run();
}

}  // namespace ssd
