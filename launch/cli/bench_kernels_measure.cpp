#include "launch/cli/bench_kernels_measure.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

#include "kernels/cpu/stream_read.h"
#include "kernels/cpu/thread_pool.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

Stat stat_of(std::vector<double> v) {
  Stat s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.samples = static_cast<int>(v.size());
  s.min = v.front();
  s.max = v.back();
  const size_t m = v.size() / 2;
  s.median = v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
  return s;
}

Stat measure_read_bandwidth(kernels::ThreadPool& pool, int64_t bytes, int passes) {
  SSD_CHECK(bytes >= (1 << 20), "bandwidth buffer of {} bytes is too small", bytes);
  const int64_t words = bytes / 8;
  std::vector<uint64_t> buf(static_cast<size_t>(words));
  // Touch every page (and give the words distinct values) from the pool's threads.
  pool.parallel_for(words, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) buf[static_cast<size_t>(i)] = static_cast<uint64_t>(i) * 3;
  });
  std::vector<uint64_t> sums(static_cast<size_t>(pool.size()));
  volatile uint64_t sink = 0;
  std::vector<double> gbps;
  for (int p = -1; p < passes; ++p) {
    const auto t0 = Clock::now();
    pool.parallel_for(words, [&](int64_t b, int64_t e, int tid) {
      sums[static_cast<size_t>(tid)] += kernels::stream_read(buf.data() + b, e - b);
    });
    const double s = seconds_since(t0);
    if (p >= 0) gbps.push_back(static_cast<double>(words * 8) / s / 1e9);
  }
  for (uint64_t v : sums) sink = sink + v;
  return stat_of(gbps);
}

Stat measure_handoff_us(kernels::ThreadPool& pool, int calls, int samples) {
  std::vector<double> us;
  const int64_t n = pool.size();
  for (int i = 0; i < 1000; ++i) pool.parallel_for(n, [](int64_t, int64_t, int) {});  // warm
  for (int s = 0; s < samples; ++s) {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) pool.parallel_for(n, [](int64_t, int64_t, int) {});
    us.push_back(seconds_since(t0) / calls * 1e6);
  }
  return stat_of(us);
}

ForwardTimer::ForwardTimer(const ModelFile& file, std::unique_ptr<Backend> backend,
                           int64_t context, int64_t max_block, int64_t prefill)
    : file_(file), backend_(std::move(backend)), context_(context), prefill_(prefill) {
  const int64_t ctx_limit = file.config().context_length;
  SSD_CHECK(context + max_block <= ctx_limit && prefill <= ctx_limit,
            "bench-kernels: --context {} + a block of {} (or --prefill {}) exceeds the model's "
            "context of {} positions",
            context, max_block, prefill, ctx_limit);
  model_ = std::make_unique<Transformer>(file_, *backend_);
  kv_ = std::make_unique<KvCache>(model_->kv_config(context + max_block + prefill + 32));
  seq_ = kv_->create();
  if (context > 0) model_->forward(Batch::sequence(seq_, tokens(0, context), 0), *kv_);
}

std::vector<int32_t> ForwardTimer::tokens(int64_t start, int64_t n) const {
  const int64_t vocab = file_.config().vocab;
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>(((start + i) * 7919 + 13) % vocab);
  return t;
}

Stat ForwardTimer::block_seconds(int64_t n, bool all_logits, int calls, int samples) {
  const Batch b =
      Batch::sequence(seq_, tokens(context_, n), static_cast<int32_t>(context_), all_logits);
  auto once = [&] {
    model_->forward(b, *kv_);
    kv_->truncate(seq_, context_);
  };
  once();  // warm-up: scratch buffers grown, caches filled
  std::vector<double> s;
  for (int k = 0; k < samples; ++k) {
    const auto t0 = Clock::now();
    for (int c = 0; c < calls; ++c) once();
    s.push_back(seconds_since(t0) / calls);
  }
  return stat_of(s);
}

Stat ForwardTimer::decode_batch_seconds(int64_t seqs, int calls, int samples,
                                        bool own_caches) {
  std::vector<SeqId> ids{seq_};
  for (int64_t i = 1; i < seqs; ++i) {
    if (!own_caches) {
      ids.push_back(kv_->fork(seq_));
      continue;
    }
    ids.push_back(kv_->create());
    if (context_ > 0)
      model_->forward(Batch::sequence(ids.back(), tokens(1000 * i, context_), 0), *kv_);
  }
  Batch b;
  const std::vector<int32_t> t = tokens(context_, seqs);
  for (int64_t i = 0; i < seqs; ++i) {
    b.tokens.push_back(t[static_cast<size_t>(i)]);
    b.positions.push_back(static_cast<int32_t>(context_));
    b.seqs.push_back(ids[static_cast<size_t>(i)]);
    b.logits_rows.push_back(static_cast<int32_t>(i));
  }
  auto once = [&] {
    model_->forward(b, *kv_);
    for (SeqId id : ids) kv_->truncate(id, context_);
  };
  once();  // warm-up
  std::vector<double> s;
  for (int k = 0; k < samples; ++k) {
    const auto t0 = Clock::now();
    for (int c = 0; c < calls; ++c) once();
    s.push_back(seconds_since(t0) / calls);
  }
  for (size_t i = 1; i < ids.size(); ++i) kv_->release(ids[i]);
  return stat_of(s);
}

double coefficient_of_variation(const std::vector<double>& samples) {
  if (samples.size() < 2) return 0;
  double mean = 0;
  for (double v : samples) mean += v;
  mean /= static_cast<double>(samples.size());
  double var = 0;
  for (double v : samples) var += (v - mean) * (v - mean);
  var /= static_cast<double>(samples.size());
  return mean > 0 ? std::sqrt(var) / mean : 0;
}

namespace {

int64_t context_switches() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_nvcsw) + static_cast<int64_t>(u.ru_nivcsw);
}

}  // namespace

DecodeRun ForwardTimer::decode_run(int64_t n) {
  const std::vector<int32_t> toks = tokens(context_, n);
  const int64_t switches0 = context_switches();
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < n; ++i)
    model_->forward(Batch::sequence(seq_, std::vector<int32_t>{toks[static_cast<size_t>(i)]},
                                    static_cast<int32_t>(context_ + i)),
                    *kv_);
  const double s = seconds_since(t0);
  const int64_t switches = context_switches() - switches0;
  kv_->truncate(seq_, context_);
  return DecodeRun{static_cast<double>(n) / s, static_cast<double>(switches) / s};
}

Stat ForwardTimer::prefill_seconds(int samples) {
  const std::vector<int32_t> prompt = tokens(1000, prefill_);
  std::vector<double> s;
  for (int k = -1; k < samples; ++k) {  // k = -1: warm-up
    const SeqId seq = kv_->create();
    const auto t0 = Clock::now();
    model_->forward(Batch::sequence(seq, prompt, 0), *kv_);
    const double t = seconds_since(t0);
    kv_->release(seq);
    if (k >= 0) s.push_back(t);
  }
  return stat_of(s);
}

WeightBytes weight_bytes_per_token(const ModelFile& file) {
  const ModelWeights& w = file.weights();
  WeightBytes out;
  std::map<std::string, uint64_t> by_type;
  auto matrix = [&](const TensorRef* t) {
    if (!t) return;
    out.matrices += t->nbytes;
    by_type[std::string(dtype_name(t->type))] += t->nbytes;
  };
  auto other = [&](const TensorRef* t) {
    if (t) out.other += t->nbytes;
  };
  for (const LayerWeights& l : w.layers) {
    for (const TensorRef* t : {l.wq, l.wk, l.wv, l.wo, l.w_gate, l.w_up, l.w_down}) matrix(t);
    for (const TensorRef* t : {l.attn_norm, l.ffn_norm, l.bq, l.bk, l.bv, l.q_norm, l.k_norm})
      other(t);
  }
  out.matrices += w.output->nbytes;  // the LM head (the embedding table itself when tied)
  other(w.output_norm);
  out.other += w.token_embd->row_bytes();  // one embedding row
  out.total = out.matrices + out.other;
  if (by_type.size() == 1) {
    out.main_type = by_type.begin()->first;
  } else {
    out.main_type = "mixed:";
    for (const auto& [t, b] : by_type) out.main_type += " " + t;
  }
  return out;
}

}  // namespace ssd
