// Float64 Domino reference (see domino_reference.h). Deliberately naive: matrices are vectors of
// rows, attention is an explicit loop over every key, RoPE is computed from its definition.
#include "tests/support/domino_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/rowops.h"

namespace ssd::test {
namespace {

using Vec = std::vector<double>;
using Mat = std::vector<Vec>;

Vec decode(const TensorRef& t, uint64_t offset_bytes, uint64_t n) {
  std::vector<float> f(n);
  kernels::ref::dequantize_row(t.type, t.data + offset_bytes, f.data(), static_cast<int64_t>(n));
  return Vec(f.begin(), f.end());
}

Mat matrix(const TensorRef& t) {
  Mat m(t.ne[1]);
  for (uint64_t r = 0; r < t.ne[1]; ++r) m[r] = decode(t, r * t.row_bytes(), t.ne[0]);
  return m;
}

Vec vec(const TensorRef& t) { return decode(t, 0, t.elements()); }

Vec matvec(const Mat& w, const Vec& x) {
  Vec y(w.size(), 0.0);
  for (size_t r = 0; r < w.size(); ++r)
    for (size_t c = 0; c < x.size(); ++c) y[r] += w[r][c] * x[c];
  return y;
}

Vec rmsnorm(const Vec& x, const Vec& g, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / x.size() + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * g[i];
  return y;
}

// NeoX rotation of every head of x ([heads * hd]) at position pos: pairs (i, i + hd/2).
void rope(Vec& x, int64_t hd, int64_t pos, double theta) {
  const int64_t half = hd / 2;
  for (size_t h = 0; h < x.size() / hd; ++h)
    for (int64_t i = 0; i < half; ++i) {
      const double ang = pos * std::pow(theta, -2.0 * i / hd);
      double& a = x[h * hd + i];
      double& b = x[h * hd + i + half];
      const double a0 = a, b0 = b;
      a = a0 * std::cos(ang) - b0 * std::sin(ang);
      b = a0 * std::sin(ang) + b0 * std::cos(ang);
    }
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

DominoReference::DominoReference(const DominoCheckpoint& ck, const ModelFile& target)
    : cfg_(ck.config()) {
  fc_ = matrix(*ck.fc);
  fc_norm_ = vec(*ck.fc_norm);
  mask_ = vec(*ck.mask_embedding);
  if (ck.ctx_inject) inject_ = matrix(*ck.ctx_inject);
  final_norm_ = vec(*ck.final_norm);
  for (const DominoLayerTensors& t : ck.layers) {
    Layer l{matrix(*t.wq), matrix(*t.wk),     matrix(*t.wv),   matrix(*t.wo),
            matrix(*t.w_gate), matrix(*t.w_up), matrix(*t.w_down), vec(*t.attn_norm),
            vec(*t.ffn_norm)};
    layers_.push_back(std::move(l));
  }
  w_ih_ = matrix(*ck.head.gru_w_ih);
  w_hh_ = matrix(*ck.head.gru_w_hh);
  b_ih_ = vec(*ck.head.gru_b_ih);
  b_hh_ = vec(*ck.head.gru_b_hh);
  w1_ = matrix(*ck.head.w1);
  w2_ = matrix(*ck.head.w2);
  embd_ = matrix(*target.weights().token_embd);
  lm_head_ = matrix(*target.weights().output);
  if (!cfg_.draft_vocab.empty()) {  // only the draft vocabulary's rows, in its order
    Mat rows;
    for (int32_t id : cfg_.draft_vocab) rows.push_back(lm_head_[id]);
    lm_head_ = std::move(rows);
  }
}

DominoReference::BlockOut DominoReference::block(const std::vector<float>& features,
                                                 const std::vector<int32_t>& known,
                                                 bool with_inject, int64_t masks) const {
  const int64_t d = cfg_.target_dim, fdim = cfg_.feature_dim(), hd = cfg_.head_dim;
  const int64_t nh = cfg_.n_heads, group = cfg_.n_heads / cfg_.n_kv_heads;
  const int64_t n_ctx = static_cast<int64_t>(features.size()) / fdim;
  if (masks < 0) masks = cfg_.block_size - 1;
  const int64_t m = static_cast<int64_t>(known.size()), rows = m + masks;
  const double eps = cfg_.rms_eps, theta = cfg_.rope_theta;

  Mat ctx(n_ctx);
  for (int64_t j = 0; j < n_ctx; ++j) {
    Vec x(features.begin() + j * fdim, features.begin() + (j + 1) * fdim);
    ctx[j] = rmsnorm(matvec(fc_, x), fc_norm_, eps);
  }
  Mat x(rows);
  for (int64_t t = 0; t < rows; ++t) x[t] = t < m ? embd_[known[t]] : mask_;
  if (with_inject && !inject_.empty() && n_ctx > 0) {  // context_inject: W c_{n_ctx-1} into every row
    const Vec add = matvec(inject_, ctx[n_ctx - 1]);
    for (Vec& row : x)
      for (int64_t u = 0; u < d; ++u) row[u] += add[u];
  }

  for (const Layer& L : layers_) {
    // Keys/values: context entries first (positions 0..n_ctx-1), then the block's rows.
    Mat keys, values, queries(rows);
    for (int64_t j = 0; j < n_ctx; ++j) {
      const Vec hn = rmsnorm(ctx[j], L.attn_norm, eps);
      Vec k = matvec(L.wk, hn);
      rope(k, hd, j, theta);
      keys.push_back(k);
      values.push_back(matvec(L.wv, hn));
    }
    for (int64_t t = 0; t < rows; ++t) {
      const Vec hn = rmsnorm(x[t], L.attn_norm, eps);
      Vec q = matvec(L.wq, hn), k = matvec(L.wk, hn);
      rope(q, hd, n_ctx + t, theta);
      rope(k, hd, n_ctx + t, theta);
      queries[t] = q;
      keys.push_back(k);
      values.push_back(matvec(L.wv, hn));
    }
    for (int64_t t = 0; t < rows; ++t) {
      Vec attn(nh * hd, 0.0);
      for (int64_t h = 0; h < nh; ++h) {
        const int64_t g = h / group;
        Vec s(keys.size());
        double mx = -1e300;
        for (size_t e = 0; e < keys.size(); ++e) {  // every context entry and the whole block
          double dot = 0;
          for (int64_t i = 0; i < hd; ++i) dot += queries[t][h * hd + i] * keys[e][g * hd + i];
          s[e] = dot / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[e]);
        }
        double z = 0;
        for (double& v : s) z += (v = std::exp(v - mx));
        for (size_t e = 0; e < keys.size(); ++e)
          for (int64_t i = 0; i < hd; ++i) attn[h * hd + i] += s[e] / z * values[e][g * hd + i];
      }
      const Vec o = matvec(L.wo, attn);
      for (int64_t i = 0; i < d; ++i) x[t][i] += o[i];
    }
    for (int64_t t = 0; t < rows; ++t) {
      const Vec hn = rmsnorm(x[t], L.ffn_norm, eps);
      Vec a = matvec(L.gate, hn);
      const Vec b = matvec(L.up, hn);
      for (size_t i = 0; i < a.size(); ++i) a[i] = a[i] / (1.0 + std::exp(-a[i])) * b[i];
      const Vec o = matvec(L.down, a);
      for (int64_t i = 0; i < d; ++i) x[t][i] += o[i];
    }
  }
  BlockOut out;
  for (int64_t i = 1; i <= masks; ++i) {
    out.hidden.push_back(rmsnorm(x[m - 1 + i], final_norm_, eps));
    out.logits.push_back(matvec(lm_head_, out.hidden.back()));
  }
  return out;
}

DominoReference::WalkOut DominoReference::walk(const float* base, const float* hidden,
                                               int32_t anchor, int32_t k,
                                               const std::vector<int32_t>* forced) const {
  const int64_t d = cfg_.target_dim, g = cfg_.gru_dim, vocab = cfg_.draft_vocab_size();
  auto gru = [&](const Vec& s, int32_t tok) {
    const Vec gi = matvec(w_ih_, embd_[tok]), gh = matvec(w_hh_, s);
    Vec out(g);
    for (int64_t u = 0; u < g; ++u) {
      const double r = sigmoid(gi[u] + b_ih_[u] + gh[u] + b_hh_[u]);
      const double z = sigmoid(gi[g + u] + b_ih_[g + u] + gh[g + u] + b_hh_[g + u]);
      const double n = std::tanh(gi[2 * g + u] + b_ih_[2 * g + u] + r * (gh[2 * g + u] + b_hh_[2 * g + u]));
      out[u] = (1 - z) * n + z * s[u];
    }
    return out;
  };
  WalkOut w;
  Vec s = gru(Vec(g, 0.0), anchor);
  for (int32_t i = 0; i < k; ++i) {
    Vec in(hidden + i * d, hidden + (i + 1) * d);
    in.insert(in.end(), s.begin(), s.end());
    Vec mid = matvec(w1_, in);
    for (double& v : mid) v = v / (1.0 + std::exp(-v));
    Vec logits = matvec(w2_, mid);
    for (int64_t t = 0; t < vocab; ++t) logits[t] += base[i * vocab + t];
    int32_t tok =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (!cfg_.draft_vocab.empty()) {  // back to target ids, -inf outside the draft vocabulary
      Vec full(cfg_.target_vocab, -std::numeric_limits<double>::infinity());
      for (int64_t t = 0; t < vocab; ++t) full[cfg_.draft_vocab[t]] = logits[t];
      logits = std::move(full);
      tok = cfg_.draft_vocab[tok];
    }
    w.tokens.push_back(tok);
    w.logits.push_back(std::move(logits));
    s = gru(s, forced ? forced->at(i) : tok);
  }
  return w;
}

}  // namespace ssd::test
