// Verification of a draft against target logits rows on a CUDA device, with the host
// verifier's result (runtime/spec/verify.h) for the same rows:
//   greedy   one launch takes the argmax of every row of the tree (launch_argmax_rows); the ids
//            come back ([1 + nodes] int32) and verify_greedy_argmax walks the tree with them;
//   sampled  for a tree (chains included): every row is processed on the device
//            (DeviceSampler's kernels: top-k / top-p / min-p / temperature, the CPU's lists bit
//            for bit), packed as CSR lists (pack_rows.cu) and judged by the tree verifier
//            (verify_sampled.cu: kernels/common/verify_math.h, twin-tested against
//            verify_with_dists: siblings tried in order, each on its own accept lane, the
//            residual shrinking with each rejection); only the emitted tokens, the accepted path
//            and their count come back. The draft's q lists and children lists go up as they are
//            (a few tens of entries per node).
// A row the CPU sampler would refuse (+inf, or nothing finite) makes sampled_tree fall back to
// the host verifier on downloaded rows, so that the error (or its absence, when the walk never
// reaches that row) is the host's. Every node's q and sibling count is checked up front with the
// host verifier's messages, also where the host walk would not reach.
//
// Works in order with a given stream (the CUDA backend's), so it reads logits a forward left
// there after the forward wrote them. Free of CUDA headers. Not yet run on a GPU
// (tests/unit/cuda/device_token_picker_test.cpp compares it with the host where one exists).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/sampling/sampler.h"
#include "runtime/spec/draft_tree.h"
#include "runtime/spec/verify.h"

namespace ssd {

class DeviceVerifier {
 public:
  // On `device`, in order with `stream` (a cudaStream_t the caller keeps alive).
  DeviceVerifier(int device, void* stream);
  ~DeviceVerifier();
  DeviceVerifier(const DeviceVerifier&) = delete;
  DeviceVerifier& operator=(const DeviceVerifier&) = delete;

  // verify_greedy(tree, logits, vocab). logits: [tree.size() + 1, vocab], device or host.
  VerifyResult greedy(const DraftTree& tree, const float* logits, int32_t vocab);
  // The argmax of each of `rows` rows (first maximum; -1 for a row of NaN only), in one launch.
  // logits: [rows, vocab], device or host.
  std::vector<int32_t> argmax_rows(const float* logits, int64_t rows, int32_t vocab);
  // verify_sampling(tree, logits, vocab, cfg, rng) for a sampling cfg. logits:
  // [tree.size() + 1, vocab], device or host. Every node's q is checked (sum 1, its token
  // with q > 0) with the host verifier's messages, also those the host walk would not reach.
  VerifyResult sampled_tree(const DraftTree& tree, const float* logits, int32_t vocab,
                            const SamplerConfig& cfg, const VerifyRng& rng);

 private:
  struct State;
  // logits as a device pointer ([rows, vocab]), staged into scratch when on the host.
  const float* device_rows(const float* logits, int64_t rows, int32_t vocab);
  std::unique_ptr<State> s_;
};

}  // namespace ssd
