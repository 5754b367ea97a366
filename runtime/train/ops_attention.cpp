// Block attention forward/backward (see ops_attention.h). Scores S = scale q k^T over
// [context ; block] keys, P = softmax(S), O = P V. Backward: dP = dO V^T,
// dS = P * (dP - rowsum(dP * P)), dq = scale dS K, dK = scale dS^T q, dV = P^T dO.
#include "runtime/train/ops_attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace ssd::train {
namespace {

// C[m, n] (ldc) = alpha A B^T + beta C, A [m, k] (lda), B [n, k] (ldb).
void gemm_nt(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
             const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), alpha, a, int(lda),
              b, int(ldb), beta, c, int(ldc));
}
// C[m, n] = alpha A B + beta C, A [m, k], B [k, n].
void gemm_nn(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
             const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0 || k == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), alpha, a,
              int(lda), b, int(ldb), beta, c, int(ldc));
}
// C[m, n] = alpha A^T B + beta C, A [k, m], B [k, n].
void gemm_tn(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
             const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0 || k == 0) return;
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(m), int(n), int(k), alpha, a, int(lda),
              b, int(ldb), beta, c, int(ldc));
}

}  // namespace

void block_attention_forward(const AttentionShape& s, const BlockAttention& in, float* out,
                             std::vector<float>& probs) {
  const int64_t hd = s.head_dim, qw = s.heads * hd, kw = s.kv_heads * hd;
  const int64_t B = in.rows, a = in.ctx, nk = a + B, group = s.heads / s.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  probs.resize(s.heads * B * nk);
  for (int64_t h = 0; h < s.heads; ++h) {
    const int64_t kh = h / group;
    float* p = probs.data() + h * B * nk;  // [B, nk]
    const float* qh = in.q + h * hd;
    if (a > 0) gemm_nt(B, a, hd, scale, qh, qw, in.kc + kh * hd, kw, 0.0f, p, nk);
    gemm_nt(B, B, hd, scale, qh, qw, in.kb + kh * hd, kw, 0.0f, p + a, nk);
    for (int64_t t = 0; t < B; ++t) {
      float* row = p + t * nk;
      const float mx = *std::max_element(row, row + nk);
      double sum = 0;
      for (int64_t j = 0; j < nk; ++j) {
        row[j] = std::exp(row[j] - mx);
        sum += row[j];
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < nk; ++j) row[j] *= inv;
    }
    float* oh = out + h * hd;
    gemm_nn(B, hd, a, 1.0f, p, nk, in.vc + kh * hd, kw, 0.0f, oh, qw);
    gemm_nn(B, hd, B, 1.0f, p + a, nk, in.vb + kh * hd, kw, a > 0 ? 1.0f : 0.0f, oh, qw);
  }
}

void block_attention_backward(const AttentionShape& s, const BlockAttention& in,
                              const std::vector<float>& probs, const float* dout, float* dq,
                              float* dkc, float* dvc, float* dkb, float* dvb) {
  const int64_t hd = s.head_dim, qw = s.heads * hd, kw = s.kv_heads * hd;
  const int64_t B = in.rows, a = in.ctx, nk = a + B, group = s.heads / s.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> ds(B * nk);
  for (int64_t h = 0; h < s.heads; ++h) {
    const int64_t kh = h / group;
    const float* p = probs.data() + h * B * nk;
    const float* doh = dout + h * hd;
    // dP = dO V^T   [B, nk]
    if (a > 0) gemm_nt(B, a, hd, 1.0f, doh, qw, in.vc + kh * hd, kw, 0.0f, ds.data(), nk);
    gemm_nt(B, B, hd, 1.0f, doh, qw, in.vb + kh * hd, kw, 0.0f, ds.data() + a, nk);
    for (int64_t t = 0; t < B; ++t) {
      float* dr = ds.data() + t * nk;
      const float* pr = p + t * nk;
      double dot = 0;
      for (int64_t j = 0; j < nk; ++j) dot += static_cast<double>(dr[j]) * pr[j];
      const float dt = static_cast<float>(dot);
      for (int64_t j = 0; j < nk; ++j) dr[j] = pr[j] * (dr[j] - dt);
    }
    // dV += P^T dO, dK += scale dS^T q, dq += scale dS K.
    gemm_tn(a, hd, B, 1.0f, p, nk, doh, qw, 1.0f, dvc + kh * hd, kw);
    gemm_tn(B, hd, B, 1.0f, p + a, nk, doh, qw, 1.0f, dvb + kh * hd, kw);
    const float* qh = in.q + h * hd;
    gemm_tn(a, hd, B, scale, ds.data(), nk, qh, qw, 1.0f, dkc + kh * hd, kw);
    gemm_tn(B, hd, B, scale, ds.data() + a, nk, qh, qw, 1.0f, dkb + kh * hd, kw);
    gemm_nn(B, hd, a, scale, ds.data(), nk, in.kc + kh * hd, kw, 1.0f, dq + h * hd, qw);
    gemm_nn(B, hd, B, scale, ds.data() + a, nk, in.kb + kh * hd, kw, 1.0f, dq + h * hd, qw);
  }
}

}  // namespace ssd::train
