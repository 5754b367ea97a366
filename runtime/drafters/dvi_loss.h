// The DVI training objective for the early-exit draft head, with its gradient written by hand.
//
// One logged tuple (one drafted position) gives draft logits l = W z + s B A z over the vocabulary,
// q = softmax(l) (temperature 1, full vocabulary), the drafted token a, the reward r (1 accepted,
// 0 the first reject) and the target's distribution p~ at that position (its softmax at
// temperature 1, kept on its top-k support and renormalised; k = vocab keeps all of it). With
// log q_v = l_v - logsumexp(l) and P = sum_v p~_v (1 up to rounding):
//
//   KL  (online distillation)  L_kl = sum_{v in supp p~} p~_v (log p~_v - log q_v)
//                              dL_kl/dl_v = P q_v - p~_v
//   CE  (reward-masked)        L_ce = -r log q_a
//                              dL_ce/dl_v = r (q_v - [v == a])
//   PG  (REINFORCE, baseline)  L_pg = -(r - b) log q_a      (b: running mean reward, a constant)
//                              dL_pg/dl_v = (r - b) (q_v - [v == a])
//
// total = w_kl L_kl + w_ce L_ce + w_pg L_pg, averaged over the minibatch; the KL->RL schedule of
// the trainer only changes the three weights. L_pg is the surrogate whose gradient is the
// REINFORCE estimator -(r - b) grad log q(a); it is a loss only in that sense.
//
// From g = dL/dl the head's gradients follow (lora_head.h): dB = s g (A z)^T, dA = s (B^T g) z^T.
// Everything here is a template on the scalar type: the trainer runs it in float, the finite-
// difference test in double on the very same code. Sums over the vocabulary are in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/drafters/lora_head.h"

namespace ssd {

struct DviLossWeights {
  double kl = 0;
  double ce = 0;
  double pg = 0;
  double baseline = 0;  // b of the policy-gradient term
};

struct DviLossValue {
  double kl = 0, ce = 0, pg = 0;  // unweighted terms (batch means)
  double total = 0;               // weighted sum
};

// One tuple, viewed as arrays (the rollout buffer owns the storage).
template <class T>
struct DviSample {
  const T* z = nullptr;            // [dim] normed h_L
  const T* base_logits = nullptr;  // [vocab] W z, the frozen part of the draft logits
  int32_t token = 0;               // a
  double reward = 0;               // r
  const int32_t* p_ids = nullptr;  // [p_n] target support
  const T* p_probs = nullptr;      // [p_n] target probabilities (renormalised over the support)
  int64_t p_n = 0;
};

// Loss terms at draft logits l [vocab]; g [vocab] (overwritten) = d total / dl, unless null.
// `e` is scratch of vocab entries (exp(l - max), in T: the one pass over the vocabulary that
// costs anything is this exponential, so it runs once and in the caller's precision).
template <class T>
DviLossValue dvi_row_loss(const T* l, int64_t vocab, const DviSample<T>& s,
                          const DviLossWeights& w, T* g, T* e) {
  T m = l[0];
  for (int64_t v = 1; v < vocab; ++v) m = std::max(m, l[v]);
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += e[v] = std::exp(l[v] - m);
  const double lse = static_cast<double>(m) + std::log(sum);
  auto logq = [&](int64_t v) { return static_cast<double>(l[v]) - lse; };

  DviLossValue out;
  double p_total = 0;
  for (int64_t i = 0; i < s.p_n; ++i) {
    const double p = s.p_probs[i];
    p_total += p;
    if (p > 0) out.kl += p * (std::log(p) - logq(s.p_ids[i]));
  }
  const double r = s.reward;
  out.ce = -r * logq(s.token);
  out.pg = -(r - w.baseline) * logq(s.token);
  out.total = w.kl * out.kl + w.ce * out.ce + w.pg * out.pg;
  if (!g) return out;

  // g_v = q_v (w_kl P + c) - w_kl p~_v - c [v == a],  c = w_ce r + w_pg (r - b),  q_v = e_v / sum
  const double c = w.ce * r + w.pg * (r - w.baseline);
  const T qk = static_cast<T>((w.kl * p_total + c) / sum);
  for (int64_t v = 0; v < vocab; ++v) g[v] = qk * e[v];
  if (w.kl != 0)
    for (int64_t i = 0; i < s.p_n; ++i)
      g[s.p_ids[i]] = static_cast<T>(g[s.p_ids[i]] - w.kl * static_cast<double>(s.p_probs[i]));
  g[s.token] = static_cast<T>(g[s.token] - c);
  return out;
}

// The same without scratch (allocates it): for tests and one-off use.
template <class T>
DviLossValue dvi_row_loss(const T* l, int64_t vocab, const DviSample<T>& s,
                          const DviLossWeights& w, T* g) {
  std::vector<T> e(static_cast<size_t>(vocab));
  return dvi_row_loss(l, vocab, s, w, g, e.data());
}

// Mean loss over `batch` with logits = base_logits + s B A z under head h. When dA/dB are not
// null they receive (overwritten) the gradient of the mean total: dA [r, dim], dB [vocab, r].
template <class T>
DviLossValue dvi_batch_loss(const LoraView<T>& h, std::span<const DviSample<T>> batch,
                            const DviLossWeights& w, T* dA, T* dB) {
  const bool grad = dA && dB;
  if (grad) {
    std::fill(dA, dA + h.r * h.dim, T(0));
    std::fill(dB, dB + h.vocab * h.r, T(0));
  }
  DviLossValue sum;
  if (batch.empty()) return sum;
  const double inv_n = 1.0 / static_cast<double>(batch.size());
  std::vector<T> logits(h.vocab), g(grad ? h.vocab : 0), e(h.vocab), u(h.r);  // [vocab] x3, [r]
  std::vector<double> bg(h.r);                                                 // [r] scratch
  for (const DviSample<T>& s : batch) {
    std::copy(s.base_logits, s.base_logits + h.vocab, logits.begin());
    lora_project(h, s.z, u.data());
    lora_expand_add(h, u.data(), logits.data());
    const DviLossValue v =
        dvi_row_loss(logits.data(), h.vocab, s, w, grad ? g.data() : nullptr, e.data());
    sum.kl += v.kl * inv_n;
    sum.ce += v.ce * inv_n;
    sum.pg += v.pg * inv_n;
    sum.total += v.total * inv_n;
    if (!grad) continue;
    for (T& x : g) x = static_cast<T>(x * inv_n);
    lora_backward(h, s.z, u.data(), g.data(), dA, dB, bg.data());
  }
  return sum;
}

}  // namespace ssd
