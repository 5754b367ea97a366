#include "runtime/model/transformer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "kernels/cpu/rowops.h"
#include "runtime/core/error.h"

namespace ssd {

Batch Batch::sequence(SeqId seq, const std::vector<int32_t>& tokens, int32_t start,
                      bool all_logits) {
  Batch b;
  b.tokens = tokens;
  const int32_t n = static_cast<int32_t>(tokens.size());
  for (int32_t i = 0; i < n; ++i) {
    b.positions.push_back(start + i);
    b.seqs.push_back(seq);
    if (all_logits) b.logits_rows.push_back(i);
  }
  if (!all_logits && n > 0) b.logits_rows.push_back(n - 1);
  return b;
}

void ForwardResult::download_logits() {
  if (!backend_logits) return;
  logits.resize(static_cast<size_t>(rows * vocab));
  backend->download(logits.data(), backend_logits, logits.size() * sizeof(float));
  backend_logits = nullptr;
}

Transformer::Transformer(const ModelFile& model, Backend& backend, int64_t layers)
    : Transformer(model, backend, layers, nullptr) {}

Transformer::Transformer(const ModelFile& model, Backend& backend, const TpContext& tp,
                         int64_t layers)
    : Transformer(model, backend, layers, &tp) {}

Transformer::Transformer(const ModelFile& model, Backend& backend, int64_t layers,
                         const TpContext* tp)
    : file_(model), cfg_(model.config()), backend_(backend) {
  SSD_CHECK(layers >= 0 && layers <= cfg_.n_layers,
            "{}: cannot run {} layers of a {}-layer model", model.path(), layers, cfg_.n_layers);
  const int64_t n_run = layers > 0 ? layers : cfg_.n_layers;
  const ModelWeights& w = model.weights();
  token_embd_ = backend_.prepare_weight(*w.token_embd);
  output_norm_ = decode_vector(w.output_norm);
  std::vector<float> factors = decode_vector(w.rope_freqs);
  inv_freq_ = rope_inv_freq(cfg_, w.rope_freqs ? &factors : nullptr);
  shape_ = DecoderShape{cfg_.dim, cfg_.n_heads, cfg_.n_kv_heads, cfg_.head_dim, cfg_.rope_dim,
                        cfg_.ffn_dim, cfg_.rms_eps, cfg_.rope_layout, inv_freq_.data()};
  if (!tp) {
    output_ = backend_.prepare_weight(*w.output);
    for (int64_t li = 0; li < n_run; ++li)
      layers_.push_back(prepare_decoder_layer(backend_, w.layers[li]));
    return;
  }
  tp_ = *tp;
  const TpLayout layout = check_tp_group(*tp_, cfg_, n_run);  // collective; all ranks throw
  vocab_offsets_ = layout.vocab;
  block_tp_.comm = tp_->comm;
  block_tp_.mode = tp_->mode;
  for (int64_t h : layout.heads) block_tp_.attn_cols.push_back(h * cfg_.head_dim);
  block_tp_.ffn_cols = layout.ffn;
  block_tp_.out_rows = layout.dim;
  const TpShard& sh = tp_->shard;
  output_ = backend_.prepare_weight(slice_rows(*w.output, sh.vocab_begin, sh.vocab_end));
  shape_.n_heads = static_cast<int64_t>(sh.q_heads.size());
  shape_.n_kv_heads = static_cast<int64_t>(sh.kv_heads.size());
  shape_.ffn_dim = sh.ffn_end - sh.ffn_begin;
  shape_.kv_head_of = sh.kv_head_of.data();
  for (int64_t li = 0; li < n_run; ++li)
    layers_.push_back(prepare_decoder_layer_shard(backend_, w.layers[li], cfg_.head_dim, sh,
                                                  tp_->mode, tp_buffers_));
}

KvCacheConfig Transformer::kv_config(int64_t max_tokens) const {
  KvCacheConfig c;
  c.n_layers = layers();
  c.n_kv_heads = shape_.n_kv_heads;
  c.head_dim = cfg_.head_dim;
  c.max_tokens = max_tokens;
  return c;
}

ForwardResult Transformer::forward(const Batch& b, KvCache& kv) {
  const int64_t n = static_cast<int64_t>(b.size());
  SSD_CHECK(n > 0, "forward: empty batch");
  SSD_CHECK(b.positions.size() == b.tokens.size() && b.seqs.size() == b.tokens.size(),
            "forward: batch has {} tokens but {} positions and {} sequence ids", n,
            b.positions.size(), b.seqs.size());
  SSD_CHECK(b.mask.empty() || static_cast<int64_t>(b.mask.size()) == n * n,
            "forward: mask has {} entries, expected {} x {}", b.mask.size(), n, n);
  for (int64_t i = 0; i < n; ++i) {
    SSD_CHECK(b.tokens[i] >= 0 && b.tokens[i] < cfg_.vocab,
              "forward: token id {} at batch row {} is outside the vocabulary (0..{})", b.tokens[i],
              i, cfg_.vocab - 1);
    SSD_CHECK(b.positions[i] >= 0 && b.positions[i] < cfg_.context_length,
              "forward: position {} exceeds the model's context length {}", b.positions[i],
              cfg_.context_length);
    SSD_CHECK(kv.alive(b.seqs[i]), "forward: KV sequence {} does not exist", b.seqs[i]);
  }
  for (int32_t r : b.logits_rows)
    SSD_CHECK(r >= 0 && r < n, "forward: logits row {} is outside the batch of {}", r, n);
  for (int32_t l : b.hidden_layers)
    SSD_CHECK(l >= 0 && l < layers(), "forward: hidden layer {} does not exist (0..{})", l,
              layers() - 1);
  if (!b.mask.empty()) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        SSD_CHECK(!b.mask[i * n + j] || b.seqs[i] == b.seqs[j],
                  "forward: mask lets row {} (sequence {}) see row {} of another sequence {}", i,
                  b.seqs[i], j, b.seqs[j]);
  }

  // Cache slots: each sequence's new tokens follow its cached prefix, in batch order.
  std::map<SeqId, int64_t> base, count;
  for (int64_t i = 0; i < n; ++i) {
    if (!base.count(b.seqs[i])) base[b.seqs[i]] = kv.length(b.seqs[i]);
    count[b.seqs[i]]++;
  }
  // prefix[i]: the positions of its sequence cached before this call, all visible to token i.
  std::vector<int64_t> cache_pos(n), prefix(n);
  {
    std::map<SeqId, int64_t> seen;
    for (int64_t i = 0; i < n; ++i) {
      prefix[i] = base[b.seqs[i]];
      cache_pos[i] = prefix[i] + seen[b.seqs[i]]++;
    }
  }
  ForwardResult out;
  try {
    for (const auto& [seq, c] : count) kv.grow(seq, c);
    run(b, kv, cache_pos, prefix, out);
  } catch (...) {
    for (const auto& [seq, len] : base)
      if (kv.alive(seq) && kv.length(seq) > len) kv.truncate(seq, len);
    throw;
  }
  return out;
}

void Transformer::run(const Batch& b, KvCache& kv, const std::vector<int64_t>& cache_pos,
                      const std::vector<int64_t>& prefix, ForwardResult& out) {
  const int64_t n = static_cast<int64_t>(b.size());
  const int64_t dim = cfg_.dim;

  // Which of the batch's own tokens each query sees, as cache positions.
  std::vector<int64_t> visible, offsets(n + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j)
      if (b.seqs[j] == b.seqs[i] && (b.mask.empty() ? j <= i : b.mask[i * n + j] != 0))
        visible.push_back(cache_pos[j]);
    offsets[i + 1] = static_cast<int64_t>(visible.size());
  }

  const size_t f = sizeof(float);
  const int64_t rows = static_cast<int64_t>(b.logits_rows.size());
  const int64_t local_vocab =
      tp_ ? vocab_offsets_[tp_->comm->rank() + 1] - vocab_offsets_[tp_->comm->rank()] : cfg_.vocab;
  const int64_t nh = static_cast<int64_t>(b.hidden_layers.size());
  reserve_floats(backend_, x_, n * dim);
  reserve_floats(backend_, logits_, rows * local_vocab);
  if (nh > 0) reserve_floats(backend_, hidden_, nh * n * dim);
  if (tp_) {
    reserve_floats(backend_, tp_logits_, rows * cfg_.vocab);
    reserve_floats(backend_, tp_head_xchg_, rows * cfg_.vocab);
  }
  scratch_.reserve(backend_, n, shape_, tp_ ? &block_tp_ : nullptr);
  out.vocab = cfg_.vocab;
  out.dim = dim;
  out.hidden.assign(b.hidden_layers.size(), {});
  const BatchView view{n, b.positions.data(), b.seqs.data(), cache_pos.data(),
                       prefix.data(), visible.data(), offsets.data()};

  // Everything up to the logits download is device work that depends only on the shape (and
  // which hidden layers are kept): the backend may replay it (CUDA graphs). Under TP the
  // exchanges are part of it when the backend moves them itself (NCCL on its stream; the group
  // then agrees on replaying, ReplayKey::group); otherwise a TP forward runs op by op.
  // Hidden layers are copied into hidden_ on the backend and downloaded after the region, so
  // reading them needs no sync in the middle of the forward.
  std::optional<ReplayableRegion> region;
  if (rows > 0 && (!tp_ || backend_.exchanges_replayable(*tp_->comm)))
    region.emplace(backend_, ReplayKey{this, &kv, n, b.logits_rows, b.hidden_layers, {},
                                       tp_ ? tp_->comm : nullptr});
  auto download_hidden = [&] {
    for (int64_t hl = 0; hl < nh; ++hl) {
      out.hidden[hl].resize(n * dim);
      backend_.download(out.hidden[hl].data(), hidden_.data() + hl * n * dim, n * dim * f);
    }
  };
  backend_.embed(token_embd_, b.tokens.data(), n, x_.data());
  for (int64_t l = 0; l < layers(); ++l) {
    run_decoder_layer(backend_, layers_[l], shape_, l, kv, view, x_.data(), scratch_,
                      tp_ ? &block_tp_ : nullptr);
    for (int64_t hl = 0; hl < nh; ++hl)
      if (b.hidden_layers[hl] == l)
        backend_.copy(hidden_.data() + hl * n * dim, x_.data(), n * dim * f);
  }

  // --- LM head over the requested rows only ---
  if (rows == 0) {
    download_hidden();
    return;
  }
  float* head_in = scratch_.h.data();  // [rows, dim] (rows <= n)
  for (int64_t r = 0; r < rows; ++r)
    backend_.copy(head_in + r * dim, x_.data() + b.logits_rows[r] * dim, dim * f);
  backend_.rmsnorm(head_in, output_norm_.data(), head_in, rows, dim, cfg_.rms_eps);
  out.rows = rows;
  backend_.matmul(output_, head_in, logits_.data(), rows);  // [rows, this rank's vocab rows]
  float* logits = logits_.data();                            // [rows, vocab]
  if (tp_) {  // vocab-parallel head: every rank gathers the whole rows
    backend_.gather_columns(*tp_->comm, logits_.data(), rows, vocab_offsets_, tp_logits_.data(),
                            tp_head_xchg_.data());
    logits = tp_logits_.data();
  }
  if (region) region->end();
  download_hidden();
  if (b.logits_in_backend) {  // the caller's TokenPicker reads them where they are
    if (tp_) backend_.wait_exchanges();  // no picker's wait may hang on a dead peer
    out.backend_logits = logits;
    out.backend = &backend_;
    return;
  }
  out.logits.resize(rows * cfg_.vocab);
  backend_.download(out.logits.data(), logits, rows * cfg_.vocab * f);
}

}  // namespace ssd
