#include "runtime/model/transformer.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "kernels/cpu/rowops.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

// Small 1-D parameters (norm gains, biases) are decoded to float once; they are a few KB.
std::vector<float> to_floats(const TensorRef* t) {
  if (!t) return {};
  std::vector<float> out(t->elements());
  kernels::dequantize_row(t->type, t->data, out.data(), static_cast<int64_t>(out.size()));
  return out;
}

}  // namespace

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

Transformer::Transformer(const ModelFile& model, Backend& backend, int64_t layers)
    : cfg_(model.config()), backend_(backend) {
  SSD_CHECK(layers >= 0 && layers <= cfg_.n_layers,
            "{}: cannot run {} layers of a {}-layer model", model.path(), layers, cfg_.n_layers);
  const int64_t n_run = layers > 0 ? layers : cfg_.n_layers;
  const ModelWeights& w = model.weights();
  token_embd_ = backend_.prepare_weight(*w.token_embd);
  output_ = backend_.prepare_weight(*w.output);
  output_norm_ = to_floats(w.output_norm);
  std::vector<float> factors = to_floats(w.rope_freqs);
  inv_freq_ = rope_inv_freq(cfg_, w.rope_freqs ? &factors : nullptr);
  for (int64_t li = 0; li < n_run; ++li) {
    const LayerWeights& L = w.layers[li];
    Layer l;
    l.wq = backend_.prepare_weight(*L.wq);
    l.wk = backend_.prepare_weight(*L.wk);
    l.wv = backend_.prepare_weight(*L.wv);
    l.wo = backend_.prepare_weight(*L.wo);
    l.w_gate = backend_.prepare_weight(*L.w_gate);
    l.w_up = backend_.prepare_weight(*L.w_up);
    l.w_down = backend_.prepare_weight(*L.w_down);
    l.attn_norm = to_floats(L.attn_norm);
    l.ffn_norm = to_floats(L.ffn_norm);
    l.bq = to_floats(L.bq);
    l.bk = to_floats(L.bk);
    l.bv = to_floats(L.bv);
    l.q_norm = to_floats(L.q_norm);
    l.k_norm = to_floats(L.k_norm);
    layers_.push_back(std::move(l));
  }
}

KvCacheConfig Transformer::kv_config(int64_t max_tokens) const {
  KvCacheConfig c;
  c.n_layers = layers();
  c.n_kv_heads = cfg_.n_kv_heads;
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
  std::vector<int64_t> cache_pos(n);
  {
    std::map<SeqId, int64_t> seen;
    for (int64_t i = 0; i < n; ++i) cache_pos[i] = base[b.seqs[i]] + seen[b.seqs[i]]++;
  }
  ForwardResult out;
  try {
    for (const auto& [seq, c] : count) kv.grow(seq, c);
    run(b, kv, cache_pos, out);
  } catch (...) {
    for (const auto& [seq, len] : base)
      if (kv.alive(seq) && kv.length(seq) > len) kv.truncate(seq, len);
    throw;
  }
  return out;
}

void Transformer::run(const Batch& b, KvCache& kv, const std::vector<int64_t>& cache_pos,
                      ForwardResult& out) {
  const int64_t n = static_cast<int64_t>(b.size());
  const int64_t dim = cfg_.dim, hd = cfg_.head_dim, nh = cfg_.n_heads, nkv = cfg_.n_kv_heads;
  const int64_t q_w = nh * hd, kv_w = nkv * hd, ffn = cfg_.ffn_dim;

  // Which batch tokens each query sees, as cache positions, and its cached prefix length.
  std::vector<int64_t> prefix(n), visible, offsets(n + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    prefix[i] = cache_pos[i];
    // The prefix is what was cached before this call: the first batch token of the sequence's slot.
    for (int64_t j = 0; j < n; ++j)
      if (b.seqs[j] == b.seqs[i]) {
        prefix[i] = std::min(prefix[i], cache_pos[j]);
        const bool sees = b.mask.empty() ? j <= i : b.mask[i * n + j] != 0;
        if (sees) visible.push_back(cache_pos[j]);
      }
    offsets[i + 1] = static_cast<int64_t>(visible.size());
  }

  x_.resize(n * dim);
  h_.resize(n * dim);
  q_.resize(n * q_w);
  k_.resize(n * kv_w);
  v_.resize(n * kv_w);
  attn_.resize(n * q_w);
  o_.resize(n * dim);
  gate_.resize(n * ffn);
  up_.resize(n * ffn);

  out.vocab = cfg_.vocab;
  out.dim = dim;
  out.hidden.assign(b.hidden_layers.size(), {});

  backend_.embed(token_embd_, b.tokens.data(), n, x_.data());
  for (int64_t l = 0; l < layers(); ++l) {
    const Layer& L = layers_[l];
    // --- attention block ---
    backend_.rmsnorm(x_.data(), L.attn_norm.data(), h_.data(), n, dim, cfg_.rms_eps);
    backend_.matmul(L.wq, h_.data(), q_.data(), n);
    backend_.matmul(L.wk, h_.data(), k_.data(), n);
    backend_.matmul(L.wv, h_.data(), v_.data(), n);
    if (!L.bq.empty()) {
      backend_.add_bias(q_.data(), L.bq.data(), n, q_w);
      backend_.add_bias(k_.data(), L.bk.data(), n, kv_w);
      backend_.add_bias(v_.data(), L.bv.data(), n, kv_w);
    }
    if (!L.q_norm.empty()) {  // Qwen3: RMSNorm over each head's vector before RoPE
      backend_.rmsnorm(q_.data(), L.q_norm.data(), q_.data(), n * nh, hd, cfg_.rms_eps);
      backend_.rmsnorm(k_.data(), L.k_norm.data(), k_.data(), n * nkv, hd, cfg_.rms_eps);
    }
    backend_.rope(q_.data(), n, nh, hd, cfg_.rope_dim, b.positions.data(), inv_freq_.data(),
                  cfg_.rope_layout);
    backend_.rope(k_.data(), n, nkv, hd, cfg_.rope_dim, b.positions.data(), inv_freq_.data(),
                  cfg_.rope_layout);
    backend_.store_kv(kv, l, b.seqs.data(), cache_pos.data(), k_.data(), v_.data(), n);
    AttentionCall call;
    call.q = q_.data();
    call.out = attn_.data();
    call.n = n;
    call.n_heads = nh;
    call.n_kv_heads = nkv;
    call.head_dim = hd;
    call.layer = l;
    call.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    call.cache = &kv;
    call.seqs = b.seqs.data();
    call.prefix_len = prefix.data();
    call.visible = visible.data();
    call.visible_offsets = offsets.data();
    backend_.attention(call);
    backend_.matmul(L.wo, attn_.data(), o_.data(), n);
    // (tensor parallel: all-reduce o_ across the TP group here)
    backend_.add(x_.data(), o_.data(), n * dim);

    // --- MLP block ---
    backend_.rmsnorm(x_.data(), L.ffn_norm.data(), h_.data(), n, dim, cfg_.rms_eps);
    backend_.matmul(L.w_gate, h_.data(), gate_.data(), n);
    backend_.matmul(L.w_up, h_.data(), up_.data(), n);
    backend_.swiglu(gate_.data(), up_.data(), gate_.data(), n * ffn);
    backend_.matmul(L.w_down, gate_.data(), o_.data(), n);
    // (tensor parallel: all-reduce o_ across the TP group here)
    backend_.add(x_.data(), o_.data(), n * dim);

    for (size_t hl = 0; hl < b.hidden_layers.size(); ++hl)
      if (b.hidden_layers[hl] == l) out.hidden[hl].assign(x_.begin(), x_.begin() + n * dim);
  }

  // --- LM head over the requested rows only ---
  const int64_t rows = static_cast<int64_t>(b.logits_rows.size());
  if (rows == 0) return;
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(x_.data() + b.logits_rows[r] * dim, dim, h_.data() + r * dim);
  backend_.rmsnorm(h_.data(), output_norm_.data(), h_.data(), rows, dim, cfg_.rms_eps);
  out.logits.resize(rows * cfg_.vocab);
  backend_.matmul(output_, h_.data(), out.logits.data(), rows);
}

}  // namespace ssd
