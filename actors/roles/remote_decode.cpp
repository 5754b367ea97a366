#include "actors/roles/remote_decode.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "actors/roles/drafter_wire.h"
#include "actors/roles/round_speculations.h"
#include "runtime/core/error.h"
#include "runtime/core/trace.h"
#include "runtime/generate/token_picker.h"
#include "runtime/spec/verify_round.h"

namespace ssd {

RemoteDecoder::RemoteDecoder(TargetModel& target, Transport& world, const RankLayout& layout,
                             std::vector<int32_t> feature_layers, int32_t k, Watchdog& dog,
                             double step_s, bool auto_k, std::vector<int32_t> length_cycle,
                             const PrespecSwitchOptions& prespec)
    : target_(target),
      world_(world),
      layout_(layout),
      feature_layers_(std::move(feature_layers)),
      k_(k),
      sd_length_(SpecLengthOptions{.k_max = k, .automatic = auto_k, .cycle = length_cycle}),
      ssd_length_(SpecLengthOptions{.k_max = k, .automatic = auto_k, .cycle = length_cycle}),
      ssd_off_length_(SpecLengthOptions{.k_max = k, .automatic = auto_k, .cycle = length_cycle}),
      prespec_(prespec),
      dog_(dog),
      step_s_(step_s),
      link_(world, layout, dog, step_s) {
  SSD_CHECK(layout.n_drafters() > 0, "a remote drafter needs a drafter rank ({})",
            layout.summary());
  for (int32_t l : feature_layers_)
    SSD_CHECK(l >= 0 && l < target.config().n_layers,
              "the drafter asks for target layer {}, but the target has layers 0..{}", l,
              target.config().n_layers - 1);
}

// One run's state on the leader: the requests, their results so far, and each sequence's place.
struct RemoteDecoder::Run {
  struct Seq {
    SeqId kv = -1;
    int32_t id = 0;  // the drafter's sequence id (unique over the job)
    int32_t root = 0, root_pos = 0;
    bool running = false;
    // ssd: next round's speculation when it is here before the answer: taken from the drafter's
    // push when the outcome hit it, or drafted by the leader (--miss-at leader)
    std::optional<SeqSpeculation> ready;
  };
  Run(TargetModel& target, std::span<const GenerationRequest> r, const BatchTokenCallback& cb,
      std::vector<SpecLengthController*> lens, int32_t k_max)
      : reqs(r), on_token(cb), seqs(r.size()), tseqs(target), lengths(std::move(lens)),
        k(k_max), chosen(r.size(), 0) {}
  bool emit(size_t i, int32_t tok) { return emit_token(reqs[i], out.gen[i], i, tok, on_token); }
  // Ends sequence i: its decode time, its KV pages, its length estimates.
  void finish(size_t i) {
    seqs[i].running = false;
    out.gen[i].decode_s = monotonic_seconds() - t_decode;
    tseqs.release(seqs[i].kv);
    for (SpecLengthController* l : lengths) l->finish(seqs[i].id);
  }
  // The next speculation's length of each of `which` (indices into seqs), capped by the tokens
  // the request has left after the one the round emits anyway.
  void choose(const std::vector<size_t>& which) {
    std::vector<int32_t> ids, limit;
    for (size_t i : which) {
      ids.push_back(seqs[i].id);
      limit.push_back(static_cast<int32_t>(std::clamp<int64_t>(
          reqs[i].max_new_tokens - static_cast<int64_t>(out.gen[i].tokens.size()) - 1, 0, k)));
    }
    const std::vector<int32_t> ks = length().choose(ids, limit);
    for (size_t j = 0; j < which.size(); ++j) chosen[which[j]] = ks[j];
  }

  std::span<const GenerationRequest> reqs;
  const BatchTokenCallback& on_token;
  RemoteDecodeResult out;
  std::vector<Seq> seqs;
  TargetSeqs tseqs;
  int64_t feature_dim = 0;  // floats of target features per token the drafter conditions on
  double t_decode = 0;      // when decoding began (after the prefills)
  bool prespeculate = false;
  uint64_t memory_scope = 0;  // the drafters' memory of earlier requests (StartSeqs)
  std::vector<int64_t> last_record;  // index in out.outcomes of each request's latest round
  // This mode's length policies (--k auto): one, or in ssd one per pre-speculation regime.
  std::vector<SpecLengthController*> lengths;
  bool prespec_on = true;  // ssd: this round's regime (PrespecSwitch)
  SpecLengthController& length() { return *lengths[prespec_on || lengths.size() == 1 ? 0 : 1]; }
  int64_t emitted() const {
    int64_t n = 0;
    for (const GenerationResult& g : out.gen) n += static_cast<int64_t>(g.tokens.size());
    return n;
  }
  int32_t k = 0;                 // K
  std::vector<int32_t> chosen;   // [requests] the length asked for each next speculation
  std::optional<RoundSpeculations> specs;  // this round's (taken, not yet verified)
};

RemoteDecodeResult RemoteDecoder::run(std::span<const GenerationRequest> reqs, bool prespeculate,
                                      const BatchTokenCallback& on_token, uint64_t memory_scope) {
  check_batch_context(target_, reqs, k_);
  Run run(target_, reqs, on_token,
          prespeculate ? std::vector<SpecLengthController*>{&ssd_length_, &ssd_off_length_}
                       : std::vector<SpecLengthController*>{&sd_length_},
          k_);
  run.out.gen.resize(reqs.size());
  run.out.sd.resize(reqs.size());
  for (SdStats& s : run.out.sd) size_stats(s, k_);
  run.feature_dim = static_cast<int64_t>(target_.config().dim) *
                    static_cast<int64_t>(feature_layers_.size());
  const int64_t bytes0 = link_.bytes();
  run.prespeculate = prespeculate;
  run.memory_scope = memory_scope;
  run.prespec_on = !prespeculate || prespec_.on();
  run.last_record.assign(reqs.size(), -1);
  trace::set_track("target");
  trace::set_round(0);
  start_sequences(run, prespeculate);
  std::vector<size_t> active;
  for (int64_t round = 0;; ++round) {
    active.clear();
    for (size_t i = 0; i < reqs.size(); ++i)
      if (run.seqs[i].running) active.push_back(i);
    if (active.empty()) break;
    trace::set_round(round);
    // ssd: the regime of this round's outcome, and the length policy that measures it.
    run.prespec_on = !prespeculate || prespec_.on();
    const double t0 = monotonic_seconds();
    const int64_t emitted0 = run.emitted();
    take_speculations(run, round);
    verify_round_and_answer(run, active, round);
    if (prespeculate) prespec_.observe_round(run.emitted() - emitted0, monotonic_seconds() - t0);
  }
  run.out.split.bytes_exchanged = link_.bytes() - bytes0;
  run.out.drafter_loss = link_.loss();
  return std::move(run.out);
}

// Prefills every request as AR does, picks its first token from the prefill's logits, and starts
// the drafter's sequences with the prompt features it conditions on.
void RemoteDecoder::start_sequences(Run& run, bool prespeculate) {
  StartSeqs start;
  std::vector<float> features;
  start.feature_dim = run.feature_dim;
  start.prespeculate = prespeculate;
  start.memory_scope = run.memory_scope;
  link_.set_memory_scope(run.memory_scope);
  for (size_t i = 0; i < run.reqs.size(); ++i) {
    const GenerationRequest& req = run.reqs[i];
    Watchdog::Scope scope(dog_, fmt::format("prefilling request {}", i), step_s_);
    if (faults_ && i == 0) faults_->at(FaultPhase::kPrefill, 0, "prefilling request 0");
    Run::Seq& s = run.seqs[i];
    s.kv = run.tseqs.create();
    s.id = next_seq_id_++;
    trace::Span span("prefill", "target", 0, 1);
    PrefillResult pre = prefill(target_, s.kv, req.prompt, req.prefill_chunk, feature_layers_);
    run.out.gen[i].prompt_tokens = static_cast<int64_t>(req.prompt.size());
    run.out.gen[i].prefill_s = pre.seconds;
    if (req.max_new_tokens == 0) {
      run.tseqs.release(s.kv);
      continue;
    }
    s.root = target_.picker().sample(pre.last, 0, req.sampler, req.stream, 0);
    s.root_pos = static_cast<int32_t>(req.prompt.size());
    s.running = run.emit(i, s.root);
    if (!s.running) {
      run.tseqs.release(s.kv);
      continue;
    }
    link_.started(s.id, req.prompt, std::span<const int32_t>(&s.root, 1));
    start.seqs.push_back(s.id);
    start.prompts.push_back(req.prompt);
    start.emitted.push_back({s.root});
    start.streams.push_back(req.stream);
    start.feature_rows.push_back(run.feature_dim > 0 ? static_cast<int64_t>(req.prompt.size()) : 0);
    features.insert(features.end(), pre.features.begin(), pre.features.end());
  }
  std::vector<size_t> started;
  for (size_t i = 0; i < run.reqs.size(); ++i)
    if (run.seqs[i].running) started.push_back(i);
  run.choose(started);
  for (size_t i : started) start.first_k.push_back(run.chosen[i]);
  run.t_decode = monotonic_seconds();
  if (start.seqs.empty() || link_.loss()) return;
  link_.start_batch(start, std::as_bytes(std::span<const float>(features)));
}

// Receives round `round`'s speculations (answered from the cache in --mode ssd when it hit) and
// hands each to its sequence.
void RemoteDecoder::take_speculations(Run& run, int64_t round) {
  RoundSpeculations& specs =
      run.specs.emplace(round, k_, static_cast<int32_t>(target_.config().vocab));
  for (size_t i = 0; i < run.seqs.size(); ++i) {
    Run::Seq& s = run.seqs[i];
    if (!s.running) continue;
    specs.ask(s.id, run.chosen[i]);
    if (s.ready && run.chosen[i] > 0) specs.give(s.id, std::move(*s.ready));
    s.ready.reset();
  }
  // Decode steps, pushed hits and misses the leader drafted alone: no answer comes, the round
  // starts at once (the tokens asked cost no wait: the policy's draft cost).
  if (!specs.answer_comes()) {
    run.length().observe_draft(specs.asked(), 0.0);
    return;
  }
  ++run.out.split.rounds_waited;
  const double tw = monotonic_seconds();
  trace::Span wait("wait for speculation", "target", round,
                   std::count_if(run.seqs.begin(), run.seqs.end(),
                                 [](const Run::Seq& s) { return s.running; }));
  std::optional<SpeculationMsg> answer;
  if (!link_.loss()) {
    try {
      answer = link_.receive_answer(round);
    } catch (const DrafterLost& e) {
      lose(run, e, round);
    }
  }
  if (link_.loss()) {
    speculate_without_drafter(run, specs);
    return;
  }
  const double wait_dt = monotonic_seconds() - tw;
  run.out.split.target_wait_s += wait_dt;
  run.length().observe_draft(specs.asked(), wait_dt);
  specs.take(std::move(*answer));
}

// No answer comes (the drafter is lost): every running sequence still awaiting its speculation
// has it drafted here with the leader's lookup copy (held from the start or built at the loss),
// or, when none could be built, every sequence verifies an empty speculation (a plain decode
// step): DrafterLeadLink::speculate_without_drafter, which the server's engine shares.
void RemoteDecoder::speculate_without_drafter(Run& run, RoundSpeculations& specs) {
  std::vector<DrafterLeadLink::Awaiting> seqs;
  std::vector<size_t> index;  // the run's sequence of each entry of seqs
  for (size_t i = 0; i < run.seqs.size(); ++i) {
    if (!run.seqs[i].running) continue;
    seqs.push_back({run.seqs[i].id, run.chosen[i], &run.reqs[i],
                    static_cast<uint32_t>(run.out.gen[i].tokens.size())});
    index.push_back(i);
  }
  const std::optional<std::vector<size_t>> drafted = link_.speculate_without_drafter(specs, seqs);
  if (!drafted) {  // decode steps
    for (size_t i : index) run.chosen[i] = 0;
    return;
  }
  for (size_t j : *drafted) note_leader_drafted(run, index[j]);
  run.length().observe_draft(specs.asked(), 0.0);  // a lookup's draft costs no wait
}

// Every running sequence, with its prompt and the tokens it emitted so far (as the link's lookup
// copies have seen them: started with the first, committed after each verification).
void RemoteDecoder::lose(const Run& run, const DrafterLost& e, int64_t round) {
  std::vector<DrafterLeadLink::RunningSeq> running;
  for (size_t i = 0; i < run.seqs.size(); ++i)
    if (run.seqs[i].running)
      running.push_back({run.seqs[i].id, run.reqs[i].prompt, run.out.gen[i].tokens});
  link_.lose(e, round, running);
}

void RemoteDecoder::note_leader_drafted(Run& run, size_t i) {
  ++run.out.split.leader_drafted;
  // The outcome trace: the latest round's record (its "hit" comes with the next round: a miss).
  if (run.prespeculate && run.last_record[i] >= 0)
    run.out.outcomes[static_cast<size_t>(run.last_record[i])].leader = true;
}

// The verification input of active sequence i: its speculation cut to the length asked for it
// and to the depth the request has left (as in single-process SD, a round may not decide more
// tokens than that), and checked (RoundSpeculations::tree).
VerifyInput RemoteDecoder::verify_input(Run& run, size_t i, DraftTree& tree) const {
  const Run::Seq& s = run.seqs[i];
  tree = run.specs->tree(
      s.id, run.reqs[i].max_new_tokens - static_cast<int64_t>(run.out.gen[i].tokens.size()));
  VerifyInput in;
  in.kv_seq = s.kv;
  in.root = s.root;
  in.root_pos = s.root_pos;
  in.tree = &tree;
  in.sampler = run.reqs[i].sampler;
  in.stream = run.reqs[i].stream;
  in.step = static_cast<uint32_t>(run.out.gen[i].tokens.size());
  return in;
}

// Verifies every active sequence's speculation in one target forward, emits the accepted tokens,
// and sends the drafter the outcome (and the sequences that finished).
void RemoteDecoder::verify_round_and_answer(Run& run, const std::vector<size_t>& active,
                                            int64_t round) {
  Watchdog::Scope scope(dog_, fmt::format("verifying round {}", round), step_s_);
  if (faults_)
    faults_->at(FaultPhase::kPrespec, round,
                fmt::format("verifying round {} (the drafter pre-speculates meanwhile)", round));
  std::vector<DraftTree> trees(active.size());
  std::vector<VerifyInput> inputs(active.size());
  for (size_t a = 0; a < active.size(); ++a)
    inputs[a] = verify_input(run, active[a], trees[a]);
  const double tv = monotonic_seconds();
  // The outcome sent to the drafter carries tokens and features, not logits: they may stay on
  // the device.
  const VerifyRoundResult vr = [&] {
    trace::Span span("verify", "target", round, static_cast<int64_t>(active.size()));
    return verify_round(target_, inputs, feature_layers_, /*host_logits=*/false);
  }();
  const double verify_dt = monotonic_seconds() - tv;
  run.out.split.verify_s += verify_dt;
  ++run.out.split.rounds;
  int64_t rows = 0;
  for (const DraftTree& t : trees) rows += 1 + static_cast<int64_t>(t.size());
  run.length().observe_verify(rows, verify_dt);

  Outcome outcome;
  outcome.round = round + 1;
  outcome.feature_dim = run.feature_dim;
  outcome.verify_s = verify_dt;
  outcome.prespeculate = run.prespec_on;
  if (!run.prespec_on) ++run.out.split.rounds_prespec_off;
  std::vector<float> round_features;
  FinishSeqs finished;
  std::vector<size_t> still;  // the sequences of outcome.seqs, in order
  for (size_t a = 0; a < active.size(); ++a) {
    const size_t i = active[a];
    const VerifyResult& v = vr.seqs[a].result;
    SdStats& st = run.out.sd[i];
    st.verify_s += verify_dt;
    st.target_forward_s += vr.forward_s;
    st.forwards++;
    run.out.gen[i].forwards++;
    count_round(st, trees[a], v, k_, run.chosen[i]);
    for (SpecLengthController* l : run.lengths)  // acceptance is the drafter's, in any regime
      l->observe_outcome(run.seqs[i].id, static_cast<int32_t>(trees[a].size()),
                         static_cast<int32_t>(v.path.size()));
    // The outcome trace: this round, and the previous round's lookup, answered by where this
    // round's speculation came from; a miss the drafter rank answered (not one the leader
    // drafted) also says with which fallback ("backup").
    const SpecSource source = run.specs->source(run.seqs[i].id);
    if (run.prespeculate && run.last_record[i] >= 0 && source != SpecSource::kDecodeStep) {
      sim::OutcomeRecord& last = run.out.outcomes[static_cast<size_t>(run.last_record[i])];
      last.hit = source == SpecSource::kCache;
      if ((source == SpecSource::kPrimary || source == SpecSource::kBackup) &&
          !last.leader.value_or(false))
        last.backup = source == SpecSource::kBackup;
    }
    run.last_record[i] = static_cast<int64_t>(run.out.outcomes.size());
    // "leader" (ssd): false until take_ahead() drafts this outcome's next speculation here.
    run.out.outcomes.push_back({round, static_cast<int32_t>(i), static_cast<int32_t>(trees[a].size()),
                                static_cast<int32_t>(v.path.size()), -1, std::nullopt,
                                run.prespeculate ? std::optional<bool>(run.prespec_on)
                                                 : std::nullopt,
                                run.prespeculate ? std::optional<bool>(false) : std::nullopt});
    std::optional<SeqOutcome> o = apply_verification(run, i, v);
    if (!o) {
      finished.seqs.push_back(run.seqs[i].id);
      continue;
    }
    if (run.feature_dim > 0)
      round_features.insert(round_features.end(), vr.seqs[a].features.begin(),
                            vr.seqs[a].features.end());
    outcome.seqs.push_back(std::move(*o));
    still.push_back(i);
  }
  run.choose(still);  // the next round's lengths, from every round verified so far
  for (size_t j = 0; j < still.size(); ++j) outcome.seqs[j].next_k = run.chosen[still[j]];
  try {
    link_.poll(round);  // the round's pushes, and the lead's heartbeats
  } catch (const DrafterLost& e) {
    lose(run, e, round);
  }
  take_ahead(run, round, still, outcome);  // after a loss: drafted here, or nothing
  if (link_.loss()) return;                  // nobody to tell
  if (!finished.seqs.empty()) link_.send(finished);
  if (!outcome.seqs.empty())
    link_.send(outcome, std::as_bytes(std::span<const float>(round_features)));
  if (faults_)
    faults_->at(FaultPhase::kRound, round,
                fmt::format("after sending the outcome of round {}", round));
}

// The outcomes of `still` whose next speculation is here before the answer (pushed hits, misses
// drafted by the leader; after a loss, every one its lookup copy drafts) become their next
// speculations at once: no wait for the answer.
void RemoteDecoder::take_ahead(Run& run, int64_t round, const std::vector<size_t>& still,
                               Outcome& outcome) {
  for (size_t j = 0; j < still.size(); ++j) {
    const size_t i = still[j];
    SeqOutcome& o = outcome.seqs[j];
    std::optional<SeqSpeculation> next = link_.ahead(
        round, o, run.reqs[i], static_cast<uint32_t>(run.out.gen[i].tokens.size()));
    if (!next) continue;
    run.seqs[i].ready = std::move(next);
    if (o.pushed) ++run.out.split.pushed;
    if (o.leader_drafted) note_leader_drafted(run, i);
  }
}

// Sequence i after its verification `v`: the hit/miss figures, its emitted tokens, its new root.
// Returns the outcome the drafter needs, or nothing when the sequence finished (released).
std::optional<SeqOutcome> RemoteDecoder::apply_verification(Run& run, size_t i,
                                                            const VerifyResult& v) {
  Run::Seq& s = run.seqs[i];
  SplitFigures& split = run.out.split;
  const int32_t accepted = static_cast<int32_t>(v.path.size());
  const SpecSource source = run.specs->source(s.id);
  if (source == SpecSource::kCache) {
    ++split.hits;
    split.accepted_hit += accepted;
  } else if (source == SpecSource::kDecodeStep) {
    ++split.decode_steps;
  } else if (source != SpecSource::kInitial) {
    ++split.misses;
    split.accepted_miss += accepted;
  }
  SeqOutcome o;
  o.seq = s.id;
  o.accepted = accepted;
  o.feature_from = s.root_pos;
  o.feature_rows = run.feature_dim > 0 ? 1 + accepted : 0;
  bool running = true;
  for (int32_t tok : v.emitted) {
    o.emitted.push_back(tok);
    running = run.emit(i, tok);
    if (!running) break;
  }
  s.root = v.emitted.back();
  s.root_pos += accepted + 1;
  if (!running) {
    run.finish(i);
    link_.finished(s.id);  // as the drafter's: without the round's tokens
    return std::nullopt;
  }
  link_.committed(s.id, o.emitted);
  return o;
}

namespace {

// Applies f(mine, theirs) to every scalar counter and time of the drafter's figures (not the
// per-k lists, nor the plan: fan-out and b*).
template <class F>
void each_counter(DrafterStatsMsg& d, const DrafterStatsMsg& o, F f) {
  for (int64_t DrafterStatsMsg::*m :
       {&DrafterStatsMsg::rounds, &DrafterStatsMsg::hits, &DrafterStatsMsg::misses,
        &DrafterStatsMsg::fallback_primary, &DrafterStatsMsg::fallback_backup,
        &DrafterStatsMsg::branches, &DrafterStatsMsg::branches_planned,
        &DrafterStatsMsg::branches_cached, &DrafterStatsMsg::prespec_cut,
        &DrafterStatsMsg::predicted})
    f(d.*m, o.*m);
  for (double DrafterStatsMsg::*m :
       {&DrafterStatsMsg::prespec_s, &DrafterStatsMsg::fallback_s, &DrafterStatsMsg::busy_s})
    f(d.*m, o.*m);
}

}  // namespace

void SplitFigures::add(const SplitFigures& o) {
  target_wait_s += o.target_wait_s;
  verify_s += o.verify_s;
  bytes_exchanged += o.bytes_exchanged;
  rounds += o.rounds;
  hits += o.hits;
  misses += o.misses;
  accepted_hit += o.accepted_hit;
  accepted_miss += o.accepted_miss;
  decode_steps += o.decode_steps;
  rounds_prespec_off += o.rounds_prespec_off;
  pushed += o.pushed;
  leader_drafted += o.leader_drafted;
  rounds_waited += o.rounds_waited;
  // The drafter's counters and times add up; its plan (fan-out, b*) is the later one's.
  const DrafterStatsMsg before = drafter;
  drafter = o.drafter;
  each_counter(drafter, before, [](auto& x, auto y) { x += y; });
}

std::string SplitFigures::hit_rate_text() const {
  if (drafter.prespec_cut == 0) return fmt::format("{:.2f}", hit_rate());
  return fmt::format("{:.2f} ({:.2f} planned)", hit_rate(), predicted_rate());
}

DrafterStatsMsg since(const DrafterStatsMsg& after, const DrafterStatsMsg& before) {
  DrafterStatsMsg d = after;
  each_counter(d, before, [](auto& x, auto y) { x -= y; });
  for (size_t i = 0; i < d.hits_at_k.size() && i < before.hits_at_k.size(); ++i)
    d.hits_at_k[i] -= before.hits_at_k[i];
  for (size_t i = 0; i < d.outcomes_at_k.size() && i < before.outcomes_at_k.size(); ++i)
    d.outcomes_at_k[i] -= before.outcomes_at_k[i];
  return d;
}

DrafterStatsMsg RemoteDecoder::drafter_stats() {
  if (link_.loss()) return last_stats_;
  link_.send(DrafterStatsAsk{});
  try {
    last_stats_ = decode<DrafterStatsMsg>(
        link_.receive(MsgKind::kDrafterStats, "asking the drafter's figures"));
  } catch (const DrafterLost& e) {
    link_.lose(e, -1, {});  // between runs: no sequence is running
  }
  return last_stats_;
}

void RemoteDecoder::shutdown_drafters() {
  const std::optional<DrafterLoss>& loss = link_.loss();
  if (!loss) {
    world_.send(layout_.drafter_lead(), DrafterShutdown{});
    return;
  }
  // The lead relays the shutdown; without it the leader tells the other drafter ranks itself.
  for (int r : layout_.drafter_ranks())
    if (r != loss->rank) world_.send(r, DrafterShutdown{});
}

}  // namespace ssd
