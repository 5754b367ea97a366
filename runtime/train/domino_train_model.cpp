// Forward and backward of the Domino drafter for training (see domino_train_model.h).
#include "runtime/train/domino_train_model.h"

#include <algorithm>
#include <cmath>

#include "runtime/core/error.h"
#include "runtime/train/ops_attention.h"
#include "runtime/train/ops_cross_entropy.h"
#include "runtime/train/ops_linear.h"
#include "runtime/train/ops_pointwise.h"
#include "runtime/train/ops_rmsnorm.h"
#include "runtime/train/ops_rope.h"

namespace ssd::train {

void LossStats::add(const LossStats& o) {
  loss += o.loss;
  ce_final += o.ce_final;
  ce_base += o.ce_base;
  blocks += o.blocks;
  acc1_hits += o.acc1_hits;
  acc1_total += o.acc1_total;
  labels += o.labels;
  oov += o.oov;
  tokens += o.tokens;
}

DominoTrainModel::DominoTrainModel(const DominoConfig& cfg, const FrozenTarget& target)
    : cfg_(cfg), target_(target), inv_freq_(rope_inv_freq(cfg.rope_theta, cfg.head_dim)) {
  SSD_CHECK(target.dim() == cfg.target_dim && target.draft_vocab_size() == cfg.draft_vocab_size(),
            "domino trainer: target dim {} / draft vocabulary {} do not match the config's {} / {}",
            target.dim(), target.draft_vocab_size(), cfg.target_dim, cfg.draft_vocab_size());
  SSD_CHECK(cfg.n_heads % cfg.n_kv_heads == 0, "domino trainer: heads {} not a multiple of {}",
            cfg.n_heads, cfg.n_kv_heads);
}

LossStats DominoTrainModel::run(const DominoConstView& p, DominoView* grads,
                                std::span<const int32_t> tokens, std::span<const float> features,
                                std::span<const int32_t> anchors, const LossOptions& opt) {
  const int64_t L = static_cast<int64_t>(tokens.size());
  SSD_CHECK(static_cast<int64_t>(features.size()) == L * cfg_.feature_dim(),
            "domino trainer: {} feature values for {} tokens of width {}", features.size(), L,
            cfg_.feature_dim());
  SSD_CHECK(opt.known >= 1, "domino trainer: {} known tokens per block (at least the anchor)",
            opt.known);
  for (int32_t a : anchors)
    SSD_CHECK(a >= opt.known - 1 && a <= L - 2, "domino trainer: anchor {} outside {}..{}", a,
              opt.known - 1, L - 2);
  LossStats st;
  forward(p, tokens, features, anchors, opt, grads != nullptr, st);
  if (grads) backward(p, *grads, features);
  return st;
}

// The forward of run(): the blocks' layout, the context's K/V, the block rows through the
// backbone, the base logits of the labelled rows, then the head position by position with the
// loss (and its gradient seeds dfinal_/dbase_ when `grad`). Every intermediate the backward needs
// stays in the members.
void DominoTrainModel::forward(const DominoConstView& p, std::span<const int32_t> tokens,
                               std::span<const float> features, std::span<const int32_t> anchors,
                               const LossOptions& opt, bool grad, LossStats& st) {
  plan_blocks(anchors, opt.known);
  forward_context(p, features);
  forward_block_inputs(p, tokens, anchors);
  forward_backbone(p);
  const std::vector<float> base = labelled_base_logits();  // [M, Vd]
  forward_head(p, tokens, anchors, opt, grad, base, st);
  st.tokens += rows_;
}

// Block b: rows [t[a-kn+1 .. a], MASK x (B-1)] at positions a-kn+1 ..; context [0, a-kn+1).
void DominoTrainModel::plan_blocks(std::span<const int32_t> anchors, int64_t known) {
  nblocks_ = static_cast<int64_t>(anchors.size());
  kn_ = known;
  rb_ = kn_ + cfg_.block_size - 1;
  rows_ = nblocks_ * rb_;
  ctx_of_.resize(nblocks_);
  n_ctx_ = 0;
  for (int64_t b = 0; b < nblocks_; ++b) {
    ctx_of_[b] = static_cast<int32_t>(anchors[b] - kn_ + 1);
    n_ctx_ = std::max<int64_t>(n_ctx_, ctx_of_[b]);
  }
  layers_.resize(cfg_.n_layers);
}

// The context: c = RMSNorm(W_fc X) * fc_norm over the n_ctx_ feature rows, and each layer's K/V
// of it.   features: [n_ctx_ or more, F]
void DominoTrainModel::forward_context(const DominoConstView& p, std::span<const float> features) {
  const int64_t d = cfg_.target_dim, F = cfg_.feature_dim(), hd = cfg_.head_dim,
                kw = cfg_.n_kv_heads * hd, n = n_ctx_;
  const float eps = cfg_.rms_eps;
  ctx_pos_.resize(n);
  for (int64_t j = 0; j < n; ++j) ctx_pos_[j] = static_cast<int32_t>(j);
  pre_.resize(n * d);
  c_.resize(n * d);
  rstd_c_.resize(n);
  linear_forward(features.data(), p.fc, pre_.data(), n, F, d);
  rmsnorm_forward(pre_.data(), p.fc_norm, c_.data(), rstd_c_.data(), n, d, eps);
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    LayerCache& lc = layers_[l];
    const auto& w = p.layers[l];
    lc.hn.resize(n * d);
    lc.rstd_hn.resize(n);
    lc.kc.resize(n * kw);
    lc.vc.resize(n * kw);
    rmsnorm_forward(c_.data(), w.attn_norm, lc.hn.data(), lc.rstd_hn.data(), n, d, eps);
    linear_forward(lc.hn.data(), w.wk, lc.kc.data(), n, d, kw);
    linear_forward(lc.hn.data(), w.wv, lc.vc.data(), n, d, kw);
    rope_apply(lc.kc.data(), ctx_pos_.data(), n, cfg_.n_kv_heads, hd, inv_freq_.data());
  }
}

// The block rows' inputs x0_ [R, d]: known tokens' embeddings and MASK rows, their positions,
// and (context_inject) W_inject c_{first-1} added to every row of a block.
void DominoTrainModel::forward_block_inputs(const DominoConstView& p,
                                            std::span<const int32_t> tokens,
                                            std::span<const int32_t> anchors) {
  const int64_t d = cfg_.target_dim, B = cfg_.block_size, L = static_cast<int64_t>(tokens.size());
  const int64_t A = nblocks_, kn = kn_, Rb = rb_, R = rows_;
  pos_.resize(R);
  is_mask_.assign(R, 1);
  x0_.resize(R * d);
  nv_.resize(A);
  for (int64_t b = 0; b < A; ++b) {
    const int32_t a = anchors[b], first = ctx_of_[b];
    nv_[b] = static_cast<int32_t>(std::min<int64_t>(B - 1, L - 1 - a));
    for (int64_t t = 0; t < Rb; ++t) {
      pos_[b * Rb + t] = static_cast<int32_t>(first + t);
      const bool known = t < kn;
      const float* src = known ? target_.embedding(tokens[first + t]) : p.mask;
      std::copy_n(src, d, x0_.data() + (b * Rb + t) * d);
      is_mask_[b * Rb + t] = !known;
    }
  }
  // context_inject: every row of block b gets W_inject c_{first-1} (nothing when first == 0).
  if (p.ctx_inject) {
    clast_.assign(A * d, 0.0f);
    for (int64_t b = 0; b < A; ++b)
      if (ctx_of_[b] > 0) std::copy_n(c_.data() + (ctx_of_[b] - 1) * d, d, clast_.data() + b * d);
    std::vector<float> inj(A * d);
    linear_forward(clast_.data(), p.ctx_inject, inj.data(), A, d, d);
    for (int64_t b = 0; b < A; ++b)
      if (ctx_of_[b] > 0)
        for (int64_t t = 0; t < Rb; ++t)
          for (int64_t u = 0; u < d; ++u) x0_[(b * Rb + t) * d + u] += inj[b * d + u];
  }
}

// The backbone's layers over the block rows (each block attends to its context and, inside the
// block, bidirectionally), then the final norm: xl_, hfin_ [R, d].
void DominoTrainModel::forward_backbone(const DominoConstView& p) {
  const int64_t d = cfg_.target_dim, H = cfg_.n_heads, hd = cfg_.head_dim, qw = H * hd,
                kw = cfg_.n_kv_heads * hd, ffn = cfg_.ffn_dim;
  const int64_t A = nblocks_, Rb = rb_, R = rows_;
  const float eps = cfg_.rms_eps;
  const AttentionShape ash{H, cfg_.n_kv_heads, hd};
  std::vector<float> x = x0_;
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    LayerCache& lc = layers_[l];
    const auto& w = p.layers[l];
    lc.xin = x;
    lc.rstd1.resize(R);
    lc.h1.resize(R * d);
    lc.q.resize(R * qw);
    lc.k.resize(R * kw);
    lc.v.resize(R * kw);
    lc.att.resize(R * qw);
    rmsnorm_forward(x.data(), w.attn_norm, lc.h1.data(), lc.rstd1.data(), R, d, eps);
    linear_forward(lc.h1.data(), w.wq, lc.q.data(), R, d, qw);
    linear_forward(lc.h1.data(), w.wk, lc.k.data(), R, d, kw);
    linear_forward(lc.h1.data(), w.wv, lc.v.data(), R, d, kw);
    rope_apply(lc.q.data(), pos_.data(), R, H, hd, inv_freq_.data());
    rope_apply(lc.k.data(), pos_.data(), R, cfg_.n_kv_heads, hd, inv_freq_.data());
    lc.probs.resize(A);
    for (int64_t b = 0; b < A; ++b) {
      const BlockAttention in{lc.q.data() + b * Rb * qw, lc.kc.data(), lc.vc.data(),
                              lc.k.data() + b * Rb * kw, lc.v.data() + b * Rb * kw, Rb, ctx_of_[b]};
      block_attention_forward(ash, in, lc.att.data() + b * Rb * qw, lc.probs[b]);
    }
    linear_forward(lc.att.data(), w.wo, x.data(), R, qw, d, 1.0f);  // x += o
    lc.xmid = x;
    lc.rstd2.resize(R);
    lc.h2.resize(R * d);
    lc.gate.resize(R * ffn);
    lc.up.resize(R * ffn);
    lc.act.resize(R * ffn);
    rmsnorm_forward(x.data(), w.ffn_norm, lc.h2.data(), lc.rstd2.data(), R, d, eps);
    linear_forward(lc.h2.data(), w.gate, lc.gate.data(), R, d, ffn);
    linear_forward(lc.h2.data(), w.up, lc.up.data(), R, d, ffn);
    swiglu_forward(lc.gate.data(), lc.up.data(), lc.act.data(), R * ffn);
    linear_forward(lc.act.data(), w.down, x.data(), R, ffn, d, 1.0f);  // x += down
  }
  xl_ = std::move(x);
  hfin_.resize(R * d);
  rstd_f_.resize(R);
  rmsnorm_forward(xl_.data(), p.norm, hfin_.data(), rstd_f_.data(), R, d, eps);
}

// The labelled rows in position-major order (m_first_, m_block_, hsel_ [M, d]) and their base
// logits through the target's head.   returns [M, Vd]
std::vector<float> DominoTrainModel::labelled_base_logits() {
  const int64_t d = cfg_.target_dim, Vd = cfg_.draft_vocab_size();
  const int64_t A = nblocks_, kn = kn_, Rb = rb_;
  max_nv_ = 0;
  for (int32_t v : nv_) max_nv_ = std::max<int64_t>(max_nv_, v);
  m_first_.assign(1, 0);
  m_block_.clear();
  for (int64_t i = 1; i <= max_nv_; ++i) {
    for (int64_t b = 0; b < A; ++b)
      if (nv_[b] >= i) m_block_.push_back(static_cast<int32_t>(b));
    m_first_.push_back(static_cast<int64_t>(m_block_.size()));
  }
  const int64_t M = static_cast<int64_t>(m_block_.size());
  auto row_of = [&](int64_t m, int64_t i) { return m_block_[m] * Rb + kn - 1 + i; };  // R-row
  hsel_.resize(M * d);
  for (int64_t i = 1; i <= max_nv_; ++i)
    for (int64_t m = m_first_[i - 1]; m < m_first_[i]; ++m)
      std::copy_n(hfin_.data() + row_of(m, i) * d, d, hsel_.data() + m * d);
  std::vector<float> base(M * Vd);
  linear_forward(hsel_.data(), target_.head(), base.data(), M, d, Vd);
  return base;
}

// The head, position by position: the GRU chain over the previous draft tokens, the low-rank
// correction added to `base`, the weighted cross entropies and accuracy into `st`.
void DominoTrainModel::forward_head(const DominoConstView& p, std::span<const int32_t> tokens,
                                    std::span<const int32_t> anchors, const LossOptions& opt,
                                    bool grad, const std::vector<float>& base, LossStats& st) {
  const int64_t d = cfg_.target_dim, g = cfg_.gru_dim, r = cfg_.rank,
                Vd = cfg_.draft_vocab_size();
  const int64_t A = nblocks_, M = static_cast<int64_t>(m_block_.size());
  // Per-block weight sums over in-vocabulary labels.
  std::vector<double> wsum(A, 0.0);
  auto pos_weight = [&](int64_t i) {
    return static_cast<float>(std::exp(-static_cast<double>(i - 1) / opt.gamma));
  };
  auto label_of = [&](int64_t b, int64_t i) { return target_.draft_index(tokens[anchors[b] + i]); };
  for (int64_t b = 0; b < A; ++b)
    for (int64_t i = 1; i <= nv_[b]; ++i)
      if (label_of(b, i) >= 0) wsum[b] += pos_weight(i);

  // ---- head: GRU chain and low-rank correction, position by position ----
  in_.resize(M * (d + g));
  mlin_.resize(M * r);
  u_.resize(M * r);
  dfinal_.assign(grad ? M * Vd : 0, 0.0f);
  dbase_.assign(grad ? M * Vd : 0, 0.0f);
  if (keep_) {
    base_keep_ = base;
    final_keep_.resize(M * Vd);
  }
  states_.assign(std::max<int64_t>(max_nv_, 1) * A * g, 0.0f);
  gru_.resize(std::max<int64_t>(max_nv_, 1));
  const GruWeights gw{p.gru_w_ih, p.gru_w_hh, p.gru_b_ih, p.gru_b_hh};
  std::vector<float> xe, sin, sout, fin;
  // One GRU step over the blocks of position i + 1 (m rows [m_first_[i], m_first_[i+1])):
  // s_i = GRU(s_{i-1}, emb(tok)) where s_{-1} = 0.
  auto gru_step = [&](int64_t i, const std::vector<int32_t>& toks) {
    const int64_t lo = m_first_[i], na = m_first_[i + 1] - lo;
    xe.resize(na * d);
    sin.assign(na * g, 0.0f);
    sout.resize(na * g);
    for (int64_t j = 0; j < na; ++j) {
      std::copy_n(target_.embedding(toks[j]), d, xe.data() + j * d);
      if (i > 0)
        std::copy_n(states_.data() + ((i - 1) * A + m_block_[lo + j]) * g, g, sin.data() + j * g);
    }
    gru_forward(gw, xe.data(), sin.data(), sout.data(), na, d, g, gru_[i]);
    for (int64_t j = 0; j < na; ++j)
      std::copy_n(sout.data() + j * g, g, states_.data() + (i * A + m_block_[lo + j]) * g);
  };
  std::vector<int32_t> toks;
  if (max_nv_ > 0) {
    for (int64_t m = m_first_[0]; m < m_first_[1]; ++m) toks.push_back(tokens[anchors[m_block_[m]]]);
    gru_step(0, toks);
  }
  for (int64_t i = 1; i <= max_nv_; ++i) {
    const int64_t lo = m_first_[i - 1], hi = m_first_[i], na = hi - lo;
    for (int64_t m = lo; m < hi; ++m) {
      std::copy_n(hsel_.data() + m * d, d, in_.data() + m * (d + g));
      std::copy_n(states_.data() + ((i - 1) * A + m_block_[m]) * g, g,
                  in_.data() + m * (d + g) + d);
    }
    linear_forward(in_.data() + lo * (d + g), p.w1, mlin_.data() + lo * r, na, d + g, r);
    silu_forward(mlin_.data() + lo * r, u_.data() + lo * r, na * r);
    toks.clear();
    const float w_i = pos_weight(i);
    // final = base + W2 u for the position's rows at once (one GEMM: W2 is read once).
    fin.assign(base.begin() + lo * Vd, base.begin() + hi * Vd);
    linear_forward(u_.data() + lo * r, p.w2, fin.data(), na, r, Vd, 1.0f);
    for (int64_t m = lo; m < hi; ++m) {
      const int64_t b = m_block_[m];
      float* frow = fin.data() + (m - lo) * Vd;
      const float* brow = base.data() + m * Vd;
      if (keep_) std::copy_n(frow, Vd, final_keep_.begin() + m * Vd);
      const int32_t y = label_of(b, i);
      ++st.labels;
      const int64_t best = argmax_row(frow, Vd);
      if (i == 1) {
        ++st.acc1_total;
        st.acc1_hits += y >= 0 && best == y;
      }
      if (y < 0) {
        ++st.oov;
      } else {
        const float wn = static_cast<float>(w_i / wsum[b]);
        const float sf = (1.0f - opt.lambda) * wn * opt.loss_scale;
        const float sb = opt.lambda * wn * opt.loss_scale;
        const double cef = cross_entropy(frow, Vd, y, sf, grad ? &dfinal_[m * Vd] : nullptr);
        const double ceb = cross_entropy(brow, Vd, y, sb, grad ? &dbase_[m * Vd] : nullptr);
        st.ce_final += wn * cef;
        st.ce_base += wn * ceb;
        st.loss += wn * ((1.0 - opt.lambda) * cef + opt.lambda * ceb);
      }
      if (i < nv_[b])
        toks.push_back(opt.head_inputs == HeadInputs::Teacher ? tokens[anchors[b] + i]
                                                              : target_.target_id(best));
    }
    if (i < max_nv_) gru_step(i, toks);
  }
  for (int64_t b = 0; b < A; ++b) st.blocks += wsum[b] > 0;
}

void DominoTrainModel::backward(const DominoConstView& p, DominoView& gr,
                                std::span<const float> features) {
  const int64_t d = cfg_.target_dim, F = cfg_.feature_dim(), H = cfg_.n_heads,
                hd = cfg_.head_dim, qw = H * hd, kw = cfg_.n_kv_heads * hd, ffn = cfg_.ffn_dim,
                g = cfg_.gru_dim, r = cfg_.rank, Vd = cfg_.draft_vocab_size();
  const int64_t A = nblocks_, R = rows_, n = n_ctx_, M = static_cast<int64_t>(m_block_.size()),
                kn = kn_, Rb = rb_;
  const AttentionShape ash{H, cfg_.n_kv_heads, hd};

  // ---- head ----
  std::vector<float> du(M * r, 0.0f), dm(M * r, 0.0f), din(M * (d + g), 0.0f), dh(M * d, 0.0f);
  linear_backward(dfinal_.data(), u_.data(), p.w2, du.data(), gr.w2, M, r, Vd);
  silu_backward(du.data(), mlin_.data(), dm.data(), M * r);
  linear_backward(dm.data(), in_.data(), p.w1, din.data(), gr.w1, M, d + g, r);
  for (int64_t k = 0; k < M * Vd; ++k) dbase_[k] += dfinal_[k];  // final = base + corr
  for (int64_t m = 0; m < M; ++m) std::copy_n(din.data() + m * (d + g), d, dh.data() + m * d);
  linear_backward(dbase_.data(), hsel_.data(), target_.head(), dh.data(), nullptr, M, d, Vd);
  // GRU, backwards through the positions. ds[b] = dL/ds_{i-1} when position i is processed.
  const GruWeights gw{p.gru_w_ih, p.gru_w_hh, p.gru_b_ih, p.gru_b_hh};
  GruGrads gg{gr.gru_w_ih, gr.gru_w_hh, gr.gru_b_ih, gr.gru_b_hh};
  std::vector<float> ds(A * g, 0.0f), dso, dsi;
  for (int64_t i = max_nv_; i >= 1; --i) {
    const int64_t lo = m_first_[i - 1], na = m_first_[i] - lo;
    dso.resize(na * g);
    dsi.resize(na * g);
    for (int64_t j = 0; j < na; ++j) {
      float* dsb = ds.data() + m_block_[lo + j] * g;
      const float* add = din.data() + (lo + j) * (d + g) + d;
      for (int64_t u = 0; u < g; ++u) dsb[u] += add[u];
      std::copy_n(dsb, g, dso.data() + j * g);
    }
    gru_backward(gw, gru_[i - 1], dso.data(), dsi.data(), nullptr, gg, na, d, g);
    for (int64_t j = 0; j < na; ++j)
      std::copy_n(dsi.data() + j * g, g, ds.data() + m_block_[lo + j] * g);
  }

  // ---- final norm ----
  std::vector<float> dhf(R * d, 0.0f), dx(R * d, 0.0f);
  for (int64_t i = 1; i <= max_nv_; ++i)
    for (int64_t m = m_first_[i - 1]; m < m_first_[i]; ++m)
      std::copy_n(dh.data() + m * d, d, dhf.data() + (m_block_[m] * Rb + kn - 1 + i) * d);
  rmsnorm_backward(dhf.data(), xl_.data(), p.norm, rstd_f_.data(), dx.data(), gr.norm, R, d);

  // ---- layers, last first; context K/V gradients per layer ----
  std::vector<float> dc(n * d, 0.0f);
  std::vector<float> dact, dgate, dup, dh2, datt, dq, dk, dv, dh1, dkc, dvc, dhn;
  for (int64_t l = cfg_.n_layers - 1; l >= 0; --l) {
    const LayerCache& lc = layers_[l];
    const auto& w = p.layers[l];
    const auto& wg = gr.layers[l];
    dact.assign(R * ffn, 0.0f);
    dgate.assign(R * ffn, 0.0f);
    dup.assign(R * ffn, 0.0f);
    dh2.assign(R * d, 0.0f);
    linear_backward(dx.data(), lc.act.data(), w.down, dact.data(), wg.down, R, ffn, d);
    swiglu_backward(dact.data(), lc.gate.data(), lc.up.data(), dgate.data(), dup.data(), R * ffn);
    linear_backward(dgate.data(), lc.h2.data(), w.gate, dh2.data(), wg.gate, R, d, ffn);
    linear_backward(dup.data(), lc.h2.data(), w.up, dh2.data(), wg.up, R, d, ffn);
    rmsnorm_backward(dh2.data(), lc.xmid.data(), w.ffn_norm, lc.rstd2.data(), dx.data(),
                     wg.ffn_norm, R, d);
    datt.assign(R * qw, 0.0f);
    linear_backward(dx.data(), lc.att.data(), w.wo, datt.data(), wg.wo, R, qw, d);
    dq.assign(R * qw, 0.0f);
    dk.assign(R * kw, 0.0f);
    dv.assign(R * kw, 0.0f);
    dkc.assign(n * kw, 0.0f);
    dvc.assign(n * kw, 0.0f);
    for (int64_t b = 0; b < A; ++b) {
      const BlockAttention in{lc.q.data() + b * Rb * qw, lc.kc.data(), lc.vc.data(),
                              lc.k.data() + b * Rb * kw, lc.v.data() + b * Rb * kw, Rb, ctx_of_[b]};
      block_attention_backward(ash, in, lc.probs[b], datt.data() + b * Rb * qw,
                               dq.data() + b * Rb * qw, dkc.data(), dvc.data(),
                               dk.data() + b * Rb * kw, dv.data() + b * Rb * kw);
    }
    rope_apply(dq.data(), pos_.data(), R, H, hd, inv_freq_.data(), /*inverse=*/true);
    rope_apply(dk.data(), pos_.data(), R, cfg_.n_kv_heads, hd, inv_freq_.data(), true);
    dh1.assign(R * d, 0.0f);
    linear_backward(dq.data(), lc.h1.data(), w.wq, dh1.data(), wg.wq, R, d, qw);
    linear_backward(dk.data(), lc.h1.data(), w.wk, dh1.data(), wg.wk, R, d, kw);
    linear_backward(dv.data(), lc.h1.data(), w.wv, dh1.data(), wg.wv, R, d, kw);
    rmsnorm_backward(dh1.data(), lc.xin.data(), w.attn_norm, lc.rstd1.data(), dx.data(),
                     wg.attn_norm, R, d);
    // Context entries of this layer.
    rope_apply(dkc.data(), ctx_pos_.data(), n, cfg_.n_kv_heads, hd, inv_freq_.data(), true);
    dhn.assign(n * d, 0.0f);
    linear_backward(dkc.data(), lc.hn.data(), w.wk, dhn.data(), wg.wk, n, d, kw);
    linear_backward(dvc.data(), lc.hn.data(), w.wv, dhn.data(), wg.wv, n, d, kw);
    rmsnorm_backward(dhn.data(), c_.data(), w.attn_norm, lc.rstd_hn.data(), dc.data(),
                     wg.attn_norm, n, d);
  }
  for (int64_t row = 0; row < R; ++row)
    if (is_mask_[row])
      for (int64_t u = 0; u < d; ++u) gr.mask[u] += dx[row * d + u];
  if (p.ctx_inject) {  // d(inject_b) = sum of the block's row gradients
    std::vector<float> dinj(A * d, 0.0f), dlast(A * d, 0.0f);
    for (int64_t b = 0; b < A; ++b)
      if (ctx_of_[b] > 0)
        for (int64_t t = 0; t < Rb; ++t)
          for (int64_t u = 0; u < d; ++u) dinj[b * d + u] += dx[(b * Rb + t) * d + u];
    linear_backward(dinj.data(), clast_.data(), p.ctx_inject, dlast.data(), gr.ctx_inject, A, d, d);
    for (int64_t b = 0; b < A; ++b)
      if (ctx_of_[b] > 0)
        for (int64_t u = 0; u < d; ++u) dc[(ctx_of_[b] - 1) * d + u] += dlast[b * d + u];
  }
  std::vector<float> dpre(n * d, 0.0f);
  rmsnorm_backward(dc.data(), pre_.data(), p.fc_norm, rstd_c_.data(), dpre.data(), gr.fc_norm, n,
                   d);
  linear_backward(dpre.data(), features.data(), p.fc, nullptr, gr.fc, n, F, d);
}

DominoTrainModel::BlockOut DominoTrainModel::block_out(int64_t b) const {
  const int64_t d = cfg_.target_dim, Vd = cfg_.draft_vocab_size();
  BlockOut out;
  out.rows = nv_.at(b);
  for (int64_t i = 1; i <= out.rows; ++i)
    for (int64_t m = m_first_[i - 1]; m < m_first_[i]; ++m)
      if (m_block_[m] == b) {
        out.base.insert(out.base.end(), base_keep_.begin() + m * Vd, base_keep_.begin() + (m + 1) * Vd);
        out.final_logits.insert(out.final_logits.end(), final_keep_.begin() + m * Vd,
                                final_keep_.begin() + (m + 1) * Vd);
        out.hidden.insert(out.hidden.end(), hsel_.begin() + m * d, hsel_.begin() + (m + 1) * d);
      }
  return out;
}

double DominoTrainModel::flops(int64_t n_ctx, int64_t anchors, int64_t avg_ctx) const {
  const double d = cfg_.target_dim, F = cfg_.feature_dim(), qw = cfg_.n_heads * cfg_.head_dim,
               kw = cfg_.n_kv_heads * cfg_.head_dim, ffn = cfg_.ffn_dim, B = cfg_.block_size,
               g = cfg_.gru_dim, r = cfg_.rank, Vd = cfg_.draft_vocab_size();
  const double R = anchors * B, M = anchors * (B - 1), Lx = cfg_.n_layers;
  // Forward multiply-adds x 2; backward ~2x forward (weights and inputs), the frozen LM head 1x.
  const double ctx = n_ctx * (F * d + Lx * 2 * d * kw);
  const double layer = R * (d * (qw + 2 * kw) + qw * d + 3 * d * ffn) +
                       anchors * cfg_.n_heads * B * (avg_ctx + B) * cfg_.head_dim * 2;
  const double head = M * ((d + g) * r + r * Vd + 3 * g * (d + g));
  const double lm = M * d * Vd;
  return 2.0 * (3.0 * (ctx + Lx * layer + head) + 2.0 * lm);
}

}  // namespace ssd::train
