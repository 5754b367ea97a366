// The device sampled-mode chain verifier (launch_verify_sampled_chains) against
// ssd::verify_with_dists on a batch of random chains: the same emitted tokens, exactly. Its
// arithmetic is twin-tested on the CPU (tests/unit/device_math/verify_chain_twin_test.cpp); this
// case needs a GPU and skips with a visible message without one (it has not run yet).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "tests/unit/cuda/skip_without_gpu.h"
#include "kernels/cuda/kernels.cuh"
#include "runtime/sampling/philox.h"
#include "runtime/sampling/sampler.h"
#include "runtime/spec/draft_tree.h"
#include "runtime/spec/verify.h"

namespace ssd {
namespace {

// Device copy of a host vector, freed at scope exit.
template <class T>
struct Dev {
  explicit Dev(const std::vector<T>& h) {
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(1, h.size()) * sizeof(T)), cudaSuccess);
    if (!h.empty()) {
      EXPECT_EQ(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice),
                cudaSuccess);
    }
  }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  std::vector<T> get(size_t n) const {
    std::vector<T> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  T* p = nullptr;
};

TEST(CudaVerifySampled, ChainsEmitTheCpuVerifiersTokens) {
  SSD_SKIP_WITHOUT_GPU("sampled chain verification on the device");
  std::mt19937 rng(21);
  std::normal_distribution<float> g(0.0f, 1.5f);
  const int32_t vocab = 60, k = 4, batch = 37;
  const uint64_t seed = 8;
  const SamplerConfig cfg{.temperature = 1.0f, .top_k = 12};
  std::vector<int32_t> p_ids, q_ids, draft;
  std::vector<double> p_probs, q_probs;
  std::vector<int64_t> p_off = {0}, q_off = {0};
  std::vector<uint64_t> streams;
  std::vector<uint32_t> positions;
  std::vector<std::vector<int32_t>> want;
  std::vector<int32_t> want_all;
  auto dist = [&] {
    std::vector<float> l(vocab);
    for (float& x : l) x = g(rng);
    return process(l.data(), vocab, cfg);
  };
  for (int32_t b = 0; b < batch; ++b) {
    std::vector<ProcessedDist> p, q;
    std::vector<int32_t> toks;
    for (int32_t i = 0; i <= k; ++i) p.push_back(dist());
    for (int32_t i = 0; i < k; ++i) {
      q.push_back(dist());
      toks.push_back(sample(q.back(), philox_uniform(99, b, i, kLaneDrafter)));
    }
    streams.push_back(500 + b);
    positions.push_back(static_cast<uint32_t>(7 * b));
    const VerifyResult r =
        verify_with_dists(DraftTree::chain(toks, q), p, VerifyRng{seed, streams[b], positions[b]});
    want.push_back(r.emitted);
    want_all.push_back(r.all_accepted ? 1 : 0);
    for (const ProcessedDist& d : p) {
      for (const TokenProb& t : d.tokens) p_ids.push_back(t.id), p_probs.push_back(t.prob);
      p_off.push_back(static_cast<int64_t>(p_ids.size()));
    }
    for (const ProcessedDist& d : q) {
      for (const TokenProb& t : d.tokens) q_ids.push_back(t.id), q_probs.push_back(t.prob);
      q_off.push_back(static_cast<int64_t>(q_ids.size()));
    }
    draft.insert(draft.end(), toks.begin(), toks.end());
  }
  Dev dp_ids(p_ids), dq_ids(q_ids), ddraft(draft);
  Dev dp_probs(p_probs), dq_probs(q_probs);
  Dev dp_off(p_off), dq_off(q_off);
  Dev dstreams(streams);
  Dev dpos(positions);
  Dev dmass(std::vector<double>(static_cast<size_t>(batch) * vocab));
  Dev dout(std::vector<int32_t>(static_cast<size_t>(batch) * (k + 1), -1));
  const std::vector<int32_t> zeros(static_cast<size_t>(batch), 0);
  Dev dn(zeros), dall(zeros);
  cuda::SampledChains c;
  c.p_ids = dp_ids.p;
  c.p_probs = dp_probs.p;
  c.p_off = dp_off.p;
  c.q_ids = dq_ids.p;
  c.q_probs = dq_probs.p;
  c.q_off = dq_off.p;
  c.draft = ddraft.p;
  c.streams = dstreams.p;
  c.positions = dpos.p;
  c.seed = seed;
  c.k = k;
  c.mass = dmass.p;
  c.mass_stride = vocab;
  c.out = dout.p;
  c.n_emitted = dn.p;
  c.all_accepted = dall.p;
  cuda::launch_verify_sampled_chains(c, batch, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto out = dout.get(static_cast<size_t>(batch) * (k + 1));
  const auto n = dn.get(batch), all = dall.get(batch);
  for (int32_t b = 0; b < batch; ++b) {
    const std::vector<int32_t> got(out.begin() + b * (k + 1), out.begin() + b * (k + 1) + n[b]);
    EXPECT_EQ(got, want[b]) << "chain " << b;
    EXPECT_EQ(all[b], want_all[b]) << "chain " << b;
  }
}

}  // namespace
}  // namespace ssd
