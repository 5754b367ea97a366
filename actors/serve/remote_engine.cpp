#include "actors/serve/remote_engine.h"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/core/error.h"
#include "runtime/generate/token_picker.h"
#include "runtime/saguaro/speculation.h"
#include "runtime/spec/verify_round.h"

namespace ssd {

namespace {

// Whether any of these first lengths asks the drafter for tokens (an answer then comes).
bool drafts_any(const std::vector<int32_t>& first_k) {
  return std::any_of(first_k.begin(), first_k.end(), [](int32_t k) { return k > 0; });
}

}  // namespace

RemoteEngine::RemoteEngine(TargetModel& target, Transport& world, const RankLayout& layout,
                           Watchdog& dog, const RemoteEngineOptions& opts, ServeMetrics& metrics)
    : target_(target),
      dog_(dog),
      opts_(opts),
      metrics_(metrics),
      link_(world, layout, dog, opts.step_s),
      length_(SpecLengthOptions{.k_max = opts.k, .automatic = opts.auto_k}),
      off_length_(SpecLengthOptions{.k_max = opts.k, .automatic = opts.auto_k}),
      prespec_(opts.prespec),
      dim_(static_cast<int64_t>(target.config().dim) *
           static_cast<int64_t>(opts.feature_layers.size())) {
  SSD_CHECK(layout.n_drafters() > 0, "a remote drafter needs a drafter rank ({})",
            layout.summary());
  SSD_CHECK(opts.k >= 1 && opts.k <= 32, "--k {} must be between 1 and 32", opts.k);
  link_.set_loss_policy(opts.loss_policy);
  link_.set_push(opts.push);
}

// The joiners not yet told to the drafter are not in `running`: a copy built now starts them
// when they are (joiners_message).
void RemoteEngine::lose_drafter(const DrafterLost& e, const std::vector<Slot*>& running) {
  std::vector<DrafterLeadLink::RunningSeq> seqs;
  for (const Slot* s : running) seqs.push_back({dseq(*s), s->req.prompt, s->gen.tokens});
  if (link_.lose(e, round_, seqs)) metrics_.set_drafter_lost(e.rank);
}

std::vector<int32_t> RemoteEngine::choose(const std::vector<int32_t>& ids,
                                          const std::vector<int32_t>& limit) {
  // Without a drafter and a lookup copy to draft here, every sequence runs plain decode steps.
  std::vector<int32_t> ks = link_.loss() && !link_.drafts_after_loss()
                                ? std::vector<int32_t>(ids.size(), 0)
                                : length().choose(ids, limit);
  for (size_t i = 0; i < ids.size(); ++i) chosen_[ids[i]] = ks[i];
  return ks;
}

// The joiners as the drafter ranks learn of them; the leader's lookup copies start them too.
template <class M>
M RemoteEngine::joiners_message() {
  M m;
  m.feature_dim = dim_;
  for (Joiner& j : joining_) {
    link_.started(j.seq, j.prompt, std::span<const int32_t>(&j.first, 1));
    m.seqs.push_back(j.seq);
    m.prompts.push_back(std::move(j.prompt));
    m.emitted.push_back({j.first});
    m.streams.push_back(j.stream);
    m.feature_rows.push_back(dim_ > 0 ? static_cast<int64_t>(m.prompts.back().size()) : 0);
    known_[j.seq] = true;
  }
  return m;
}

std::vector<float> RemoteEngine::joiners_features() const {
  std::vector<float> features;
  for (const Joiner& j : joining_)
    features.insert(features.end(), j.features.begin(), j.features.end());
  return features;
}

void RemoteEngine::admit(std::span<Slot* const> slots) {
  for (Slot* s : slots) {
    Watchdog::Scope scope(dog_, fmt::format("prefilling request {}", s->id), opts_.step_s);
    s->kv = target_.create_seq();
    PrefillResult pre =
        prefill(target_, s->kv, s->req.prompt, s->req.prefill_chunk, opts_.feature_layers);
    s->gen.prompt_tokens = static_cast<int64_t>(s->req.prompt.size());
    s->gen.prefill_s = pre.seconds;
    s->root_pos = static_cast<int32_t>(s->req.prompt.size());
    s->running = s->req.max_new_tokens > 0;
    if (s->running) {
      s->root = target_.picker().sample(pre.last, 0, s->req.sampler, s->req.stream, 0);
      s->running = emit_slot_token(*s, s->root);
    }
    if (!s->running) {
      release(*s);
      continue;
    }
    const int64_t left = s->req.max_new_tokens - static_cast<int64_t>(s->gen.tokens.size());
    joining_.push_back(Joiner{dseq(*s), s->req.prompt, s->root, s->req.stream,
                              std::move(pre.features),
                              static_cast<int32_t>(std::clamp<int64_t>(left - 1, 0, opts_.k))});
    s->drafter_live = true;
  }
}

void RemoteEngine::release(Slot& s) {
  if (s.kv >= 0) target_.release_seq(s.kv);
  s.kv = -1;
  if (!s.drafter_live) return;
  s.drafter_live = false;
  const int32_t id = dseq(s);
  length_.finish(id);
  off_length_.finish(id);
  chosen_.erase(id);
  ahead_.erase(id);  // its pushed or leader-drafted speculation: dropped
  const auto j = std::find_if(joining_.begin(), joining_.end(),
                              [&](const Joiner& x) { return x.seq == id; });
  if (j != joining_.end()) {
    joining_.erase(j);  // never told to the drafter
  } else if (known_.erase(id)) {
    link_.finished(id);  // as the drafter's: without the tokens of a round it ended in
    link_.send(FinishSeqs{{id}});
  }
}

// Nothing runs: the joiners start a new batch (rounds count from 0 again).
void RemoteEngine::start_batch() {
  const std::vector<float> features = joiners_features();
  std::vector<int32_t> ids, limit;
  for (const Joiner& j : joining_) {
    ids.push_back(j.seq);
    limit.push_back(j.limit);
  }
  prespec_on_ = !opts_.prespeculate || prespec_.on();
  StartSeqs m = joiners_message<StartSeqs>();
  m.prespeculate = opts_.prespeculate;
  m.first_k = choose(ids, limit);
  joining_.clear();
  link_.start_batch(m, std::as_bytes(std::span<const float>(features)));
  round_ = 0;
  awaiting_ = true;
  answer_due_ = !link_.loss() && drafts_any(m.first_k);
}

// The round's speculations, taken as RemoteDecoder takes them (round_speculations.h): those held
// since the last outcome, then the answer when one is due. The policy's draft cost is the wait
// for the tokens asked.
RoundSpeculations RemoteEngine::take_speculations(const std::vector<Slot*>& active,
                                                  double& wait_s) {
  RoundSpeculations specs(round_, opts_.k, static_cast<int32_t>(target_.config().vocab));
  for (const Slot* s : active) {
    const int32_t id = dseq(*s);
    specs.ask(id, chosen_[id]);
    const auto a = ahead_.find(id);
    if (a == ahead_.end()) continue;
    specs.give(id, std::move(a->second));
    ahead_.erase(a);
  }
  std::optional<SpeculationMsg> answer;
  if (answer_due_ && !link_.loss()) {
    const double tw = monotonic_seconds();
    try {
      answer = link_.receive_answer(round_);
    } catch (const DrafterLost& e) {
      lose_drafter(e, active);
    }
    wait_s = monotonic_seconds() - tw;
  }
  answer_due_ = false;
  if (answer) {
    // Sequences released since their speculation was asked: theirs is dropped.
    specs.take(std::move(*answer), /*drop_unasked=*/true);
  } else if (link_.loss()) {  // no answer will come: drafted here, or decode steps
    speculate_without_drafter(active, specs);
  }
  length().observe_draft(specs.asked(), wait_s);
  return specs;
}

// After a loss, as RemoteDecoder: the sequences still awaiting their speculation have it drafted
// here with the leader's lookup copy (DrafterLeadLink::speculate_without_drafter); without one,
// every sequence of the round takes a decode step.
void RemoteEngine::speculate_without_drafter(const std::vector<Slot*>& active,
                                             RoundSpeculations& specs) {
  std::vector<DrafterLeadLink::Awaiting> seqs;
  for (const Slot* s : active)
    seqs.push_back({dseq(*s), chosen_[dseq(*s)], &s->req,
                    static_cast<uint32_t>(s->gen.tokens.size())});
  const std::optional<std::vector<size_t>> drafted = link_.speculate_without_drafter(specs, seqs);
  if (!drafted) {  // decode steps
    for (const Slot* s : active) chosen_[dseq(*s)] = 0;
    return;
  }
  metrics_.add_ahead(0, static_cast<int64_t>(drafted->size()));
}

void RemoteEngine::round(std::span<Slot* const> slots) {
  if (!awaiting_ && !joining_.empty()) start_batch();
  if (!awaiting_) return;
  const double t0 = monotonic_seconds();
  // ssd: the regime of this round's outcome, and the length policy that measures it.
  prespec_on_ = !opts_.prespeculate || prespec_.on();

  std::vector<Slot*> active;
  for (Slot* s : slots)
    if (s->running && known_.count(dseq(*s))) active.push_back(s);
  double wait_s = 0;
  RoundSpeculations specs = take_speculations(active, wait_s);
  awaiting_ = false;
  if (active.empty()) {  // every sequence left since the outcome: nothing to verify
    if (!joining_.empty()) start_batch();
    return;
  }

  Watchdog::Scope scope(dog_, fmt::format("verifying round {}", round_), opts_.step_s);
  std::vector<DraftTree> trees(active.size());
  std::vector<VerifyInput> inputs(active.size());
  std::vector<SpecSource> sources(active.size());
  for (size_t a = 0; a < active.size(); ++a) {
    Slot& s = *active[a];
    metrics_.add_chosen_length(chosen_[dseq(s)]);
    trees[a] = specs.tree(dseq(s), s.req.max_new_tokens - static_cast<int64_t>(s.gen.tokens.size()));
    sources[a] = specs.source(dseq(s));
    inputs[a] = VerifyInput{s.kv,          s.root,       s.root_pos, &trees[a],
                            s.req.sampler, s.req.stream, static_cast<uint32_t>(s.gen.tokens.size())};
  }
  const double tv = monotonic_seconds();
  const VerifyRoundResult vr =
      verify_round(target_, inputs, opts_.feature_layers, /*host_logits=*/false);
  const double verify_dt = monotonic_seconds() - tv;
  int64_t rows = 0;
  for (const DraftTree& t : trees) rows += 1 + static_cast<int64_t>(t.size());
  length().observe_verify(rows, verify_dt);

  Outcome outcome;
  outcome.round = round_ + 1;
  outcome.feature_dim = dim_;
  outcome.verify_s = verify_dt;
  outcome.prespeculate = prespec_on_;
  std::vector<float> round_features;
  int64_t hits = 0, misses = 0, emitted = 0;
  std::vector<Slot*> still;  // the sequences of outcome.seqs, in order
  for (size_t a = 0; a < active.size(); ++a) {
    Slot& s = *active[a];
    const VerifyResult& v = vr.seqs[a].result;
    const int32_t accepted = static_cast<int32_t>(v.path.size());
    s.gen.forwards++;
    metrics_.add_round(static_cast<int64_t>(trees[a].size()), accepted);
    for (SpecLengthController* l : {&length_, &off_length_})  // acceptance: in any regime
      l->observe_outcome(dseq(s), static_cast<int32_t>(trees[a].size()), accepted);
    const SpecSource source = sources[a];
    if (source == SpecSource::kCache) ++hits;
    else if (source != SpecSource::kInitial && source != SpecSource::kDecodeStep) ++misses;
    SeqOutcome o;
    o.seq = dseq(s);
    o.accepted = accepted;
    o.feature_from = s.root_pos;
    o.feature_rows = dim_ > 0 ? 1 + accepted : 0;
    for (int32_t tok : v.emitted) {
      o.emitted.push_back(tok);
      ++emitted;
      s.running = emit_slot_token(s, tok);
      if (!s.running) break;
    }
    s.root = v.emitted.back();
    s.root_pos += accepted + 1;
    if (!s.running) {
      release(s);  // FinishSeqs before the Outcome
      continue;
    }
    link_.committed(o.seq, o.emitted);
    if (dim_ > 0)
      round_features.insert(round_features.end(), vr.seqs[a].features.begin(),
                            vr.seqs[a].features.end());
    outcome.seqs.push_back(std::move(o));
    still.push_back(&s);
  }
  metrics_.add_speculations(hits, misses, wait_s);
  if (!outcome.seqs.empty()) send_outcome(outcome, still, round_features);
  if (opts_.prespeculate) prespec_.observe_round(emitted, monotonic_seconds() - t0);
  if (outcome.seqs.empty() && !joining_.empty()) start_batch();
}

void RemoteEngine::send_outcome(Outcome& outcome, const std::vector<Slot*>& still,
                                std::span<const float> features) {
  // The next round's lengths of every sequence in it (the running ones and the joiners), chosen
  // together from every round verified so far.
  std::vector<int32_t> ids, limit;
  for (const Slot* s : still) {
    ids.push_back(dseq(*s));
    const int64_t left = s->req.max_new_tokens - static_cast<int64_t>(s->gen.tokens.size());
    limit.push_back(static_cast<int32_t>(std::clamp<int64_t>(left - 1, 0, opts_.k)));
  }
  for (const Joiner& j : joining_) {
    ids.push_back(j.seq);
    limit.push_back(j.limit);
  }
  const std::vector<int32_t> next = choose(ids, limit);
  for (size_t j = 0; j < still.size(); ++j) outcome.seqs[j].next_k = next[j];
  // The round's pushes, and the lead's heartbeats (a batch that takes pushes).
  try {
    link_.poll(round_);
  } catch (const DrafterLost& e) {
    lose_drafter(e, still);
  }
  // Next speculations here before the answer: pushed hits, misses drafted here.
  answer_due_ = false;
  int64_t pushed = 0, drafted = 0;
  for (size_t j = 0; j < still.size(); ++j) {
    SeqOutcome& o = outcome.seqs[j];
    const Slot& s = *still[j];
    std::optional<SeqSpeculation> ahead =
        link_.ahead(round_, o, s.req, static_cast<uint32_t>(s.gen.tokens.size()));
    if (!ahead) {
      answer_due_ = answer_due_ || o.next_k > 0;
      continue;
    }
    ahead_[o.seq] = std::move(*ahead);
    pushed += o.pushed ? 1 : 0;
    drafted += o.leader_drafted ? 1 : 0;
  }
  metrics_.add_ahead(pushed, drafted);
  if (!joining_.empty()) {
    const std::vector<float> joiner_features = joiners_features();
    JoinSeqs m = joiners_message<JoinSeqs>();
    m.first_k.assign(next.begin() + static_cast<std::ptrdiff_t>(still.size()), next.end());
    answer_due_ = answer_due_ || drafts_any(m.first_k);
    joining_.clear();
    link_.send(m, std::as_bytes(std::span<const float>(joiner_features)));
  }
  link_.send(outcome, std::as_bytes(features));
  if (link_.loss()) answer_due_ = false;  // nothing was sent: no answer comes
  round_++;
  awaiting_ = true;
}

}  // namespace ssd
