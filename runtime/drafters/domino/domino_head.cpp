// The Domino head's GRU step, low-rank correction and the left-to-right walk over a block's
// positions (see domino_head.h for the equations and the GRU convention), op by op (walk) or as
// the backend's fused op (walk_fused). The element-wise arithmetic is kernels/common/
// domino_math.h's, the same functions the fused CUDA kernel runs.
#include "runtime/drafters/domino/domino_head.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/common/domino_math.h"
#include "runtime/core/error.h"
#include "runtime/model/decoder_layer.h"
#include "runtime/saguaro/saguaro_sampling.h"

namespace ssd {

DominoHead::DominoHead(const DominoCheckpoint& ck, Transformer& target)
    : cfg_(ck.config()), backend_(target.backend()), token_embd_(target.token_embedding()) {
  w_ih_ = backend_.prepare_weight(*ck.head.gru_w_ih);
  w_hh_ = backend_.prepare_weight(*ck.head.gru_w_hh);
  w1_ = backend_.prepare_weight(*ck.head.w1);
  w2_ = backend_.prepare_weight(*ck.head.w2);
  b_ih_ = decode_vector(ck.head.gru_b_ih);
  b_hh_ = decode_vector(ck.head.gru_b_hh);
  if (backend_.has_domino_walk()) {
    const size_t bias_bytes = b_ih_.size() * sizeof(float);
    b_ih_dev_ = backend_.allocate(bias_bytes);
    b_hh_dev_ = backend_.allocate(bias_bytes);
    backend_.upload(b_ih_dev_.data(), b_ih_.data(), bias_bytes);
    backend_.upload(b_hh_dev_.data(), b_hh_.data(), bias_bytes);
    if (!cfg_.draft_vocab.empty()) {
      const size_t id_bytes = cfg_.draft_vocab.size() * sizeof(int32_t);
      ids_dev_ = backend_.allocate(id_bytes);
      backend_.upload(ids_dev_.data(), cfg_.draft_vocab.data(), id_bytes);
    }
  }
}

const float* DominoHead::target_row(const float* row) {
  if (cfg_.draft_vocab.empty()) return row;
  full_.assign(cfg_.target_vocab, -std::numeric_limits<float>::infinity());
  for (size_t t = 0; t < cfg_.draft_vocab.size(); ++t) full_[cfg_.draft_vocab[t]] = row[t];
  return full_.data();
}

void DominoHead::gru_step(const int32_t* tokens, float* s, int64_t n) {
  if (n == 0) return;
  const int64_t d = cfg_.target_dim, g = cfg_.gru_dim;
  emb_.resize(n * d);
  gi_.resize(n * 3 * g);
  gh_.resize(n * 3 * g);
  backend_.embed(token_embd_, tokens, n, emb_.data());
  backend_.matmul(w_ih_, emb_.data(), gi_.data(), n);  // [n, 3g]
  backend_.matmul(w_hh_, s, gh_.data(), n);            // [n, 3g]
  backend_.add_bias(gi_.data(), b_ih_.data(), n, 3 * g);
  backend_.add_bias(gh_.data(), b_hh_.data(), n, 3 * g);
  for (int64_t j = 0; j < n; ++j) {
    const float* xi = gi_.data() + j * 3 * g;
    const float* hh = gh_.data() + j * 3 * g;
    float* sj = s + j * g;
    for (int64_t u = 0; u < g; ++u) sj[u] = kernels::hd::domino_gru_state(xi, hh, g, u, sj[u]);
  }
}

void DominoHead::add_correction(const float* h, const float* s, float* logits, int64_t n) {
  if (n == 0) return;
  const int64_t d = cfg_.target_dim, g = cfg_.gru_dim, r = cfg_.rank;
  const int64_t vocab = cfg_.draft_vocab_size();
  in_.resize(n * (d + g));
  mid_.resize(n * r);
  for (int64_t j = 0; j < n; ++j) {
    std::copy_n(h + j * d, d, in_.data() + j * (d + g));
    std::copy_n(s + j * g, g, in_.data() + j * (d + g) + d);
  }
  backend_.matmul(w1_, in_.data(), mid_.data(), n);  // [n, r]
  for (float& m : mid_) m = kernels::hd::silu(m);
  corr_.resize(n * vocab);
  backend_.matmul(w2_, mid_.data(), corr_.data(), n);  // [n, V]
  backend_.add(logits, corr_.data(), n * vocab);
}

std::vector<DraftTree> DominoHead::walk(std::span<const DominoChain> chains, bool use_head,
                                        std::vector<std::vector<float>>* final_logits) {
  const int64_t d = cfg_.target_dim, g = cfg_.gru_dim, vocab = cfg_.target_vocab;
  const int64_t dv = cfg_.draft_vocab_size();  // columns of base / final before the scatter
  const int64_t nc = static_cast<int64_t>(chains.size());
  std::vector<DraftTree> trees(nc);
  if (final_logits) {
    final_logits->assign(nc, {});
    for (int64_t c = 0; c < nc; ++c) final_logits->at(c).resize(chains[c].k * vocab);
  }
  int32_t max_k = 0;
  for (const DominoChain& ch : chains) max_k = std::max(max_k, ch.k);
  if (max_k <= 0) return trees;

  // GRU states of the chains still walking, row j = chain act[j].   [nc, g]
  std::vector<float> state(nc * g, 0.0f);
  std::vector<int32_t> act, toks;
  for (int64_t c = 0; c < nc; ++c)
    if (chains[c].k > 0) {
      act.push_back(static_cast<int32_t>(c));
      toks.push_back(chains[c].anchor);
    }
  if (use_head) gru_step(toks.data(), state.data(), static_cast<int64_t>(act.size()));  // s_0

  std::vector<float> logits, hid;
  ProcessedDist q;
  for (int32_t i = 1; i <= max_k; ++i) {
    // Keep the chains that draft position i, with their GRU states.
    std::vector<int32_t> next_act;
    std::vector<float> next_state;
    for (size_t j = 0; j < act.size(); ++j)
      if (chains[act[j]].k >= i) {
        next_act.push_back(act[j]);
        next_state.insert(next_state.end(), state.begin() + j * g, state.begin() + (j + 1) * g);
      }
    act.swap(next_act);
    state.swap(next_state);
    const int64_t na = static_cast<int64_t>(act.size());
    logits.resize(na * dv);
    hid.resize(na * d);
    for (int64_t j = 0; j < na; ++j) {
      const DominoChain& ch = chains[act[j]];
      std::copy_n(ch.base + (i - 1) * dv, dv, logits.data() + j * dv);
      std::copy_n(ch.hidden + (i - 1) * d, d, hid.data() + j * d);
    }
    if (use_head) add_correction(hid.data(), state.data(), logits.data(), na);

    toks.assign(na, 0);
    for (int64_t j = 0; j < na; ++j) {
      const DominoChain& ch = chains[act[j]];
      const float* row = target_row(logits.data() + j * dv);  // over target ids
      if (final_logits) std::copy_n(row, vocab, final_logits->at(act[j]).data() + (i - 1) * vocab);
      int32_t tok;
      ProcessedDist predicted;
      if (is_greedy(ch.sampler)) {
        tok = argmax(row, static_cast<int32_t>(vocab));
        q = one_hot(tok);
        if (ch.request) predicted = predicted_for(*ch.request, row, static_cast<int32_t>(vocab), q);
      } else {
        process_into(row, static_cast<int32_t>(vocab), ch.sampler, q);
        if (ch.request) {
          predicted = predicted_for(*ch.request, row, static_cast<int32_t>(vocab), q);
          apply_saguaro(*ch.request, i, q);
        }
        tok = sample(q, philox_uniform(ch.sampler.seed, ch.stream, ch.step + i - 1,
                                       kLaneDominoDraft));
      }
      trees[act[j]].add(i - 2, tok, q);
      if (ch.request && ch.request->predict_top > 0)
        trees[act[j]].predicted.push_back(std::move(predicted));
      toks[j] = tok;
    }
    if (use_head && i < max_k) gru_step(toks.data(), state.data(), na);  // s_i
  }
  return trees;
}

bool DominoHead::walks_fused(const SamplerConfig& sampler, const DraftRequest* request,
                             int32_t k) {
  if (is_greedy(sampler) || !request) return true;
  for (int32_t depth = 1; depth <= k; ++depth)
    if (saguaro_top_f_at(*request, depth) > 0) return false;  // reshaped q: the host's walk
  return true;
}

std::vector<DraftTree> DominoHead::walk_fused(float* logits, const float* hidden,
                                              std::span<const int64_t> offset,
                                              std::span<const DominoChain> chains, bool use_head,
                                              std::vector<std::vector<float>>* final_logits) {
  const int64_t vocab = cfg_.target_vocab, dv = cfg_.draft_vocab_size();
  const int64_t nc = static_cast<int64_t>(chains.size());
  SSD_ASSERT(static_cast<int64_t>(offset.size()) == nc + 1 && offset[0] == 0);
  std::vector<int32_t> anchors(nc);
  std::vector<DominoWalkSampler> samplers(nc);
  bool want_rows = final_logits != nullptr, sampled = false;
  for (int64_t c = 0; c < nc; ++c) {
    const DominoChain& ch = chains[c];
    SSD_ASSERT(walks_fused(ch.sampler, ch.request, ch.k) && ch.k == offset[c + 1] - offset[c]);
    anchors[c] = ch.anchor;
    samplers[c] = DominoWalkSampler{ch.sampler, ch.stream, ch.step};
    sampled = sampled || !is_greedy(ch.sampler);
    want_rows = want_rows || (ch.request && ch.request->predict_top > 0);
  }
  const int64_t rows = offset[nc];
  std::vector<int32_t> tokens(rows, -1);
  DominoWalkCall call;
  call.token_embd = &token_embd_;
  call.w_ih = &w_ih_;
  call.w_hh = &w_hh_;
  call.w1 = &w1_;
  call.w2 = &w2_;
  call.b_ih = b_ih_dev_.data() ? b_ih_dev_.data() : b_ih_.data();
  call.b_hh = b_hh_dev_.data() ? b_hh_dev_.data() : b_hh_.data();
  if (!cfg_.draft_vocab.empty())
    call.vocab_ids = ids_dev_.data() ? reinterpret_cast<const int32_t*>(ids_dev_.data())
                                     : cfg_.draft_vocab.data();
  call.d = cfg_.target_dim;
  call.g = cfg_.gru_dim;
  call.r = cfg_.rank;
  call.vd = dv;
  call.use_head = use_head;
  call.logits = logits;
  call.hidden = hidden;
  call.first = offset.data();
  call.anchors = anchors.data();
  call.chains = nc;
  call.tokens = tokens.data();
  DominoWalkLists lists;  // sampled rows' q lists
  if (sampled) {
    call.samplers = samplers.data();
    call.lists = &lists;
    if (!cfg_.draft_vocab.empty()) call.vocab_ids_host = cfg_.draft_vocab.data();
  }
  backend_.domino_walk(call);

  std::vector<float> finals;  // [rows, Vd], only when some row is read on the host
  if (want_rows && rows > 0) {
    finals.resize(rows * dv);
    backend_.download(finals.data(), logits, finals.size() * sizeof(float));
  }
  std::vector<DraftTree> trees(nc);
  if (final_logits) final_logits->assign(nc, {});
  for (int64_t c = 0; c < nc; ++c) {
    const DominoChain& ch = chains[c];
    if (final_logits) final_logits->at(c).resize(ch.k * vocab);
    for (int32_t i = 1; i <= ch.k; ++i) {
      const int64_t row = offset[c] + i - 1;
      const int32_t tok = tokens[row];
      SSD_CHECK(tok >= 0, "argmax: all {} logits are NaN", dv);
      ProcessedDist q;
      if (is_greedy(ch.sampler)) {
        q = one_hot(tok);
      } else {
        for (int64_t e = lists.off[row]; e < lists.off[row + 1]; ++e)
          q.tokens.push_back(TokenProb{lists.ids[e], lists.probs[e]});
      }
      const float* full = finals.empty() ? nullptr : target_row(finals.data() + row * dv);
      if (final_logits) std::copy_n(full, vocab, final_logits->at(c).data() + (i - 1) * vocab);
      trees[c].add(i - 2, tok, q);
      if (ch.request && ch.request->predict_top > 0)
        trees[c].predicted.push_back(
            predicted_for(*ch.request, full, static_cast<int32_t>(vocab), q));
    }
  }
  return trees;
}

}  // namespace ssd
