// Sampled-mode verification of a batch of draft chains on the device: one thread per chain runs
// kernels/common/verify_math.h's verify_chain_sampled, the function the CPU twin test runs
// against ssd::verify_with_dists (tests/unit/device_math/verify_chain_twin_test.cpp), so the
// device emits the CPU verifier's tokens from the same Philox uniforms. A chain's lists are a
// few tens of entries, so one thread per chain is not the bottleneck next to the forward that
// produced them. Not yet run on a GPU.
#include "kernels/common/verify_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"

namespace ssd::cuda {
namespace {

constexpr int kThreads = 64;

__global__ void verify_sampled_chains_kernel(SampledChains c, int64_t batch) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= batch) return;
  kernels::hd::ChainLists l;
  l.p_ids = c.p_ids;
  l.p_probs = c.p_probs;
  l.p_off = c.p_off + b * (c.k + 1);
  l.q_ids = c.q_ids;
  l.q_probs = c.q_probs;
  l.q_off = c.q_off + b * c.k;
  l.draft = c.draft + b * c.k;
  l.k = c.k;
  bool all = false;
  c.n_emitted[b] = kernels::hd::verify_chain_sampled(l, c.seed, c.streams[b], c.positions[b],
                                                     c.mass + b * c.mass_stride,
                                                     c.out + b * (c.k + 1), &all);
  c.all_accepted[b] = all ? 1 : 0;
}

}  // namespace

void launch_verify_sampled_chains(const SampledChains& c, int64_t batch, cudaStream_t s) {
  if (batch == 0) return;
  const auto blocks = static_cast<unsigned>((batch + kThreads - 1) / kThreads);
  verify_sampled_chains_kernel<<<blocks, kThreads, 0, s>>>(c, batch);
  SSD_CUDA_LAUNCHED();
}

}  // namespace ssd::cuda
