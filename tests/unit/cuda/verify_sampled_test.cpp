// The device sampled-mode tree verifier (launch_verify_sampled_trees) against
// ssd::verify_with_dists on a batch of random trees with siblings: the same emitted tokens and
// path, exactly. Its arithmetic is twin-tested on the CPU (tests/unit/device_math/
// verify_tree_twin_test.cpp); this case needs a GPU and skips with a visible message without one
// (it has not run yet).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kernels/cuda/kernels.cuh"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/sampling/sampler.h"
#include "runtime/spec/draft_tree.h"
#include "runtime/spec/verify.h"
#include "tests/support/sampled_trees.h"
#include "tests/unit/cuda/skip_without_gpu.h"

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

// A batch of trees of one shape (three roots, siblings, a chain below), through the kernel and
// through verify_with_dists: the same tokens and path, exactly.
TEST(CudaVerifySampled, TreesEmitTheCpuVerifiersTokensAndPath) {
  SSD_SKIP_WITHOUT_GPU("sampled tree verification on the device");
  std::mt19937 rng(21);
  const int32_t vocab = 60;
  const int64_t batch = 37;
  const uint64_t seed = 8;
  const SamplerConfig cfg{.temperature = 1.0f, .top_k = 12};
  const std::vector<int32_t> shape = {-1, -1, -1, 0, 0, 3, 5, 1};
  std::vector<test::TreeCase> cases;
  std::vector<uint64_t> streams;
  std::vector<uint32_t> positions;
  for (int64_t b = 0; b < batch; ++b) {
    streams.push_back(500 + b);
    positions.push_back(static_cast<uint32_t>(7 * b));
    cases.push_back(test::random_tree_case(shape, vocab, cfg, test::TreeDraft::Independent, rng,
                                           VerifyRng{seed, streams[b], positions[b]}));
  }
  const test::PackedTrees pk = test::pack_trees(cases);
  const int32_t n = pk.n;
  Dev dp_ids(pk.p_ids), dq_ids(pk.q_ids), dtokens(pk.tokens), dfirst(pk.first), dnext(pk.next);
  Dev dp_probs(pk.p_probs), dq_probs(pk.q_probs);
  Dev dp_off(pk.p_off), dq_off(pk.q_off);
  Dev dstreams(streams);
  Dev dpos(positions);
  Dev dmass(std::vector<double>(static_cast<size_t>(batch) * 2 * vocab));
  Dev dindex(std::vector<int32_t>(static_cast<size_t>(batch) * vocab, -1));
  Dev dout(std::vector<int32_t>(static_cast<size_t>(batch) * (n + 1), -1));
  Dev dpath(std::vector<int32_t>(static_cast<size_t>(batch) * n, -1));
  const std::vector<int32_t> zeros(static_cast<size_t>(batch), 0);
  Dev dn(zeros), dall(zeros);
  cuda::SampledTrees t;
  t.p_ids = dp_ids.p;
  t.p_probs = dp_probs.p;
  t.p_off = dp_off.p;
  t.q_ids = dq_ids.p;
  t.q_probs = dq_probs.p;
  t.q_off = dq_off.p;
  t.tokens = dtokens.p;
  t.first = dfirst.p;
  t.next = dnext.p;
  t.streams = dstreams.p;
  t.positions = dpos.p;
  t.seed = seed;
  t.n = n;
  t.mass = dmass.p;
  t.mass_stride = vocab;
  t.index = dindex.p;
  t.vocab = vocab;
  t.out = dout.p;
  t.path = dpath.p;
  t.n_emitted = dn.p;
  t.all_accepted = dall.p;
  cuda::launch_verify_sampled_trees(t, batch, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto out = dout.get(static_cast<size_t>(batch) * (n + 1));
  const auto path = dpath.get(static_cast<size_t>(batch) * n);
  // Every tree left its token -> entry index as it found it: all -1.
  for (int32_t v : dindex.get(static_cast<size_t>(batch) * vocab)) ASSERT_EQ(v, -1);
  const auto count = dn.get(batch), all = dall.get(batch);
  for (int64_t b = 0; b < batch; ++b) {
    const VerifyResult want = verify_with_dists(cases[b].tree, cases[b].p, cases[b].rng);
    const std::vector<int32_t> got(out.begin() + b * (n + 1),
                                   out.begin() + b * (n + 1) + count[b]);
    const std::vector<int32_t> got_path(path.begin() + b * n, path.begin() + b * n + count[b] - 1);
    EXPECT_EQ(got, want.emitted) << "tree " << b;
    EXPECT_EQ(got_path, want.path) << "tree " << b;
    EXPECT_EQ(all[b], want.all_accepted ? 1 : 0) << "tree " << b;
  }
}

}  // namespace
}  // namespace ssd
