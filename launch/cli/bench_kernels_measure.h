// The measurements behind `ssd bench-kernels`, each repeated and summarised as median / min /
// max so that a report shows how stable a figure is:
//   - the machine's read bandwidth (a streaming read of a buffer much larger than the caches);
//   - the thread pool's hand-off (an empty parallel_for);
//   - a model's forward at a realistic cached length: one token (decode), a causal block of n
//     tokens with logits for all of them (verification), and a long prompt (prefill);
//   - decode runs as a generation makes them (one token after another, the cache growing),
//     repeated back to back, with the run-to-run coefficient of variation and the context
//     switches each run cost (the sign of a thread pool that went to sleep between jobs).
// Timings use steady_clock around whole calls; nothing is extrapolated.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/model/model_file.h"
#include "runtime/model/transformer.h"

namespace ssd {

namespace kernels {
class ThreadPool;
}

struct Stat {
  double median = 0, min = 0, max = 0;
  int samples = 0;
};
Stat stat_of(std::vector<double> samples);

// Standard deviation / mean of the samples (population form); 0 for fewer than two samples.
double coefficient_of_variation(const std::vector<double>& samples);

// One decode run: tokens per second, and context switches per second of this process (voluntary
// and involuntary, all threads) while it ran.
struct DecodeRun {
  double tokens_per_s = 0;
  double context_switches_per_s = 0;
};

// GB/s (1e9 bytes / s) of summing `bytes` of memory split over the pool's threads; one sample
// per pass, `passes` passes after one warm-up pass.
Stat measure_read_bandwidth(kernels::ThreadPool& pool, int64_t bytes, int passes);

// Microseconds per parallel_for with an empty body over pool.size() items; `samples` samples
// of `calls` calls each.
Stat measure_handoff_us(kernels::ThreadPool& pool, int calls, int samples);

// One model on one backend with a KV cache, for timing forwards. Token ids are a fixed
// pseudo-random sequence (timing does not depend on them).
class ForwardTimer {
 public:
  // Cache room for a `context`-token prefix plus a block of `max_block`, or a `prefill` prompt.
  ForwardTimer(const ModelFile& file, std::unique_ptr<Backend> backend, int64_t context,
               int64_t max_block, int64_t prefill);

  // Seconds per forward of a causal block of n tokens appended after the `context` cached
  // tokens (logits for every row when all_logits); each sample averages `calls` forwards, and
  // the block is truncated away after each so every call sees the same cache.
  Stat block_seconds(int64_t n, bool all_logits, int calls, int samples);
  // Seconds per forward of a decode batch: one token for each of `seqs` sequences that share
  // the `context` cached tokens (forks of the cache, so no K/V is copied), logits for every row;
  // as block_seconds otherwise. The forks are released afterwards. own_caches: each sequence
  // beyond the first gets its own `context` cached tokens (other tokens, its own pages), as the
  // sequences of a real batch have (the attention then reads seqs prefixes, not one shared one);
  // needs cache room for seqs x (context + 16) tokens (max_block).
  Stat decode_batch_seconds(int64_t seqs, int calls, int samples, bool own_caches = false);
  // Seconds per forward of a fresh `prefill`-token prompt (logits for the last row).
  Stat prefill_seconds(int samples);
  // `tokens` single-token forwards after the `context` cached tokens, each appended to the cache
  // as a generation does (needs max_block >= tokens); the cache is truncated back afterwards.
  DecodeRun decode_run(int64_t tokens);

 private:
  std::vector<int32_t> tokens(int64_t start, int64_t n) const;

  const ModelFile& file_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<KvCache> kv_;
  SeqId seq_ = -1;
  int64_t context_ = 0, prefill_ = 0;
};

// Bytes of weights one decoded token reads: every layer matrix, the norms, one embedding row
// and the LM head, counted from the model file's tensors (their size in the file's format).
struct WeightBytes {
  uint64_t total = 0;
  uint64_t matrices = 0;  // the 7 matrices of every layer + LM head
  uint64_t other = 0;     // norms, biases, one embedding row
  std::string main_type;  // type of the layer matrices ("Q4_1"; "mixed: ..." if several)
};
WeightBytes weight_bytes_per_token(const ModelFile& file);

}  // namespace ssd
