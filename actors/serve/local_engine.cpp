#include "actors/serve/local_engine.h"

#include <algorithm>

#include "runtime/core/error.h"
#include "runtime/generate/generation.h"
#include "runtime/generate/token_picker.h"
#include "runtime/spec/verify_round.h"

namespace ssd {
LocalEngine::LocalEngine(TargetModel& target, Drafter* drafter, const SpecLengthOptions& length,
                         ServeMetrics& metrics)
    : target_(target), drafter_(drafter), k_(length.k_max), metrics_(metrics), length_(length) {
  SSD_CHECK(k_ >= 1 && k_ <= 32, "--k {} must be between 1 and 32", k_);
  if (drafter_) layers_ = drafter_->target_feature_layers();
  for (int32_t l : layers_)
    SSD_CHECK(l >= 0 && l < target.config().n_layers,
              "drafter {} asks for target layer {}, but the target has layers 0..{}",
              drafter_->name(), l, target.config().n_layers - 1);
}

void LocalEngine::admit(std::span<Slot* const> slots) {
  for (Slot* s : slots) {
    s->kv = target_.create_seq();
    PrefillResult pre = prefill(target_, s->kv, s->req.prompt, s->req.prefill_chunk, layers_);
    s->gen.prompt_tokens = static_cast<int64_t>(s->req.prompt.size());
    s->gen.prefill_s = pre.seconds;
    if (drafter_) {
      drafter_->start(dseq(*s), s->req.prompt);
      s->drafter_live = true;
      if (!layers_.empty()) drafter_->set_features(dseq(*s), 0, pre.features);
    }
    s->root_pos = static_cast<int32_t>(s->req.prompt.size());
    s->running = s->req.max_new_tokens > 0;
    if (s->running) {
      s->root = target_.picker().sample(pre.last, 0, s->req.sampler, s->req.stream, 0);
      s->running = emit_slot_token(*s, s->root);
      if (drafter_) drafter_->commit(dseq(*s), {&s->root, 1});
    }
    if (!s->running) release(*s);
  }
}

void LocalEngine::release(Slot& s) {
  if (s.kv >= 0) target_.release_seq(s.kv);
  s.kv = -1;
  if (s.drafter_live && drafter_) {
    drafter_->finish(dseq(s));
    length_.finish(dseq(s));
  }
  s.drafter_live = false;
}

void LocalEngine::round(std::span<Slot* const> slots) {
  std::vector<Slot*> running;
  for (Slot* s : slots)
    if (s->running) running.push_back(s);
  if (running.empty()) return;
  if (drafter_) verify_round_sd(running);
  else decode_round(running);
}

// generate_ar_batch's step: each row is a running sequence's root at its position; the picker
// draws row r at the sequence's own stream and output index.
void LocalEngine::decode_round(std::span<Slot* const> running) {
  TokenPicker& picker = target_.picker();
  Batch b;
  b.logits_in_backend = picker.reads_backend_logits();
  for (Slot* s : running) {
    b.tokens.push_back(s->root);
    b.positions.push_back(s->root_pos);
    b.seqs.push_back(s->kv);
    b.logits_rows.push_back(static_cast<int32_t>(b.logits_rows.size()));
  }
  const ForwardResult fr = target_.forward(b);
  std::vector<TokenPicker::RowDraw> draws(running.size());
  for (size_t r = 0; r < running.size(); ++r)
    draws[r] = {&running[r]->req.sampler, running[r]->req.stream,
                static_cast<uint32_t>(running[r]->gen.tokens.size())};
  const std::vector<int32_t> next = picker.sample_rows(fr, draws);
  for (size_t r = 0; r < running.size(); ++r) {
    Slot& s = *running[r];
    s.gen.forwards++;
    s.root_pos++;
    s.root = next[r];
    metrics_.add_round(0, 0);
    s.running = emit_slot_token(s, s.root);
    if (!s.running) release(s);
  }
}

// generate_sd_batch's round for the running slots: chains of the lengths the policy chose (at
// most K and the tokens each request has left; 0 is a plain decode step for that sequence), the
// round's draft and verify times and each outcome fed back to the policy as generate_sd_batch
// does.
void LocalEngine::verify_round_sd(std::span<Slot* const> running) {
  const int32_t vocab = static_cast<int32_t>(target_.config().vocab);
  std::vector<int32_t> ids(running.size()), limit(running.size());
  for (size_t a = 0; a < running.size(); ++a) {
    const Slot& s = *running[a];
    const int64_t emitted = static_cast<int64_t>(s.gen.tokens.size());
    ids[a] = dseq(s);
    limit[a] = static_cast<int32_t>(std::clamp<int64_t>(s.req.max_new_tokens - emitted - 1, 0, k_));
  }
  const std::vector<int32_t> depth = length_.choose(ids, limit);
  std::vector<DraftRequest> drs;
  std::vector<size_t> drafted_by;
  int64_t asked = 0;
  for (size_t a = 0; a < running.size(); ++a) {
    const Slot& s = *running[a];
    const int64_t emitted = static_cast<int64_t>(s.gen.tokens.size());
    metrics_.add_chosen_length(depth[a]);
    if (depth[a] == 0) continue;
    asked += depth[a];
    DraftRequest dr;
    dr.seq = dseq(s);
    dr.k = depth[a];
    dr.sampler = s.req.sampler;
    dr.stream = s.req.stream;
    dr.position = static_cast<uint32_t>(emitted);
    drs.push_back(std::move(dr));
    drafted_by.push_back(a);
  }
  std::vector<DraftTree> trees(running.size());
  const double td = monotonic_seconds();
  if (!drs.empty()) {
    std::vector<DraftTree> got = drafter_->draft(drs);
    SSD_CHECK(got.size() == drs.size(), "drafter {} returned {} trees for {} requests",
              drafter_->name(), got.size(), drs.size());
    for (size_t d = 0; d < got.size(); ++d) trees[drafted_by[d]] = std::move(got[d]);
  }
  length_.observe_draft(asked, drs.empty() ? 0.0 : monotonic_seconds() - td);
  std::vector<VerifyInput> inputs(running.size());
  for (size_t a = 0; a < running.size(); ++a) {
    const Slot& s = *running[a];
    trees[a].validate(vocab);
    for (size_t n = 0; n < trees[a].size(); ++n)
      SSD_CHECK(trees[a].depth(static_cast<int32_t>(n)) <= depth[a],
                "drafter {} returned a node at depth {} beyond k = {}", drafter_->name(),
                trees[a].depth(static_cast<int32_t>(n)), depth[a]);
    inputs[a] = VerifyInput{s.kv,          s.root,           s.root_pos, &trees[a],
                            s.req.sampler, s.req.stream,
                            static_cast<uint32_t>(s.gen.tokens.size())};
  }
  const double tv = monotonic_seconds();
  const VerifyRoundResult vr =
      verify_round(target_, inputs, layers_, drafter_->observes_target_logits());
  int64_t rows = 0;
  for (const DraftTree& t : trees) rows += 1 + static_cast<int64_t>(t.size());
  length_.observe_verify(rows, monotonic_seconds() - tv);
  for (size_t a = 0; a < running.size(); ++a) {
    Slot& s = *running[a];
    const VerifyResult& v = vr.seqs[a].result;
    s.gen.forwards++;
    metrics_.add_round(static_cast<int64_t>(trees[a].size()), v.accepted());
    length_.observe_outcome(dseq(s), trees[a].max_depth(), v.accepted());
    std::vector<int32_t> emitted;
    for (int32_t tok : v.emitted) {
      emitted.push_back(tok);
      s.running = emit_slot_token(s, tok);
      if (!s.running) break;
    }
    drafter_->observe(DraftOutcome{dseq(s), &trees[a], v.path, v.emitted, vr.logits(a), vocab});
    drafter_->commit(dseq(s), emitted);
    if (!layers_.empty()) drafter_->set_features(dseq(s), s.root_pos, vr.seqs[a].features);
    s.root = v.emitted.back();
    s.root_pos += 1 + v.accepted();
    if (!s.running) release(s);
  }
}

}  // namespace ssd
