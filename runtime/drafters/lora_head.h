// The early-exit draft head: the target's own LM head plus a low-rank (LoRA) update, applied to
// z = RMSNorm_final(h_L), the target's output norm on layer L's hidden state:
//
//   logits = W z + s * B (A z)        W [vocab, dim] frozen (the target's LM head)
//                                     A [r, dim]     small random init (seeded)
//                                     B [vocab, r]   zero init
//
// B = 0 makes the untrained head exactly the target's LM head read out at layer L, so an
// early-exit drafter starts as plain self-speculation and online learning (DVI) only has to learn
// a correction. A is random because with B = 0 the gradient of A is zero (dL/dA = s B^T g z^T);
// the first updates move B (dL/dB = s g (A z)^T), after which both move.
//
// W z is computed by the drafter's forward (it is the transformer's own LM head); this file holds
// only the correction. The math is written as templates on the scalar type so that the float
// runtime path and the double-precision finite-difference test run the same code (dvi_loss.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ssd {

struct LoraOptions {
  int32_t rank = 8;        // r
  float scale = 1.0f;      // s
  float init_range = 0;    // A ~ U(-a, a); 0 = 1 / sqrt(dim)
  uint64_t seed = 0x5eed;  // Philox key of A's init
};

// Parameters viewed as plain arrays, for the templated math below.
template <class T>
struct LoraView {
  const T* A = nullptr;  // [r, dim]
  const T* B = nullptr;  // [vocab, r]
  int64_t r = 0, dim = 0, vocab = 0;
  T scale = 1;
};

// u = A z.   z: [dim]   u: [r]
template <class T>
void lora_project(const LoraView<T>& h, const T* z, T* u) {
  for (int64_t i = 0; i < h.r; ++i) {
    double acc = 0;
    const T* a = h.A + i * h.dim;
    for (int64_t c = 0; c < h.dim; ++c) acc += static_cast<double>(a[c]) * z[c];
    u[i] = static_cast<T>(acc);
  }
}

// logits += s * B u.   u: [r]   logits: [vocab]
// Sums over r (a few terms) are in T; the vocabulary-long loops stay simple so they vectorise.
template <class T>
void lora_expand_add(const LoraView<T>& h, const T* u, T* logits) {
  std::vector<T> su(static_cast<size_t>(h.r));  // [r] s * u
  for (int64_t i = 0; i < h.r; ++i) su[i] = h.scale * u[i];
  for (int64_t v = 0; v < h.vocab; ++v) {
    const T* b = h.B + v * h.r;
    T acc = 0;
    for (int64_t i = 0; i < h.r; ++i) acc += b[i] * su[i];
    logits[v] += acc;
  }
}

// Backward of logits = W z + s B u, u = A z, for one row with g = dL/dlogits [vocab]:
//   dB += s * g u^T          [vocab, r]
//   dA += s * (B^T g) z^T    [r, dim]
// `bg` is scratch of r entries. B^T g sums the vocabulary in blocks of T, the blocks in double.
template <class T>
void lora_backward(const LoraView<T>& h, const T* z, const T* u, const T* g, T* dA, T* dB,
                   double* bg) {
  constexpr int64_t kBlock = 1024;
  std::vector<T> su(static_cast<size_t>(h.r)), part(static_cast<size_t>(h.r));  // [r], [r]
  for (int64_t i = 0; i < h.r; ++i) {
    su[i] = h.scale * u[i];
    bg[i] = 0;
  }
  for (int64_t v0 = 0; v0 < h.vocab; v0 += kBlock) {
    std::fill(part.begin(), part.end(), T(0));
    const int64_t v1 = std::min(h.vocab, v0 + kBlock);
    for (int64_t v = v0; v < v1; ++v) {
      const T gv = g[v];
      const T* b = h.B + v * h.r;
      T* db = dB + v * h.r;
      for (int64_t i = 0; i < h.r; ++i) {
        db[i] += gv * su[i];
        part[i] += gv * b[i];
      }
    }
    for (int64_t i = 0; i < h.r; ++i) bg[i] += part[i];
  }
  for (int64_t i = 0; i < h.r; ++i) {
    const T k = static_cast<T>(h.scale * bg[i]);
    T* da = dA + i * h.dim;
    for (int64_t c = 0; c < h.dim; ++c) da[c] += k * z[c];
  }
}

// The trainable head. Float storage; the frozen W lives in the model file.
class LoraHead {
 public:
  LoraHead(int64_t dim, int64_t vocab, const LoraOptions& opts);

  int64_t rank() const { return r_; }
  int64_t dim() const { return dim_; }
  int64_t vocab() const { return vocab_; }
  float scale() const { return scale_; }
  LoraView<float> view() const { return {A_.data(), B_.data(), r_, dim_, vocab_, scale_}; }

  // logits[n, vocab] += s * B A z for rows z [n, dim]. A no-op while B is still all zero (the
  // untrained head adds exactly nothing).
  void add_correction(const float* z, float* logits, int64_t n) const;

  std::vector<float>& A() { return A_; }  // [r, dim]
  std::vector<float>& B() { return B_; }  // [vocab, r]
  const std::vector<float>& A() const { return A_; }
  const std::vector<float>& B() const { return B_; }
  // Called by the trainer after it changes B, so add_correction knows B may be non-zero.
  void mark_trained() { b_zero_ = false; }

 private:
  int64_t r_, dim_, vocab_;
  float scale_;
  std::vector<float> A_, B_;
  bool b_zero_ = true;
};

}  // namespace ssd
