#include "runtime/drafters/dvi_trainer.h"

#include <chrono>
#include <cmath>
#include <numeric>

#include "runtime/core/error.h"
#include "runtime/sampling/philox.h"

namespace ssd {
namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// One Adam (or SGD) step on params p with gradient g (already clipped).
void apply(std::vector<float>& p, const std::vector<float>& g, std::vector<float>& m,
           std::vector<float>& v, const DviOptions& o, int64_t t) {
  if (o.optimizer == DviOptimizer::Sgd) {
    for (size_t i = 0; i < p.size(); ++i) p[i] -= static_cast<float>(o.lr * g[i]);
    return;
  }
  const double c1 = 1.0 - std::pow(o.beta1, static_cast<double>(t));
  const double c2 = 1.0 - std::pow(o.beta2, static_cast<double>(t));
  for (size_t i = 0; i < p.size(); ++i) {
    m[i] = static_cast<float>(o.beta1 * m[i] + (1 - o.beta1) * g[i]);
    v[i] = static_cast<float>(o.beta2 * v[i] + (1 - o.beta2) * static_cast<double>(g[i]) * g[i]);
    p[i] -= static_cast<float>(o.lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + o.adam_eps));
  }
}

}  // namespace

DviTrainer::DviTrainer(LoraHead& head, const DviOptions& o) : head_(head), o_(o) {
  SSD_CHECK(o.capacity >= 1 && o.capacity <= 1 << 16, "DVI: buffer capacity {} must be in 1..65536",
            o.capacity);
  SSD_CHECK(o.train_every >= 1, "DVI: train_every {} must be >= 1", o.train_every);
  SSD_CHECK(o.batch >= 1 && o.batch <= o.capacity, "DVI: batch {} must be in 1..capacity ({})",
            o.batch, o.capacity);
  SSD_CHECK(o.kl_updates >= 0, "DVI: kl_updates {} must be >= 0", o.kl_updates);
  SSD_CHECK(o.target_top_k >= 0, "DVI: target_top_k {} must be >= 0 (0 = full vocabulary)",
            o.target_top_k);
  SSD_CHECK(o.lr > 0 && std::isfinite(o.lr), "DVI: learning rate {} must be > 0", o.lr);
  SSD_CHECK(o.baseline_rate > 0 && o.baseline_rate <= 1, "DVI: baseline_rate {} must be in (0, 1]",
            o.baseline_rate);
  SSD_CHECK(o.kl_weight >= 0 && o.rl_kl_weight >= 0 && o.ce_weight >= 0 && o.pg_weight >= 0,
            "DVI: loss weights must be >= 0 (kl {}, rl_kl {}, ce {}, pg {})", o.kl_weight,
            o.rl_kl_weight, o.ce_weight, o.pg_weight);
  SSD_CHECK(o.max_grad_norm >= 0, "DVI: max_grad_norm {} must be >= 0", o.max_grad_norm);
  gA_.assign(head.A().size(), 0.0f);
  gB_.assign(head.B().size(), 0.0f);
  mA_ = vA_ = gA_;
  mB_ = vB_ = gB_;
}

DviLossWeights DviTrainer::current_weights() const {
  DviLossWeights w;
  w.baseline = st_.baseline;
  if (!in_rl_phase()) {
    w.kl = o_.kl_weight;
  } else {
    w.kl = o_.rl_kl_weight;
    w.ce = o_.ce_weight;
    w.pg = o_.pg_weight;
  }
  return w;
}

void DviTrainer::target_dist(const float* logits, std::vector<int32_t>& ids,
                             std::vector<float>& probs) const {
  const int64_t vocab = head_.vocab();
  const int64_t k = o_.target_top_k == 0 ? vocab : std::min<int64_t>(o_.target_top_k, vocab);
  std::vector<int32_t> idx(static_cast<size_t>(vocab));
  std::iota(idx.begin(), idx.end(), 0);
  auto before = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (k < vocab) std::nth_element(idx.begin(), idx.begin() + k, idx.end(), before);
  idx.resize(static_cast<size_t>(k));
  std::sort(idx.begin(), idx.end(), before);
  // Softmax over the kept tokens equals the full softmax renormalised over them.
  const double m = logits[idx[0]];
  double z = 0;
  std::vector<double> e(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) z += e[i] = std::exp(static_cast<double>(logits[idx[i]]) - m);
  ids.assign(idx.begin(), idx.end());
  probs.resize(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) probs[i] = static_cast<float>(e[i] / z);
}

bool DviTrainer::add(DviTuple t) {
  SSD_ASSERT(static_cast<int64_t>(t.z.size()) == head_.dim() &&
             static_cast<int64_t>(t.base_logits.size()) == head_.vocab());
  st_.tuples++;
  if (t.reward > 0) st_.rewarded++;
  // Exact mean at first, then an exponential average: b follows drift in the acceptance rate.
  const double n = std::min<double>(static_cast<double>(st_.tuples), 1.0 / o_.baseline_rate);
  st_.baseline += (t.reward - st_.baseline) / n;
  buf_.push_back(std::move(t));
  while (static_cast<int64_t>(buf_.size()) > o_.capacity) buf_.pop_front();
  if (++since_step_ < o_.train_every) return false;
  since_step_ = 0;
  step();
  return true;
}

std::vector<size_t> DviTrainer::minibatch() const {
  const size_t size = buf_.size();
  const size_t n = std::min<size_t>(size, static_cast<size_t>(o_.batch));
  const size_t fresh = std::min<size_t>(n, static_cast<size_t>(o_.train_every));
  std::vector<size_t> pick;
  for (size_t i = size - fresh; i < size; ++i) pick.push_back(i);
  // Replay: a partial Fisher-Yates shuffle of the older indices [0, size - fresh).
  std::vector<size_t> rest(size - fresh);
  std::iota(rest.begin(), rest.end(), size_t{0});
  for (size_t j = 0; j < n - fresh; ++j) {
    const double u = philox_uniform(o_.seed, 0xB0F, static_cast<uint32_t>(st_.updates),
                                    static_cast<uint32_t>(j));
    const size_t k = j + static_cast<size_t>(u * static_cast<double>(rest.size() - j));
    std::swap(rest[j], rest[k]);
    pick.push_back(rest[j]);
  }
  return pick;
}

DviLossValue DviTrainer::step() {
  const double t0 = now_s();
  std::vector<DviSample<float>> batch;
  batch.reserve(static_cast<size_t>(o_.batch));
  for (size_t i : minibatch()) {
    const DviTuple& t = buf_[i];
    batch.push_back({t.z.data(), t.base_logits.data(), t.token, t.reward, t.p_ids.data(),
                     t.p_probs.data(), static_cast<int64_t>(t.p_ids.size())});
  }
  const DviLossWeights w = current_weights();
  const DviLossValue loss = dvi_batch_loss<float>(head_.view(), batch, w, gA_.data(), gB_.data());

  double norm2 = 0;
  for (float g : gA_) norm2 += static_cast<double>(g) * g;
  for (float g : gB_) norm2 += static_cast<double>(g) * g;
  const double norm = std::sqrt(norm2);
  st_.last_grad_norm = norm;
  if (o_.max_grad_norm > 0 && norm > o_.max_grad_norm) {
    const float c = static_cast<float>(o_.max_grad_norm / norm);
    for (float& g : gA_) g *= c;
    for (float& g : gB_) g *= c;
  }
  if (!in_rl_phase()) st_.kl_phase_updates++;
  st_.updates++;
  apply(head_.A(), gA_, mA_, vA_, o_, st_.updates);
  apply(head_.B(), gB_, mB_, vB_, o_, st_.updates);
  head_.mark_trained();
  st_.last_loss = loss;
  st_.train_s += now_s() - t0;
  return loss;
}

}  // namespace ssd
