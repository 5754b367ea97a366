#include "actors/serve/remote_engine.h"

#include <fmt/format.h>

#include <algorithm>

#include "actors/roles/round_speculations.h"
#include "actors/transport/frame.h"
#include "runtime/core/error.h"
#include "runtime/generate/token_picker.h"
#include "runtime/saguaro/speculation.h"
#include "runtime/spec/verify_round.h"

namespace ssd {

RemoteEngine::RemoteEngine(TargetModel& target, Transport& world, const RankLayout& layout,
                           Watchdog& dog, const RemoteEngineOptions& opts, ServeMetrics& metrics)
    : target_(target),
      world_(world),
      layout_(layout),
      dog_(dog),
      opts_(opts),
      metrics_(metrics),
      length_(SpecLengthOptions{.k_max = opts.k, .automatic = opts.auto_k}),
      dim_(static_cast<int64_t>(target.config().dim) *
           static_cast<int64_t>(opts.feature_layers.size())) {
  SSD_CHECK(layout.n_drafters() > 0, "a remote drafter needs a drafter rank ({})",
            layout.summary());
  SSD_CHECK(opts.k >= 1 && opts.k <= 32, "--k {} must be between 1 and 32", opts.k);
}

// Only to the drafter lead, which relays starts, joins and finishes to the other drafter ranks
// in order with its own work (drafter_actor.h).
template <class T>
void RemoteEngine::send(const T& msg, std::span<const float> bulk) {
  if (loss_) return;  // nobody to tell
  world_.send_frame(layout_.drafter_lead(), encode_frame(msg, std::as_bytes(bulk)));
}

Envelope RemoteEngine::receive(MsgKind kind, const std::string& waiting_for) {
  // Under a continue policy the wait's own deadline decides (DrafterLost); the watchdog only
  // backs it up, later (as in RemoteDecoder::receive).
  const DrafterLossPolicy& policy = opts_.loss_policy;
  Watchdog::Scope scope(dog_, waiting_for,
                        policy.continue_on_loss ? 2 * opts_.step_s + 5 : opts_.step_s);
  Envelope env =
      wait_for_drafter(world_, layout_.drafter_lead(), opts_.step_s, policy, waiting_for);
  if (env.kind == kind) return env;
  if (env.kind == MsgKind::kError) {
    const auto e = decode<ErrorMsg>(env);
    fail(fmt::format("rank {} ({}) failed: {}", e.rank, role_name(e.role), e.what));
  }
  fail(fmt::format("target leader: {} from rank {} while {}", kind_name(env.kind), env.peer,
                   waiting_for));
}

void RemoteEngine::lose_drafter(const DrafterLost& e) {
  loss_ = DrafterLoss{e.rank, round_, e.died, e.cause, "plain decoding"};
  report_loss(*loss_);
  metrics_.set_drafter_lost(e.rank);
}

std::vector<int32_t> RemoteEngine::choose(const std::vector<int32_t>& ids,
                                          const std::vector<int32_t>& limit) {
  // Without a drafter every sequence runs plain decode steps.
  std::vector<int32_t> ks =
      loss_ ? std::vector<int32_t>(ids.size(), 0) : length_.choose(ids, limit);
  for (size_t i = 0; i < ids.size(); ++i) chosen_[ids[i]] = ks[i];
  return ks;
}

template <class M>
M RemoteEngine::joiners_message() {
  M m;
  m.feature_dim = dim_;
  for (Joiner& j : joining_) {
    m.seqs.push_back(j.seq);
    m.prompts.push_back(std::move(j.prompt));
    m.emitted.push_back({j.first});
    m.streams.push_back(j.stream);
    m.feature_rows.push_back(dim_ > 0 ? static_cast<int64_t>(m.prompts.back().size()) : 0);
    known_[j.seq] = true;
  }
  return m;
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
  chosen_.erase(id);
  const auto j = std::find_if(joining_.begin(), joining_.end(),
                              [&](const Joiner& x) { return x.seq == id; });
  if (j != joining_.end()) {
    joining_.erase(j);  // never told to the drafter
  } else if (known_.erase(id)) {
    send(FinishSeqs{{id}});
  }
}

void RemoteEngine::round(std::span<Slot* const> slots) {
  auto start_batch = [&] {
    std::vector<float> features;
    for (const Joiner& j : joining_) features.insert(features.end(), j.features.begin(), j.features.end());
    std::vector<int32_t> ids, limit;
    for (const Joiner& j : joining_) {
      ids.push_back(j.seq);
      limit.push_back(j.limit);
    }
    StartSeqs m = joiners_message<StartSeqs>();
    m.prespeculate = opts_.prespeculate;
    m.first_k = choose(ids, limit);
    joining_.clear();
    send(m, features);
    round_ = 0;
    awaiting_ = true;
  };
  if (!awaiting_ && !joining_.empty()) start_batch();
  if (!awaiting_) return;

  std::vector<Slot*> active;
  for (Slot* s : slots)
    if (s->running && known_.count(dseq(*s))) active.push_back(s);
  // The round's speculations, taken as RemoteDecoder takes them (round_speculations.h): the
  // policy's draft cost is the wait for the tokens asked.
  RoundSpeculations specs(round_, opts_.k, static_cast<int32_t>(target_.config().vocab));
  for (const Slot* s : active) specs.ask(dseq(*s), chosen_[dseq(*s)]);
  double wait_s = 0;
  std::optional<Envelope> env;
  if (specs.answer_comes() && !loss_) {
    const double tw = monotonic_seconds();
    try {
      env = receive(MsgKind::kSpeculation,
                    fmt::format("waiting for the speculation of round {} from the drafter "
                                "(rank {})",
                                round_, layout_.drafter_lead()));
    } catch (const DrafterLost& e) {
      lose_drafter(e);
    }
    wait_s = monotonic_seconds() - tw;
  }
  if (env) {
    // Sequences released since their speculation was asked: theirs is dropped.
    specs.take(decode<SpeculationMsg>(*env), /*drop_unasked=*/true);
  } else if (loss_) {  // no answer will come: this round's sequences take plain decode steps
    specs.take_none();
    for (const Slot* s : active) chosen_[dseq(*s)] = 0;
  }
  awaiting_ = false;

  Watchdog::Scope scope(dog_, fmt::format("verifying round {}", round_), opts_.step_s);
  std::vector<DraftTree> trees(active.size());
  std::vector<VerifyInput> inputs(active.size());
  std::vector<SpecSource> sources(active.size());
  length_.observe_draft(specs.asked(), wait_s);
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
  length_.observe_verify(rows, verify_dt);

  Outcome outcome;
  outcome.round = round_ + 1;
  outcome.feature_dim = dim_;
  outcome.verify_s = verify_dt;
  std::vector<float> round_features;
  int64_t hits = 0, misses = 0;
  std::vector<Slot*> still;  // the sequences of outcome.seqs, in order
  for (size_t a = 0; a < active.size(); ++a) {
    Slot& s = *active[a];
    const VerifyResult& v = vr.seqs[a].result;
    const int32_t accepted = static_cast<int32_t>(v.path.size());
    s.gen.forwards++;
    metrics_.add_round(static_cast<int64_t>(trees[a].size()), accepted);
    length_.observe_outcome(dseq(s), static_cast<int32_t>(trees[a].size()), accepted);
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
      s.running = emit_slot_token(s, tok);
      if (!s.running) break;
    }
    s.root = v.emitted.back();
    s.root_pos += accepted + 1;
    if (!s.running) {
      release(s);  // FinishSeqs before the Outcome
      continue;
    }
    if (dim_ > 0)
      round_features.insert(round_features.end(), vr.seqs[a].features.begin(),
                            vr.seqs[a].features.end());
    outcome.seqs.push_back(std::move(o));
    still.push_back(&s);
  }
  metrics_.add_speculations(hits, misses, wait_s);
  if (outcome.seqs.empty()) {
    if (!joining_.empty()) start_batch();
    return;
  }
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
  if (!joining_.empty()) {
    std::vector<float> features;
    for (const Joiner& j : joining_) features.insert(features.end(), j.features.begin(), j.features.end());
    JoinSeqs m = joiners_message<JoinSeqs>();
    m.first_k.assign(next.begin() + static_cast<std::ptrdiff_t>(still.size()), next.end());
    joining_.clear();
    send(m, features);
  }
  send(outcome, round_features);
  round_++;
  awaiting_ = true;
}

}  // namespace ssd
