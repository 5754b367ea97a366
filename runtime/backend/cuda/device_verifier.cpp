// DeviceVerifier (see device_verifier.h): owns the scratch of the rows it judges (grown to the
// largest rows x vocabulary seen) and runs on the stream it was given. Each call synchronises
// once to read its small result (plus once more, sampled, to check the rows' stats before the
// tree verifier reads them).
#include "runtime/backend/cuda/device_verifier.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/device_sampler_kernels.cuh"
#include "kernels/cuda/kernels.cuh"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/core/error.h"
#include "runtime/spec/residual.h"

namespace ssd {

using cuda::DeviceBuffer;

struct DeviceVerifier::State {
  int device = 0;
  cudaStream_t stream = nullptr;
  DeviceBuffer logits;           // [rows, vocab] staged host rows
  DeviceBuffer best;             // [rows] int32 argmaxes
  // Sampled trees: per-row process() outputs, then their CSR packing.
  DeviceBuffer e, keys, sorted, sort_tmp;  // one row's scratch ([vocab])
  DeviceBuffer scan;             // one row's block-scan scratch (process_scan_doubles(vocab))
  DeviceBuffer ids, probs;       // [rows, vocab] each row's kept list at its start
  DeviceBuffer stats;            // [rows] cuda::RowStats
  DeviceBuffer p_off;            // [rows + 1] int64
  DeviceBuffer p_ids, p_probs;   // [rows * vocab] packed
  DeviceBuffer mass;             // [2, vocab] double: the verifier's residual scratch
  DeviceBuffer index;            // [vocab] int32 token -> entry, -1 between launches
  int64_t index_vocab = 0;       // the vocabulary `index` was set to -1 for
  DeviceBuffer q_ids, q_probs, q_off;  // the draft's lists, CSR
  DeviceBuffer draft;            // [n] int32 the nodes' tokens
  DeviceBuffer first, next;      // [n + 1], [n] int32 the children lists (DraftChildren)
  DeviceBuffer seq_stream;       // [1] uint64 the request's Philox stream
  DeviceBuffer seq_pos;          // [1] uint32 output index of the first decided token
  DeviceBuffer out;              // int32: [rows] emitted, [max(n, 1)] path, count, flag
};

DeviceVerifier::DeviceVerifier(int device, void* stream) : s_(std::make_unique<State>()) {
  const int count = cuda_device_count();
  SSD_CHECK(device >= 0 && device < count,
            "device verifier: CUDA device {} does not exist ({} found)", device, count);
  s_->device = device;
  s_->stream = static_cast<cudaStream_t>(stream);
}

DeviceVerifier::~DeviceVerifier() = default;

const float* DeviceVerifier::device_rows(const float* logits, int64_t rows, int32_t vocab) {
  if (cuda::is_device_pointer(logits)) return logits;
  const size_t bytes = static_cast<size_t>(rows) * static_cast<size_t>(vocab) * sizeof(float);
  s_->logits.grow(bytes);
  SSD_CUDA_CHECK(cudaMemcpyAsync(s_->logits.get(), logits, bytes, cudaMemcpyHostToDevice,
                                 s_->stream));
  return s_->logits.get<float>();
}

std::vector<int32_t> DeviceVerifier::argmax_rows(const float* logits, int64_t rows,
                                                 int32_t vocab) {
  SSD_CUDA_CHECK(cudaSetDevice(s_->device));
  const float* dl = device_rows(logits, rows, vocab);
  s_->best.grow(static_cast<size_t>(rows) * sizeof(int32_t));
  cuda::launch_argmax_rows(dl, rows, vocab, s_->best.get<int32_t>(), s_->stream);
  std::vector<int32_t> best(static_cast<size_t>(rows));
  SSD_CUDA_CHECK(cudaMemcpyAsync(best.data(), s_->best.get(), best.size() * sizeof(int32_t),
                                 cudaMemcpyDeviceToHost, s_->stream));
  SSD_CUDA_CHECK(cudaStreamSynchronize(s_->stream));
  return best;
}

VerifyResult DeviceVerifier::greedy(const DraftTree& tree, const float* logits, int32_t vocab) {
  SSD_CHECK(vocab > 0, "verify: vocabulary size must be positive (got {})", vocab);
  const int64_t rows = static_cast<int64_t>(tree.size()) + 1;
  return verify_greedy_argmax(tree, argmax_rows(logits, rows, vocab), vocab);
}

namespace {

template <class T>
void upload(DeviceBuffer& buf, const std::vector<T>& v, cudaStream_t s) {
  const size_t bytes = std::max<size_t>(v.size(), 1) * sizeof(T);
  buf.grow(bytes);
  if (!v.empty())
    SSD_CUDA_CHECK(cudaMemcpyAsync(buf.get(), v.data(), v.size() * sizeof(T),
                                   cudaMemcpyHostToDevice, s));
}

}  // namespace

VerifyResult DeviceVerifier::sampled_tree(const DraftTree& tree, const float* logits,
                                          int32_t vocab, const SamplerConfig& cfg,
                                          const VerifyRng& rng) {
  validate(cfg);
  SSD_ASSERT(!is_greedy(cfg));
  SSD_CHECK(vocab > 0, "verify: vocabulary size must be positive (got {})", vocab);
  check_draft_structure(tree, vocab);
  const DraftChildren children(tree);
  for (int32_t node = -1; node < static_cast<int32_t>(tree.size()); ++node) {
    uint32_t count = 0;
    for (int32_t c = children.first(node); c >= 0; c = children.next[c]) ++count;
    SSD_CHECK(count <= kMaxVerifySiblings,
              "verify: draft node {} (-1 = the root) has more than {} children", node,
              kMaxVerifySiblings);
  }
  for (int32_t node = 0; node < static_cast<int32_t>(tree.size()); ++node)
    checked_draft_q(tree, node);
  SSD_CUDA_CHECK(cudaSetDevice(s_->device));
  State& s = *s_;
  const auto n = static_cast<int32_t>(tree.size());
  const int32_t rows = n + 1;
  const size_t uv = static_cast<size_t>(vocab), ur = static_cast<size_t>(rows);
  const float* dl = device_rows(logits, rows, vocab);

  // Every row processed into its own slot, as DeviceSampler processes one.
  s.e.grow(uv * sizeof(double));
  s.keys.grow(uv * sizeof(uint64_t));
  s.sorted.grow(uv * sizeof(uint64_t));
  const size_t sort_bytes = cuda::process_sort_scratch_bytes(vocab);
  s.sort_tmp.grow(sort_bytes);
  s.scan.grow(cuda::process_scan_doubles(vocab) * sizeof(double));
  s.ids.grow(ur * uv * sizeof(int32_t));
  s.probs.grow(ur * uv * sizeof(double));
  s.stats.grow(ur * sizeof(cuda::RowStats));
  cuda::ProcessScratch sc;
  sc.e = s.e.get<double>();
  sc.keys = s.keys.get<uint64_t>();
  sc.sorted = s.sorted.get<uint64_t>();
  sc.sort_tmp = s.sort_tmp.get();
  sc.sort_bytes = sort_bytes;
  sc.scan = s.scan.get<double>();
  for (int32_t r = 0; r < rows; ++r) {
    sc.stats = s.stats.get<cuda::RowStats>() + r;
    cuda::launch_process_row(dl + static_cast<size_t>(r) * uv, vocab,
                             static_cast<double>(cfg.temperature), cfg.top_k,
                             static_cast<double>(cfg.top_p), static_cast<double>(cfg.min_p), sc,
                             s.ids.get<int32_t>() + r * uv, s.probs.get<double>() + r * uv,
                             s.stream);
  }
  std::vector<cuda::RowStats> stats(ur);
  SSD_CUDA_CHECK(cudaMemcpyAsync(stats.data(), s.stats.get(), ur * sizeof(cuda::RowStats),
                                 cudaMemcpyDeviceToHost, s.stream));
  SSD_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  for (const cuda::RowStats& st : stats) {
    if (st.inf_at < 0 && st.n_valid > 0) continue;
    // A row the sampler refuses: the host decides whether the walk reaches it (and throws).
    std::vector<float> host(ur * uv);
    SSD_CUDA_CHECK(cudaMemcpyAsync(host.data(), dl, host.size() * sizeof(float),
                                   cudaMemcpyDeviceToHost, s.stream));
    SSD_CUDA_CHECK(cudaStreamSynchronize(s.stream));
    return verify_sampling(tree, host.data(), vocab, cfg, rng);
  }

  // Target rows as CSR on the device; the draft's rows and tokens uploaded.
  s.p_off.grow((ur + 1) * sizeof(int64_t));
  s.p_ids.grow(ur * uv * sizeof(int32_t));
  s.p_probs.grow(ur * uv * sizeof(double));
  cuda::launch_pack_rows(s.stats.get<cuda::RowStats>(), rows, vocab, s.ids.get<int32_t>(),
                         s.probs.get<double>(), s.p_off.get<int64_t>(), s.p_ids.get<int32_t>(),
                         s.p_probs.get<double>(), s.stream);
  std::vector<int32_t> q_ids;
  std::vector<double> q_probs;
  std::vector<int64_t> q_off{0};
  for (const ProcessedDist& q : tree.q) {
    for (const TokenProb& t : q.tokens) {
      q_ids.push_back(t.id);
      q_probs.push_back(t.prob);
    }
    q_off.push_back(static_cast<int64_t>(q_ids.size()));
  }
  upload(s.q_ids, q_ids, s.stream);
  upload(s.q_probs, q_probs, s.stream);
  upload(s.q_off, q_off, s.stream);
  upload(s.draft, tree.tokens, s.stream);
  upload(s.first, children.head, s.stream);
  upload(s.next, children.next, s.stream);
  upload(s.seq_stream, std::vector<uint64_t>{rng.stream}, s.stream);
  upload(s.seq_pos, std::vector<uint32_t>{rng.position}, s.stream);
  s.mass.grow(2 * uv * sizeof(double));
  if (s.index_vocab < vocab) {  // all -1 (bytes 0xff); each launch leaves it so
    s.index.grow(uv * sizeof(int32_t));
    SSD_CUDA_CHECK(cudaMemsetAsync(s.index.get(), 0xff, uv * sizeof(int32_t), s.stream));
    s.index_vocab = vocab;
  }
  s.out.grow((2 * ur + 2) * sizeof(int32_t));

  cuda::SampledTrees t;
  t.p_ids = s.p_ids.get<int32_t>();
  t.p_probs = s.p_probs.get<double>();
  t.p_off = s.p_off.get<int64_t>();
  t.q_ids = s.q_ids.get<int32_t>();
  t.q_probs = s.q_probs.get<double>();
  t.q_off = s.q_off.get<int64_t>();
  t.tokens = s.draft.get<int32_t>();
  t.first = s.first.get<int32_t>();
  t.next = s.next.get<int32_t>();
  t.streams = s.seq_stream.get<uint64_t>();
  t.positions = s.seq_pos.get<uint32_t>();
  t.seed = rng.seed;
  t.n = n;
  t.mass = s.mass.get<double>();
  t.mass_stride = vocab;
  t.index = s.index.get<int32_t>();
  t.vocab = static_cast<int32_t>(vocab);
  t.out = s.out.get<int32_t>();                 // [rows] emitted
  t.path = t.out + rows;                        // [n] accepted nodes
  t.n_emitted = t.out + rows + std::max(n, 1);  // then the count and the flag
  t.all_accepted = t.n_emitted + 1;
  cuda::launch_verify_sampled_trees(t, 1, s.stream);

  const size_t got_size = static_cast<size_t>(rows + std::max(n, 1) + 2);
  std::vector<int32_t> got(got_size);
  SSD_CUDA_CHECK(cudaMemcpyAsync(got.data(), s.out.get(), got.size() * sizeof(int32_t),
                                 cudaMemcpyDeviceToHost, s.stream));
  SSD_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  const int32_t emitted = got[rows + std::max(n, 1)];
  SSD_ASSERT(emitted >= 1 && emitted <= rows);
  VerifyResult out;
  out.emitted.assign(got.begin(), got.begin() + emitted);
  out.path.assign(got.begin() + rows, got.begin() + rows + emitted - 1);
  out.all_accepted = got[rows + std::max(n, 1) + 1] != 0;
  return out;
}

}  // namespace ssd
