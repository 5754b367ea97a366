#include "topology/sim/round_sim.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <tuple>

#include "runtime/core/error.h"
#include "runtime/saguaro/fan_out.h"
#include "runtime/saguaro/miss_policy.h"
#include "runtime/saguaro/prespec_budget.h"
#include "runtime/saguaro/prespec_switch.h"
#include "topology/sim/branch_plan.h"
#include "topology/sim/roofline.h"

namespace ssd::sim {
namespace {

enum class Source { kInitial, kCache, kPrimary, kBackup };

struct Decision {
  int32_t accepted = 0;
  int32_t rank = -1;
  std::optional<bool> hit;
  std::optional<bool> leader;  // SSD: the target leader drafted the next speculation
  std::optional<bool> backup;  // SSD: the drafter answered the miss with its backup (a replay)
};

// Where the outcomes come from: the acceptance model (seeded) or a recorded trace.
class Outcomes {
 public:
  Outcomes(const SimConfig& cfg, SimMode mode, const std::vector<OutcomeRecord>* replay)
      : cfg_(cfg), mode_(mode), rng_(cfg.seed) {
    if (!replay) {
      batch_ = cfg.work.batch;
      target_tokens_.assign(static_cast<size_t>(batch_), cfg.work.tokens);
    } else {
      SSD_CHECK(!replay->empty(), "the outcome trace to replay is empty");
      std::set<int32_t> ids;
      for (const OutcomeRecord& r : *replay) ids.insert(r.seq);
      for (int32_t id : ids) index_[id] = static_cast<int32_t>(index_.size());
      batch_ = static_cast<int32_t>(ids.size());
      target_tokens_.assign(static_cast<size_t>(batch_), 0);
      for (const OutcomeRecord& r : *replay) {
        const int32_t s = index_.at(r.seq);
        records_[{r.round, s}] = r;
        target_tokens_[s] += r.accepted + 1;
        last_round_ = std::max(last_round_, r.round);
      }
      replay_ = true;
    }
    emitted_.assign(static_cast<size_t>(batch_), 0);
  }

  int32_t batch() const { return batch_; }
  bool replaying() const { return replay_; }
  int64_t context(int32_t s) const { return cfg_.work.prompt + emitted_[s]; }

  // Sequences verified in `round` (AR: still generating).
  std::vector<int32_t> active(int64_t round) const {
    std::vector<int32_t> out;
    for (int32_t s = 0; s < batch_; ++s) {
      if (replay_ && mode_ != SimMode::kAr) {
        if (records_.count({round, s})) out.push_back(s);
      } else if (emitted_[s] < target_tokens_[s]) {
        out.push_back(s);
      }
    }
    return out;
  }
  bool more_rounds(int64_t round) const {
    if (replay_ && mode_ != SimMode::kAr) return round <= last_round_;
    for (int32_t s = 0; s < batch_; ++s)
      if (emitted_[s] < target_tokens_[s]) return true;
    return false;
  }
  // The pre-speculation regime the trace recorded for `round` (SSD), if it did.
  std::optional<bool> prespec(int64_t round) const {
    if (!replay_) return std::nullopt;
    for (int32_t s = 0; s < batch_; ++s)
      if (auto it = records_.find({round, s}); it != records_.end() && it->second.prespec)
        return it->second.prespec;
    return std::nullopt;
  }
  // Draft tokens offered to sequence s in `round` (the leader cuts the chain to what is left).
  int32_t k_for(int64_t round, int32_t s) const {
    if (replay_) return records_.at({round, s}).k;
    const int64_t left = target_tokens_[s] - emitted_[s];
    return static_cast<int32_t>(std::clamp<int64_t>(left - 1, 0, cfg_.work.k));
  }
  Decision decide(int64_t round, int32_t s, int32_t k, Source src) {
    Decision d;
    if (replay_) {
      const OutcomeRecord& r = records_.at({round, s});
      d.accepted = r.accepted;
      d.rank = r.bonus_rank;
      d.hit = r.hit;
      d.leader = r.leader;
      d.backup = r.backup;
    } else {
      const AcceptanceParams& acc = src == Source::kBackup ? cfg_.backup_acc : cfg_.primary;
      d.accepted = acc.sample_accepted(k, rng_);
      d.rank = cfg_.primary.sample_bonus_rank(rng_);
    }
    emitted_[s] += d.accepted + 1;
    return d;
  }
  void advance(int32_t s, int64_t tokens) { emitted_[s] += tokens; }
  int32_t seq_id(int32_t s) const {
    for (const auto& [id, i] : index_)
      if (i == s) return id;
    return s;
  }

 private:
  const SimConfig& cfg_;
  SimMode mode_;
  std::mt19937_64 rng_;
  bool replay_ = false;
  int32_t batch_ = 0;
  int64_t last_round_ = -1;
  std::map<int32_t, int32_t> index_;
  std::map<std::pair<int64_t, int32_t>, OutcomeRecord> records_;
  std::vector<int64_t> target_tokens_, emitted_;
};

// The simulation of one run: clocks, counters, the timeline.
class Run {
 public:
  Run(SimMode mode, const SimConfig& cfg, const std::vector<OutcomeRecord>* replay,
      SimCarry* carry)
      : cfg_(cfg), out_(cfg, mode, replay), carry_(carry) {
    res_.mode = mode;
    const SimCluster& c = cfg.cluster;
    drafter_dev_ = c.colocated ? &c.target_device : &c.drafter_device;
  }

  SimResult run() {
    switch (res_.mode) {
      case SimMode::kAr: run_ar(); break;
      case SimMode::kSd: run_sd(); break;
      case SimMode::kSsd: run_ssd(); break;
    }
    return std::move(res_);
  }

 private:
  void event(int32_t rank, const char* role, const char* name, double start, double dur) {
    if (!cfg_.record_events || dur <= 0) return;
    res_.events.push_back({rank, role, name, start, dur});
  }
  int32_t drafter_rank(int32_t d) const {
    return cfg_.cluster.colocated ? 0 : cfg_.cluster.tp + d;
  }

  // One target forward starting at `start`; returns its end. With the drafter in the target's
  // process (colocated: one set of cores and caches), a verification pays the drafter fit's cost
  // per sequence beyond the first (target_seq_s) and, when the drafter drafted since the previous
  // target forward (`after_draft`), its target_switch_s. The calibration measures both in one
  // process; a target on its own rank verifies on cores the drafter does not touch. A lookup
  // drafter pays no switch: its microseconds of drafting leave the target's threads spinning
  // and its caches as they were, and measured so (quiet, 2 threads: `ssd bench --round-times`
  // verified n-gram SD's 3-row rounds in what the profile's back-to-back forward of 3 rows took;
  // docs/simulator.md, "What is left"), where the calibration's short SD runs fit it at 0-0.95 ms
  // from the difference of two timings.
  double target_forward(double start, double rows, double seqs, double context, const char* name,
                        bool verification = false, bool after_draft = false) {
    const SimCluster& c = cfg_.cluster;
    const ForwardCost f = forward_cost(cfg_.target, c.target_device, c.tp, c.tp_link,
                                       {.rows = rows, .seqs = seqs, .context = context});
    const DrafterFit* fit = verification && c.colocated
                                ? c.target_device.drafter_fit(cfg_.drafter.shape.name)
                                : nullptr;
    const bool switches = after_draft && cfg_.drafter.shape.style != DraftStyle::kLookup;
    const double host = verify_host_seconds(c.target_device, rows) +
                        (fit && switches ? fit->target_switch_s : 0) +
                        (fit ? std::max(0.0, seqs - 1) * fit->target_seq_s : 0);
    res_.target_busy_s += f.total_s - f.comm_s + host;
    res_.comm_s += f.comm_s;
    ++res_.rounds;
    for (int32_t r = 0; r < c.tp; ++r) event(r, "target", name, start, f.total_s + host);
    return start + f.total_s + host;
  }
  double message(double start, double bytes, int32_t from, const char* name) {
    if (cfg_.cluster.colocated) return start;
    const double dt = cfg_.cluster.drafter_link.message_s(bytes);
    res_.comm_s += dt;
    event(from, "link", name, start, dt);
    return start + dt;
  }
  double draft(const SimDrafter& d, double n, double suffix, int32_t k, double ctx,
               bool predict_bonus, double kv_seqs = -1) const {
    return draft_seconds(d, *drafter_dev_, n, suffix, k, ctx, predict_bonus, kv_seqs);
  }
  double mean_context(const std::vector<int32_t>& act) const {
    double s = 0;
    for (int32_t i : act) s += static_cast<double>(out_.context(i));
    return act.empty() ? 0 : s / static_cast<double>(act.size());
  }
  double spec_bytes(const std::vector<int32_t>& act, int32_t k) const {
    return 16.0 + static_cast<double>(act.size()) * (16.0 + 8.0 * k);
  }
  double outcome_bytes(const std::vector<int32_t>& accepted) const {
    double b = 16;
    for (int32_t a : accepted)
      b += 16.0 + (a + 1) * (4.0 + 4.0 * static_cast<double>(cfg_.drafter.shape.feature_dim));
    return b;
  }
  void record(int64_t round, int32_t s, int32_t k, const Decision& d) {
    res_.outcomes.push_back(
        {round, out_.seq_id(s), k, d.accepted, d.rank, d.hit, std::nullopt, d.leader, d.backup});
    ++res_.seq_rounds;
    res_.tokens += d.accepted + 1;
  }

  void run_ar() {
    double t = 0;
    for (int64_t step = 0; out_.more_rounds(step); ++step) {
      const std::vector<int32_t> act = out_.active(step);
      const double n = static_cast<double>(act.size());
      t = target_forward(t, n, n, mean_context(act), "decode");
      for (int32_t s : act) {
        out_.advance(s, 1);
        record(step, s, 0, Decision{.accepted = 0, .rank = 0});
      }
    }
    res_.seconds = t;
  }

  // Per round: draft (after the outcome reached the drafter), send, verify, send the outcome.
  void run_sd() {
    double target_free = 0, drafter_start = 0;
    std::vector<int32_t> last_accepted(static_cast<size_t>(out_.batch()), 0);
    {
      const double ready = drafter_start_on_prompt();
      if (cfg_.cluster.colocated) target_free = ready;
      else drafter_start = ready;
    }
    for (int64_t round = 0; out_.more_rounds(round); ++round) {
      const std::vector<int32_t> act = out_.active(round);
      if (act.empty()) continue;
      // A model drafter is asked only for the sequences offered k > 0 (--k auto may choose 0);
      // a lookup drafter looks every sequence up (k 0: its lookup found nothing).
      const bool lookup = cfg_.drafter.shape.style == DraftStyle::kLookup;
      int32_t k = 0;
      double suffix = 0, asked = 0;
      for (int32_t s : act) {
        const int32_t ks = out_.k_for(round, s);
        k = std::max(k, ks);
        if (!lookup && ks == 0) continue;
        suffix += last_accepted[s] + 1;
        asked += 1;
      }
      suffix = asked > 0 ? suffix / asked : 1;
      const double ctx = mean_context(act);
      const double n = static_cast<double>(act.size());
      const double d = asked > 0 && (lookup || k > 0)
                           ? draft(cfg_.drafter, asked, suffix, k, ctx, false)
                           : 0.0;
      const double start = cfg_.cluster.colocated ? target_free : drafter_start;
      event(drafter_rank(0), "drafter", "draft", start, d);
      res_.drafter_busy_s += d;
      const double arrive = message(start + d, spec_bytes(act, k), drafter_rank(0), "speculation");
      const double vstart = std::max(target_free, arrive);
      res_.target_wait_s += vstart - target_free;
      event(0, "target", "wait", target_free, vstart - target_free);
      double rows = 0;
      for (int32_t s : act) rows += out_.k_for(round, s) + 1;
      const double vend = target_forward(vstart, rows, n, ctx, "verify", true, d > 0);
      std::vector<int32_t> acc;
      for (int32_t s : act) {
        const int32_t ks = out_.k_for(round, s);
        Decision dec = out_.decide(round, s, ks, Source::kPrimary);
        dec.hit.reset();
        dec.leader.reset();
        last_accepted[s] = dec.accepted;
        acc.push_back(dec.accepted);
        record(round, s, ks, dec);
      }
      drafter_start = message(vend, outcome_bytes(acc), 0, "outcome");
      target_free = vend;
    }
    res_.seconds = target_free;
  }

  // The drafter's own pass over every sequence's prompt, inside the decode time: in one process
  // after the target's prefill (sd_generation.cpp's start(); the model and Domino drafters catch
  // up lazily, in their first draft call); on a drafter rank in first_speculations(), after the
  // leader's StartSeqs, which remote_decode.cpp sends after starting the decode clock. Returns
  // when the drafter is ready to draft round 0.
  double drafter_start_on_prompt() {
    const double b = static_cast<double>(out_.batch());
    const double t0 = message(0, 16.0 + b * (16.0 + 4.0 * cfg_.work.prompt), 0, "start");
    const double d = draft(cfg_.drafter, b, cfg_.work.prompt, 0, 0, false);
    event(drafter_rank(0), "drafter", "start", t0, d);
    res_.drafter_busy_s += cfg_.cluster.colocated ? d : 0;
    start_busy_ = d;
    return t0 + d;
  }

  // The drafter's miss policy (miss_policy.h), run as the drafter runs it: b* is the default
  // until it has measured enough primary drafts and verifications (here: the simulated ones),
  // then derived from them and from the rounds' acceptance and hits. --miss-policy primary /
  // backup and --critical-batch fix it instead; not-worse adds the runtime's guard.
  MissPolicy miss_policy() const {
    return MissPolicy(miss_policy_options(cfg_.ssd.miss, cfg_.ssd.b_star));
  }
  static SpecSource spec_source(Source s) {
    switch (s) {
      case Source::kInitial: return SpecSource::kInitial;
      case Source::kCache: return SpecSource::kCache;
      case Source::kPrimary: return SpecSource::kPrimary;
      case Source::kBackup: return SpecSource::kBackup;
    }
    return SpecSource::kPrimary;
  }

  // How a miss in a round of `batch` sequences would be answered now, as the drafter tells the
  // leader (SsdDrafterCore::miss_lookup): by a lookup the leader can run itself (the primary when
  // it is one, the backup, an n-gram lookup, when the policy chooses it), or kNone (a model
  // primary drafting on the drafter rank). kNone throughout under --miss-at drafter, and for a
  // leader that takes no pushes (remote_decode.cpp, draft_misses).
  MissLookup miss_lookup(const MissPolicy& policy, int32_t batch) const {
    if (!cfg_.ssd.miss_at_leader || !cfg_.ssd.push) return MissLookup::kNone;
    if (policy.choose(batch) == Fallback::kBackup) return MissLookup::kBackup;
    return cfg_.drafter.shape.style == DraftStyle::kLookup ? MissLookup::kPrimary
                                                           : MissLookup::kNone;
  }
  const SimDrafter& lookup_drafter(MissLookup which) const {
    return which == MissLookup::kPrimary ? cfg_.drafter : cfg_.backup;
  }

  void run_ssd() {
    const SimCluster& c = cfg_.cluster;
    SSD_CHECK(!c.colocated, "ssd needs the drafter on its own rank(s), not in the target's process");
    const int32_t nd = c.drafters;
    const double a_p = cfg_.primary.mean(cfg_.work.k);
    // A job's later batch starts with what its earlier ones taught the drafter and the leader.
    MissPolicy policy = carry_ && carry_->policy ? *carry_->policy : miss_policy();
    double shadow_carry = 0;  // the backup's shadow acceptance not yet observed (< 1 token)
    // The round overhead T_o as the drafter lead measures it (drafter_actor.h): between two
    // outcomes' arrivals, less the verification and the fallback draft that answered the first.
    double last_outcome = -1, last_fallback = 0;
    res_.fan_out = geometric_fan_out(cfg_.work.k, cfg_.ssd.budget, a_p, cfg_.primary.r);
    std::map<int32_t, std::vector<int32_t>> plans;  // k -> fan-out
    auto plan_for = [&](int32_t k) -> const std::vector<int32_t>& {
      auto it = plans.find(k);
      if (it == plans.end())
        it = plans.emplace(k, geometric_fan_out(k, cfg_.ssd.budget, a_p, cfg_.primary.r)).first;
      return it->second;
    };
    const int32_t lead = drafter_rank(0);
    std::vector<Source> src(static_cast<size_t>(out_.batch()), Source::kInitial);
    std::vector<int32_t> last_accepted(static_cast<size_t>(out_.batch()), 0);
    // Whether the leader drafted the sequence's current speculation (no shadow of the backup
    // beside it: the drafter drafts the shadow beside its own primary fallbacks only).
    std::vector<bool> leader_src(static_cast<size_t>(out_.batch()), false);
    double busy = 0;  // drafting summed over ranks

    // Round 0: the lead starts every sequence on its prompt, then drafts each one's first
    // speculation synchronously (first_speculations: k + 1 tokens, the last for the ranking).
    std::vector<int32_t> act = out_.active(0);
    double send = drafter_start_on_prompt();
    busy += start_busy_;
    int32_t first_drafted = 0;  // sequences the first speculations drafted, and their call's time
    double first_s = 0;
    {
      int32_t k0 = 0;
      for (int32_t s : act) {
        k0 = std::max(k0, out_.k_for(0, s));
        first_drafted += out_.k_for(0, s) > 0 ? 1 : 0;
      }
      first_s = k0 > 0 ? draft(cfg_.drafter, static_cast<double>(act.size()), 1, k0,
                               mean_context(act), true)
                       : 0.0;
      event(lead, "drafter", "draft", send, first_s);
      busy += first_s;
      send += first_s;
      if (k0 > 0) ++res_.rounds_waited;  // the first speculations come in an answer
    }
    PrespecSwitch regime = carry_ && carry_->regime ? *carry_->regime : PrespecSwitch{};
    // (the leader's switch: used when the trace does not say)
    bool drafted = true;   // the drafter's model ran since the previous verification
    double arrive = message(send, spec_bytes(act, cfg_.work.k), lead, "speculation");
    double target_free = 0;
    // --miss-at leader: how misses are answered, as the drafter last told the leader (with its
    // first answer, then with each answer or push).
    MissLookup told = miss_lookup(policy, static_cast<int32_t>(act.size()));
    // The lead's draft-what-fits (one drafter rank): its budget learns the windows from the
    // target's verification start to the outcome's arrival and the seconds of its draft calls.
    PrespecBudget budget = carry_ && carry_->budget ? *carry_->budget : PrespecBudget{};
    if (first_drafted > 0) budget.observe_call(first_drafted, first_s);  // drafter_actor.cpp
    const bool gate = cfg_.ssd.fit_window && nd == 1;
    double verify_from = send;  // the lead's clock: when the target began verifying its answer
    // A lookup drafter ranks a decode step's token (ssd_drafter_core.cpp, ranked_decode_step), so
    // branches are planned after it too; a model drafter plans nothing after a decode step.
    const bool ranks_decode_steps = cfg_.drafter.shape.style == DraftStyle::kLookup;
    for (int64_t round = 0; out_.more_rounds(round); ++round) {
      act = out_.active(round);
      if (act.empty()) continue;
      const double n = static_cast<double>(act.size());
      const double ctx = mean_context(act);
      // This round's regime: what the trace recorded, else the leader's switch, else on.
      const bool prespec = out_.prespec(round).value_or(!cfg_.ssd.adaptive_switch || regime.on());
      std::vector<int32_t> ks;
      std::vector<std::vector<int32_t>> fan;
      double rows = 0;
      for (int32_t s : act) {
        ks.push_back(out_.k_for(round, s));
        // Nothing is planned in a round without pre-speculation, nor after an unranked decode step.
        fan.push_back(prespec && (ks.back() > 0 || ranks_decode_steps) ? plan_for(ks.back())
                                                                        : std::vector<int32_t>{});
        rows += ks.back() + 1;
      }
      const double round_start = target_free;
      // The target verifies while the drafter ranks pre-speculate.
      const double vstart = std::max(target_free, arrive);
      res_.target_wait_s += vstart - target_free;
      event(0, "target", "wait", target_free, vstart - target_free);
      // The drafter drafted since the previous verification: this round's first speculations or
      // fallback, or the pre-speculation running beside this verification.
      const double vend = target_forward(vstart, rows, n, ctx, "verify", true, drafted || prespec);
      policy.observe_verify(static_cast<int32_t>(act.size()), vend - vstart);
      std::vector<Decision> dec;
      std::vector<int32_t> acc;
      for (size_t i = 0; i < act.size(); ++i) {
        dec.push_back(out_.decide(round, act[i], ks[i], src[act[i]]));
        acc.push_back(dec.back().accepted);
        if (ks[i] > 0) policy.observe_round(spec_source(src[act[i]]), dec.back().accepted);
        if (ks[i] > 0 && src[act[i]] == Source::kPrimary && !leader_src[act[i]]) {
          // The runtime drafts the backup beside each primary fallback and scores it against the
          // outcome (miss_policy.h, observe_shadow); here the backup's acceptance is its model's
          // mean, carried over rounds so the integers add up to it.
          shadow_carry += cfg_.backup_acc.expected_tokens(ks[i]) - 1;
          const auto m = static_cast<int32_t>(shadow_carry);
          shadow_carry -= m;
          policy.observe_shadow(m);
        }
      }
      const double o = message(vend, outcome_bytes(acc), 0, "outcome");
      if (last_outcome >= 0)
        policy.observe_round_overhead(o - last_outcome - (vend - vstart) - last_fallback);
      last_outcome = o;

      const std::vector<PlannedBranch> plan = plan_branches(fan, cfg_.primary);
      std::vector<RankJob> jobs(static_cast<size_t>(nd));
      const double work_arrive =
          nd > 1 ? send + c.drafter_link.message_s(spec_bytes(act, cfg_.work.k) + 64 * n) : send;
      for (int32_t d = 0; d < nd; ++d) {
        jobs[d].start_s = d == 0 ? send : work_arrive;
        // A job in one call cannot be cut; the lead's cut reaches the others one latency later.
        jobs[d].cut_s = cfg_.ssd.chunk > 0 ? (d == 0 ? o : o + c.drafter_link.latency_s) : 1e300;
      }
      if (gate) {
        const double deadline = verify_from + budget.window();
        jobs[0].fit = [&budget, deadline](double now, int64_t want) -> int64_t {
          return budget.branches_within(deadline - now, static_cast<int32_t>(want));
        };
      }
      // A branch after a speculation of length k drafts min(K, k + 1) tokens (+ 1 for the
      // ranking): SsdDrafterCore's pre-speculation depth (kDepthMargin).
      const DraftProgress prog = run_prespeculation(
          plan, jobs, cfg_.ssd.chunk, [&](const std::vector<int64_t>& part) {
            double suffix = 0, k = 0;
            std::set<int32_t> seqs;
            for (int64_t i : part) {
              suffix += plan[i].k + 1;
              k = std::max<double>(k, std::min(cfg_.work.k, ks[plan[i].seq] + 1));
              seqs.insert(plan[i].seq);
            }
            const double m = static_cast<double>(part.size());
            return draft(cfg_.drafter, m, suffix / m, static_cast<int32_t>(k), ctx, true,
                         static_cast<double>(seqs.size()));
          });
      double installed = send;  // the lead's job done and every share in
      for (int32_t d = 0; d < nd; ++d) {
        busy += prog.busy_s[d];
        res_.branches_drafted += prog.done[d];
        double end = prog.end_s[d];
        if (d > 0) end = end + c.drafter_link.message_s(prog.done[d] * (16.0 + 8.0 * cfg_.work.k));
        installed = std::max(installed, end);
      }
      const double ready = std::max(o, installed);
      for (const auto& ch : prog.chunks) {
        event(drafter_rank(ch.rank), "drafter", "prespec", ch.start_s, ch.dur_s);
        if (ch.rank == 0) budget.observe_call(static_cast<int32_t>(ch.branches), ch.dur_s);
      }
      budget.observe_window(o - verify_from);  // at the outcome's arrival (drafter_actor.cpp)
      // Pushes (drafter_actor.cpp): the lead pushes each of its chunks' entries to the leader as
      // the chunk is drafted, another rank's share goes with the install; an entry is the
      // leader's if its push is there when the verification ends.
      std::vector<double> pushed_s(plan.size(), 1e300);  // [branches] arrival at the leader
      if (cfg_.ssd.push) {
        std::map<double, double> lead_push;  // a lead chunk's end -> its push's arrival
        for (const auto& ch : prog.chunks)
          if (ch.rank == 0)
            lead_push[ch.start_s + ch.dur_s] = message(
                ch.start_s + ch.dur_s, 16.0 + ch.branches * (32.0 + 8.0 * cfg_.work.k), lead,
                "push");
        int64_t shared = 0;  // the other ranks' entries, pushed with the install
        for (int32_t d = 1; d < nd; ++d) shared += prog.done[d];
        const double others =
            shared > 0 ? message(installed, 16.0 + shared * (32.0 + 8.0 * cfg_.work.k), lead, "push")
                       : 1e300;
        for (size_t i = 0; i < plan.size(); ++i)
          if (prog.drafted[i])
            pushed_s[i] = i % static_cast<size_t>(nd) == 0 ? lead_push.at(prog.drafted_s[i]) : others;
      }
      res_.branches_planned += static_cast<int64_t>(plan.size());

      // Look every outcome up in the installed cache.
      std::map<std::tuple<int32_t, int32_t, int32_t>, size_t> where;
      for (size_t i = 0; i < plan.size(); ++i) where[{plan[i].seq, plan[i].k, plan[i].rank}] = i;
      const std::vector<int32_t> next = out_.active(round + 1);
      const std::set<int32_t> running(next.begin(), next.end());
      std::vector<int32_t> missed, given;  // given: drafted by the leader (--miss-at leader)
      std::vector<size_t> record_at(static_cast<size_t>(out_.batch()));  // in res_.outcomes
      // The lookup the leader drafts with: the one the drafter named (a replayed trace may say
      // the leader drafted where this run's policy would not: then the primary if it is a lookup,
      // else the backup).
      const MissLookup leader_lookup =
          told != MissLookup::kNone ? told
          : cfg_.drafter.shape.style == DraftStyle::kLookup ? MissLookup::kPrimary
                                                            : MissLookup::kBackup;
      std::vector<bool> pushed_hit(act.size(), false);  // the leader holds its next speculation
      for (size_t i = 0; i < act.size(); ++i) {
        Decision& d = dec[i];
        auto it = where.find({static_cast<int32_t>(i), d.accepted, d.rank});
        const bool planned = it != where.end();
        res_.planned += planned;
        // A replayed record without "hit" (a request's last round in a real run: no lookup
        // followed) is counted as neither and recorded as it was.
        const bool counted = d.hit.has_value() || !out_.replaying();
        const bool hit = d.hit.value_or(planned && prog.drafted[it->second]);
        pushed_hit[i] = hit && planned && pushed_s[it->second] <= vend;
        // --miss-at leader (remote_decode.cpp, draft_misses): an outcome with a next speculation
        // to draft that no push answered is drafted by the leader while the drafter answers
        // misses with a lookup, a hit whose push came late included (the drafter then adopts the
        // leader's draft: a miss). A replayed record that says so is followed.
        const bool drafts_next = running.count(act[i]) && out_.k_for(round + 1, act[i]) > 0;
        const bool leader = d.leader.value_or(drafts_next && !pushed_hit[i] &&
                                              told != MissLookup::kNone &&
                                              !(d.hit.has_value() && *d.hit));
        if (!d.hit) d.hit = hit && !leader;
        d.leader = leader;
        if (counted) ++(*d.hit ? res_.hits : res_.misses);
        if (counted) policy.observe_lookup(*d.hit);
        Decision shown = d;
        if (!counted) shown.hit.reset();
        record(round, act[i], ks[i], shown);
        record_at[act[i]] = res_.outcomes.size() - 1;
        last_accepted[act[i]] = d.accepted;
        src[act[i]] = *d.hit ? Source::kCache : Source::kPrimary;
        leader_src[act[i]] = leader;
        if (leader) {
          given.push_back(act[i]);
          src[act[i]] = leader_lookup == MissLookup::kBackup ? Source::kBackup : Source::kPrimary;
        } else if (!*d.hit) {
          missed.push_back(act[i]);
        }
      }
      const int64_t fallback_primary_before = res_.fallback_primary;
      // Misses: the primary drafts them now (b <= b*), or the backup answers at once, each at
      // the length the leader asks next (k' + 1 drafted); a decode step next (k' = 0) is
      // neither looked up nor drafted.
      double fb = 0;
      // The next round waits for no answer when each of its sequences is a pushed hit, a miss
      // the leader drafted or a decode step (remote_decode.cpp, take_pushed, draft_misses);
      // otherwise the answer carries the rest.
      bool answer_comes = false;
      for (size_t i = 0; i < act.size(); ++i)
        if (running.count(act[i]) && out_.k_for(round + 1, act[i]) > 0 && !pushed_hit[i] &&
            !leader_src[act[i]])
          answer_comes = true;
      if (answer_comes) ++res_.rounds_waited;
      // The leader's lookups, before it sends the outcome (host time on the target's side,
      // microseconds: the outcome's departure is not delayed by them here).
      double leader_s = 0, adopt = 0;
      std::erase_if(given, [&](int32_t s) { return !running.count(s); });
      if (!given.empty()) {
        const MissLookup which = leader_lookup;
        double suffix = 0;
        int32_t k_given = 0;
        for (int32_t s : given) {
          suffix += last_accepted[s] + 1;
          k_given = std::max(k_given, out_.k_for(round + 1, s));
        }
        const double m = static_cast<double>(given.size());
        leader_s = draft_seconds(lookup_drafter(which), c.target_device, m, suffix / m, k_given,
                                 ctx, false);
        event(0, "target", "leader lookup", vend, leader_s);
        res_.target_busy_s += leader_s;
        res_.leader_drafted += static_cast<int64_t>(m);
        // The drafter adopts the leader's drafts and ranks them with its own copy of that lookup
        // (SsdDrafterCore::adopt_given, after its fallback) before it pre-speculates after them.
        adopt = draft(lookup_drafter(which), m, suffix / m, k_given, ctx, true);
      }
      std::erase_if(missed, [&](int32_t s) { return !running.count(s); });
      int32_t k_next = 0;
      for (int32_t s : missed) k_next = std::max(k_next, out_.k_for(round + 1, s));
      std::erase_if(missed, [&](int32_t s) { return out_.k_for(round + 1, s) == 0; });
      if (!missed.empty()) {
        // The fallback a replayed record names (the runtime's policy chooses one per round for
        // all its misses), else this run's policy's choice; the record says which it was.
        std::optional<bool> told;
        for (int32_t s : missed)
          if (const std::optional<bool> b = res_.outcomes[record_at[s]].backup) told = b;
        const bool primary =
            told ? !*told : policy.choose(static_cast<int32_t>(act.size())) == Fallback::kPrimary;
        double suffix = 0;
        for (int32_t s : missed) {
          suffix += last_accepted[s] + 1;
          src[s] = primary ? Source::kPrimary : Source::kBackup;
          res_.outcomes[record_at[s]].backup = !primary;
        }
        const double m = static_cast<double>(missed.size());
        const double f = draft(primary ? cfg_.drafter : cfg_.backup, m, suffix / m, k_next, ctx,
                               true);
        (primary ? res_.fallback_primary : res_.fallback_backup) += static_cast<int64_t>(m);
        if (primary) policy.observe_primary_draft(static_cast<int32_t>(m), f);
        event(lead, "drafter", "fallback", ready + fb, f);
        busy += f;
        fb += f;
      }
      event(lead, "drafter", "adopt", ready + fb, adopt);
      busy += adopt;
      fb += adopt;
      send = ready + fb;
      last_fallback = fb;
      drafted = fb > 0 && res_.fallback_primary > fallback_primary_before;
      // The lead's next window starts at its answer, or (no answer) at the outcome's arrival.
      verify_from = answer_comes ? send : o;
      arrive = answer_comes ? message(send, spec_bytes(next, cfg_.work.k), lead, "speculation")
                            : vend + leader_s;
      target_free = vend + leader_s;
      told = miss_lookup(policy, static_cast<int32_t>(next.size()));
      int64_t emitted = 0;
      for (int32_t a : acc) emitted += a + 1;
      regime.observe_round(emitted, vend - round_start);
    }
    res_.drafter_busy_s = busy / nd;
    res_.seconds = target_free;
    res_.b_star = policy.critical_batch();
    if (carry_) {
      carry_->policy = policy;
      carry_->budget = budget;
      carry_->regime = regime;
    }
  }

  const SimConfig& cfg_;
  Outcomes out_;
  SimResult res_;
  const DeviceProfile* drafter_dev_ = nullptr;
  double start_busy_ = 0;  // the drafter's start on the prompts (drafter_start_on_prompt)
  SimCarry* carry_ = nullptr;
};

}  // namespace

SimResult simulate(SimMode mode, const SimConfig& cfg, const std::vector<OutcomeRecord>* replay,
                   SimCarry* carry) {
  cfg.validate();
  Run run(mode, cfg, replay, carry);
  return run.run();
}

}  // namespace ssd::sim
