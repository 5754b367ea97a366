// Sampled-mode verification of a batch of draft trees on the device (chains included: a chain is
// the tree of one child per node): one thread per tree runs kernels/common/verify_math.h's
// verify_tree_sampled, the function the CPU twin test runs against ssd::verify_with_dists
// (tests/unit/device_math/verify_tree_twin_test.cpp), so the device emits the CPU verifier's
// tokens and path from the same Philox uniforms. p's lookups go through a token -> entry index
// (one int32 per vocabulary id per tree, -1 between uses), so a rejection costs O(|p| + |q|)
// even when the lists hold the whole vocabulary (temperature-only sampling); each rejection
// still walks p's row on the tree's one thread (copy, sums), ~10^5 steps for a 49k vocabulary.
// Not yet run on a GPU.
#include "kernels/common/verify_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"

namespace ssd::cuda {
namespace {

constexpr int kThreads = 64;

__global__ void verify_sampled_trees_kernel(SampledTrees t, int64_t batch) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= batch) return;
  kernels::hd::TreeLists l;
  l.p_ids = t.p_ids;
  l.p_probs = t.p_probs;
  l.p_off = t.p_off + b * (t.n + 1);
  l.q_ids = t.q_ids;
  l.q_probs = t.q_probs;
  l.q_off = t.q_off + b * t.n;
  l.tokens = t.tokens + b * t.n;
  l.first = t.first + b * (t.n + 1);
  l.next = t.next + b * t.n;
  l.n = t.n;
  double* mass = t.mass + b * 2 * t.mass_stride;
  bool all = false;
  const kernels::hd::TokenIndex index{t.index + b * static_cast<int64_t>(t.vocab), t.vocab};
  t.n_emitted[b] = kernels::hd::verify_tree_sampled(l, t.seed, t.streams[b], t.positions[b], mass,
                                                    mass + t.mass_stride, t.out + b * (t.n + 1),
                                                    t.path + b * t.n, &all, index);
  t.all_accepted[b] = all ? 1 : 0;
}

}  // namespace

void launch_verify_sampled_trees(const SampledTrees& t, int64_t batch, cudaStream_t s) {
  if (batch == 0) return;
  const auto blocks = static_cast<unsigned>((batch + kThreads - 1) / kThreads);
  verify_sampled_trees_kernel<<<blocks, kThreads, 0, s>>>(t, batch);
  SSD_CUDA_LAUNCHED();
}

}  // namespace ssd::cuda
