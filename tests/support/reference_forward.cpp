#include "tests/support/reference_forward.h"

#include <cmath>

#include "kernels/cpu/rowops.h"

namespace ssd::test {
namespace {

using Vec = std::vector<double>;
using Mat = std::vector<Vec>;  // rows

Vec decode_vector(const TensorRef* t) {
  std::vector<float> f(t->elements());
  kernels::ref::dequantize_row(t->type, t->data, f.data(), static_cast<int64_t>(f.size()));
  return Vec(f.begin(), f.end());
}

// A weight matrix [rows][cols] decoded to double.
Mat decode_matrix(const TensorRef* t) {
  const int64_t cols = static_cast<int64_t>(t->ne[0]), rows = static_cast<int64_t>(t->ne[1]);
  Mat m(rows);
  std::vector<float> f(cols);
  for (int64_t r = 0; r < rows; ++r) {
    kernels::ref::dequantize_row(t->type, t->data + r * t->row_bytes(), f.data(), cols);
    m[r].assign(f.begin(), f.end());
  }
  return m;
}

Vec matvec(const Mat& w, const Vec& x) {
  Vec y(w.size(), 0.0);
  for (size_t r = 0; r < w.size(); ++r)
    for (size_t c = 0; c < x.size(); ++c) y[r] += w[r][c] * x[c];
  return y;
}

Vec rmsnorm(const Vec& x, const Vec& g, double eps, size_t offset = 0, size_t len = 0) {
  if (len == 0) len = x.size();
  double ss = 0;
  for (size_t i = 0; i < len; ++i) ss += x[offset + i] * x[offset + i];
  const double inv = 1.0 / std::sqrt(ss / len + eps);
  Vec y(x);
  for (size_t i = 0; i < len; ++i) y[offset + i] = x[offset + i] * inv * g[i];
  return y;
}

// Frequencies straight from the definitions: theta^(-2i/d), divided per frequency by the GGUF
// factors, or by the llama3 rule (by wavelength band) from config.json.
Vec frequencies(const ModelConfig& c, const TensorRef* factors) {
  const int64_t half = c.rope_dim / 2;
  Vec f(half);
  Vec fac = factors ? decode_vector(factors) : Vec(half, 1.0);
  const auto& rs = c.rope_scaling;
  for (int64_t i = 0; i < half; ++i) {
    double v = 1.0 / std::pow(static_cast<double>(c.rope_theta), 2.0 * i / c.rope_dim);
    v /= fac[i];
    if (!factors && rs.kind == RopeScaling::Kind::Linear) v /= rs.factor;
    if (!factors && rs.kind == RopeScaling::Kind::Llama3) {
      const double wavelength = 2 * M_PI / v;
      const double lo = rs.original_context / rs.low_freq_factor;   // longer: fully scaled
      const double hi = rs.original_context / rs.high_freq_factor;  // shorter: untouched
      if (wavelength > lo) {
        v = v / rs.factor;
      } else if (wavelength >= hi) {
        const double t = (rs.original_context / wavelength - rs.low_freq_factor) /
                         (rs.high_freq_factor - rs.low_freq_factor);
        v = t * v + (1 - t) * v / rs.factor;
      }
    }
    f[i] = v;
  }
  return f;
}

// Rotates every head of x (n_heads * head_dim values) at position pos.
void rotate(Vec& x, int64_t n_heads, const ModelConfig& c, const Vec& freq, int64_t pos) {
  const int64_t hd = c.head_dim, half = c.rope_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      int64_t a, b;
      if (c.rope_layout == RopeLayout::Interleaved) {
        a = h * hd + 2 * i;
        b = a + 1;
      } else {
        a = h * hd + i;
        b = a + half;
      }
      const double ang = pos * freq[i], cs = std::cos(ang), sn = std::sin(ang);
      const double xa = x[a], xb = x[b];
      x[a] = xa * cs - xb * sn;
      x[b] = xa * sn + xb * cs;
    }
  }
}

}  // namespace

std::vector<std::vector<double>> reference_logits(const ModelFile& model,
                                                  const std::vector<int32_t>& tokens) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  const int64_t n = static_cast<int64_t>(tokens.size()), hd = c.head_dim;
  const int64_t group = c.n_heads / c.n_kv_heads;
  const Vec freq = frequencies(c, w.rope_freqs);

  const Mat embd = decode_matrix(w.token_embd);
  Mat x(n);
  for (int64_t t = 0; t < n; ++t) x[t] = embd[tokens[t]];

  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = w.layers[l];
    const Mat wq = decode_matrix(L.wq), wk = decode_matrix(L.wk), wv = decode_matrix(L.wv),
              wo = decode_matrix(L.wo), wg = decode_matrix(L.w_gate), wu = decode_matrix(L.w_up),
              wd = decode_matrix(L.w_down);
    const Vec an = decode_vector(L.attn_norm), fn = decode_vector(L.ffn_norm);
    Mat q(n), k(n), v(n);
    for (int64_t t = 0; t < n; ++t) {
      const Vec h = rmsnorm(x[t], an, c.rms_eps);
      q[t] = matvec(wq, h);
      k[t] = matvec(wk, h);
      v[t] = matvec(wv, h);
      if (L.bq) {
        const Vec bq = decode_vector(L.bq), bk = decode_vector(L.bk), bv = decode_vector(L.bv);
        for (size_t i = 0; i < q[t].size(); ++i) q[t][i] += bq[i];
        for (size_t i = 0; i < k[t].size(); ++i) k[t][i] += bk[i], v[t][i] += bv[i];
      }
      if (L.q_norm) {
        const Vec qn = decode_vector(L.q_norm), kn = decode_vector(L.k_norm);
        for (int64_t h = 0; h < c.n_heads; ++h) q[t] = rmsnorm(q[t], qn, c.rms_eps, h * hd, hd);
        for (int64_t h = 0; h < c.n_kv_heads; ++h) k[t] = rmsnorm(k[t], kn, c.rms_eps, h * hd, hd);
      }
      rotate(q[t], c.n_heads, c, freq, t);
      rotate(k[t], c.n_kv_heads, c, freq, t);
    }
    for (int64_t t = 0; t < n; ++t) {
      Vec att(c.n_heads * hd, 0.0);
      for (int64_t h = 0; h < c.n_heads; ++h) {
        const int64_t g = h / group;
        Vec s(t + 1);
        double mx = -1e300;
        for (int64_t u = 0; u <= t; ++u) {
          double d = 0;
          for (int64_t i = 0; i < hd; ++i) d += q[t][h * hd + i] * k[u][g * hd + i];
          s[u] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[u]);
        }
        double z = 0;
        for (auto& e : s) z += (e = std::exp(e - mx));
        for (int64_t u = 0; u <= t; ++u)
          for (int64_t i = 0; i < hd; ++i) att[h * hd + i] += s[u] / z * v[u][g * hd + i];
      }
      const Vec o = matvec(wo, att);
      for (int64_t i = 0; i < c.dim; ++i) x[t][i] += o[i];
      const Vec h2 = rmsnorm(x[t], fn, c.rms_eps);
      const Vec gt = matvec(wg, h2), up = matvec(wu, h2);
      Vec a(gt.size());
      for (size_t i = 0; i < a.size(); ++i) a[i] = gt[i] / (1 + std::exp(-gt[i])) * up[i];
      const Vec d = matvec(wd, a);
      for (int64_t i = 0; i < c.dim; ++i) x[t][i] += d[i];
    }
  }
  const Mat out = decode_matrix(w.output);
  const Vec on = decode_vector(w.output_norm);
  std::vector<std::vector<double>> logits(n);
  for (int64_t t = 0; t < n; ++t) logits[t] = matvec(out, rmsnorm(x[t], on, c.rms_eps));
  return logits;
}

}  // namespace ssd::test
