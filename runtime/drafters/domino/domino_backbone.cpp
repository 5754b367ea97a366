// The backbone's two passes (see domino_backbone.h): context features -> per-layer K/V entries,
// and the batched block forward over forks of the sequences' context caches.
#include "runtime/drafters/domino/domino_backbone.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "runtime/core/error.h"

namespace ssd {
namespace {

// Releases the per-block forks however the pass ends.
struct ForkGuard {
  KvCache& kv;
  std::vector<SeqId> forks;
  ~ForkGuard() {
    for (SeqId f : forks)
      if (kv.alive(f)) kv.release(f);
  }
};

}  // namespace

DominoBackbone::DominoBackbone(const DominoCheckpoint& ck, Transformer& target)
    : cfg_(ck.config()),
      backend_(target.backend()),
      token_embd_(target.token_embedding()),
      lm_head_(target.lm_head()) {
  SSD_ASSERT(token_embd_.cols == cfg_.target_dim && lm_head_.rows == cfg_.target_vocab);
  if (!cfg_.draft_vocab.empty()) {
    // The head's rows for the draft vocabulary, in the target's dtype, prepared like any weight.
    // Copied from the file's bytes: the prepared head's data may be device memory (CUDA).
    const TensorRef& head = *target.file().weights().output;
    const uint64_t rb = head.row_bytes();
    SSD_ASSERT(rb == lm_head_.row_bytes);
    lm_head_rows_.resize(cfg_.draft_vocab.size() * rb);
    for (size_t i = 0; i < cfg_.draft_vocab.size(); ++i)
      std::copy_n(head.data + cfg_.draft_vocab[i] * rb, rb, lm_head_rows_.data() + i * rb);
    TensorRef rows;
    rows.name = "domino.draft_vocab_lm_head";
    rows.type = lm_head_.type;
    rows.ne = {static_cast<uint64_t>(lm_head_.cols), cfg_.draft_vocab.size()};
    rows.data = lm_head_rows_.data();
    rows.nbytes = lm_head_rows_.size();
    lm_head_ = backend_.prepare_weight(rows);
  }
  fc_ = backend_.prepare_weight(*ck.fc);
  if (cfg_.context_inject) inject_ = backend_.prepare_weight(*ck.ctx_inject);
  fc_norm_ = decode_vector(ck.fc_norm);
  mask_ = decode_vector(ck.mask_embedding);
  mask_dev_ = backend_.allocate(mask_.size() * sizeof(float));
  backend_.upload(mask_dev_.data(), mask_.data(), mask_.size() * sizeof(float));
  final_norm_ = decode_vector(ck.final_norm);
  const int64_t half = cfg_.head_dim / 2;
  for (int64_t i = 0; i < half; ++i)
    inv_freq_.push_back(static_cast<float>(
        std::pow(static_cast<double>(cfg_.rope_theta), -2.0 * i / cfg_.head_dim)));
  shape_ = DecoderShape{cfg_.target_dim, cfg_.n_heads,  cfg_.n_kv_heads,
                        cfg_.head_dim,   cfg_.head_dim, cfg_.ffn_dim,
                        cfg_.rms_eps,    RopeLayout::NeoX, inv_freq_.data()};
  for (const DominoLayerTensors& t : ck.layers) layers_.push_back(prepare_decoder_layer(backend_, t));
}

KvCacheConfig DominoBackbone::kv_config(int64_t max_tokens) const {
  KvCacheConfig c;
  c.n_layers = cfg_.n_layers;
  c.n_kv_heads = cfg_.n_kv_heads;
  c.head_dim = cfg_.head_dim;
  c.max_tokens = max_tokens;
  return c;
}

void DominoBackbone::append_context(KvCache& kv, SeqId seq, int64_t from,
                                    std::span<const float> features, std::vector<float>* inject) {
  const int64_t fdim = cfg_.feature_dim(), d = cfg_.target_dim;
  SSD_CHECK(features.size() % fdim == 0,
            "domino drafter: {} feature values are not a whole number of rows of {} (= {} target "
            "layers x dim {})",
            features.size(), fdim, cfg_.target_layers.size(), d);
  const int64_t n = static_cast<int64_t>(features.size()) / fdim;
  SSD_ASSERT(kv.length(seq) == from);
  SSD_ASSERT(!cfg_.context_inject || inject);
  if (inject) inject->clear();
  if (n == 0) return;
  const size_t f = sizeof(float);
  reserve_floats(backend_, feats_, n * fdim);
  reserve_floats(backend_, x_, n * d);
  reserve_floats(backend_, h_, n * d);
  backend_.upload(feats_.data(), features.data(), n * fdim * f);
  // c = RMSNorm(W_fc x) * fc_norm   [n, d]
  backend_.matmul(fc_, feats_.data(), x_.data(), n);
  backend_.rmsnorm(x_.data(), fc_norm_.data(), x_.data(), n, d, cfg_.rms_eps);
  std::vector<int32_t> positions(n);
  std::vector<SeqId> seqs(n, seq);
  std::vector<int64_t> cache_pos(n);
  for (int64_t i = 0; i < n; ++i) {
    positions[i] = static_cast<int32_t>(from + i);
    cache_pos[i] = from + i;
  }
  const BatchView view{n, positions.data(), seqs.data(), cache_pos.data(), nullptr, nullptr, nullptr};
  kv.grow(seq, n);
  try {
    for (int64_t l = 0; l < cfg_.n_layers; ++l) {
      backend_.rmsnorm(x_.data(), layers_[l].attn_norm.data(), h_.data(), n, d, cfg_.rms_eps);
      store_layer_kv(backend_, layers_[l], shape_, l, kv, view, h_.data(), scratch_);
    }
  } catch (...) {
    kv.truncate(seq, from);
    throw;
  }
  if (cfg_.context_inject) {  // u = W_inject c   [n, d]
    backend_.matmul(inject_, x_.data(), h_.data(), n);
    inject->resize(n * d);
    backend_.download(inject->data(), h_.data(), n * d * f);
  }
}

DominoBackbone::Result DominoBackbone::forward(KvCache& kv, std::span<const Block> blocks,
                                               bool download) {
  const int64_t d = cfg_.target_dim, max_masks = cfg_.block_size - 1;
  // MASK rows of a block: B - 1 as trained, or n_out when the caller trims the block.
  auto masks_of = [&](const Block& b) -> int64_t { return b.trim ? b.n_out : max_masks; };
  const int64_t vocab = cfg_.draft_vocab_size();

  // Row layout: block b's rows start at first[b]; its token t is row first[b] + t.
  std::vector<int64_t> first;
  int64_t n = 0;
  for (const Block& b : blocks) {
    SSD_ASSERT(!b.known.empty() && b.n_out >= 0 && b.n_out <= max_masks);
    SSD_ASSERT(b.n_ctx >= 0 && b.n_ctx <= kv.length(b.seq));
    first.push_back(n);
    n += static_cast<int64_t>(b.known.size()) + masks_of(b);
  }
  Result res;
  res.offset.assign(1, 0);
  if (n == 0) return res;

  ForkGuard guard{kv, {}};
  std::vector<int32_t> tokens(n, 0), positions(n);
  std::vector<SeqId> seqs(n);
  std::vector<int64_t> cache_pos(n), prefix(n), visible, offsets(n + 1, 0);
  std::vector<uint8_t> is_mask(n, 0);
  for (size_t bi = 0; bi < blocks.size(); ++bi) {
    const Block& b = blocks[bi];
    const SeqId f = kv.fork(b.seq);
    guard.forks.push_back(f);
    kv.truncate(f, b.n_ctx);  // hide context entries past n_ctx (they are still in b.seq)
    const int64_t rows = static_cast<int64_t>(b.known.size()) + masks_of(b);
    kv.grow(f, rows);
    for (int64_t t = 0; t < rows; ++t) {
      const int64_t r = first[bi] + t;
      const bool known = t < static_cast<int64_t>(b.known.size());
      tokens[r] = known ? b.known[t] : 0;
      is_mask[r] = !known;
      positions[r] = static_cast<int32_t>(b.n_ctx + t);
      seqs[r] = f;
      cache_pos[r] = b.n_ctx + t;
      prefix[r] = b.n_ctx;  // every context entry
      for (int64_t u = 0; u < rows; ++u) visible.push_back(b.n_ctx + u);  // the whole block
      offsets[r + 1] = static_cast<int64_t>(visible.size());
    }
  }

  int64_t out_rows = 0;
  std::vector<int32_t> layout, wanted;  // the pass's shape (ReplayKey); the x_ rows that output
  for (size_t bi = 0; bi < blocks.size(); ++bi) {
    const Block& b = blocks[bi];
    out_rows += b.n_out;
    res.offset.push_back(out_rows);
    layout.push_back(static_cast<int32_t>(b.known.size()));
    layout.push_back(b.n_out);
    layout.push_back(b.inject != nullptr);
    layout.push_back(static_cast<int32_t>(masks_of(b)));
    for (int32_t i = 1; i <= b.n_out; ++i)
      wanted.push_back(static_cast<int32_t>(first[bi] + static_cast<int64_t>(b.known.size()) - 1 + i));
  }

  // Every buffer at its size first: then the pass is device work that depends only on its shape
  // (blocks, known rows, outputs), which the backend may replay (CUDA graphs); host inputs (token
  // ids, positions, visible lists, the inject rows) are read where they are on each call.
  const size_t f = sizeof(float);
  reserve_floats(backend_, x_, n * d);
  reserve_floats(backend_, h_, std::max<int64_t>(out_rows, 1) * d);
  reserve_floats(backend_, logits_, std::max<int64_t>(out_rows, 1) * vocab);
  scratch_.reserve(backend_, n, shape_);
  std::vector<float> inj;  // [blocks, d] each block's u_{n_ctx-1} (context_inject)
  if (cfg_.context_inject) {
    inj.assign(blocks.size() * d, 0.0f);
    for (size_t bi = 0; bi < blocks.size(); ++bi) {
      SSD_ASSERT((blocks[bi].inject != nullptr) == (blocks[bi].n_ctx > 0));
      if (blocks[bi].inject) std::copy_n(blocks[bi].inject, d, inj.data() + bi * d);
    }
  }
  std::optional<ReplayableRegion> region;
  if (out_rows > 0) region.emplace(backend_, ReplayKey{this, &kv, n, wanted, {}, layout});

  // Known rows: the target's token embeddings; MASK rows: the learned mask vector.
  backend_.embed(token_embd_, tokens.data(), n, x_.data());
  for (int64_t r = 0; r < n; ++r)
    if (is_mask[r]) backend_.copy(x_.data() + r * d, mask_dev_.data(), d * f);
  for (size_t bi = 0; bi < blocks.size() && cfg_.context_inject; ++bi)  // rows += u_{n_ctx-1}
    if (blocks[bi].inject)
      backend_.add_bias(x_.data() + first[bi] * d, inj.data() + bi * d,
                        static_cast<int64_t>(blocks[bi].known.size()) + masks_of(blocks[bi]), d);

  const BatchView view{n, positions.data(), seqs.data(), cache_pos.data(),
                       prefix.data(), visible.data(), offsets.data()};
  for (int64_t l = 0; l < cfg_.n_layers; ++l)
    run_decoder_layer(backend_, layers_[l], shape_, l, kv, view, x_.data(), scratch_);

  // Final norm and the target's LM head on the wanted MASK rows only.
  if (download) res.hidden.resize(out_rows * d);
  if (out_rows == 0) return res;
  for (size_t bi = 0; bi < blocks.size(); ++bi) {  // a block's wanted rows are contiguous
    const int64_t anchor_row = first[bi] + static_cast<int64_t>(blocks[bi].known.size()) - 1;
    backend_.copy(h_.data() + res.offset[bi] * d, x_.data() + (anchor_row + 1) * d,
                  blocks[bi].n_out * d * f);
  }
  backend_.rmsnorm(h_.data(), final_norm_.data(), h_.data(), out_rows, d, cfg_.rms_eps);
  backend_.matmul(lm_head_, h_.data(), logits_.data(), out_rows);
  region->end();
  res.dev_logits = logits_.data();
  res.dev_hidden = h_.data();
  if (!download) return res;
  res.logits.resize(out_rows * vocab);
  backend_.download(res.hidden.data(), h_.data(), out_rows * d * f);
  backend_.download(res.logits.data(), logits_.data(), out_rows * vocab * f);
  return res;
}

}  // namespace ssd
