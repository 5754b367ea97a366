#include "runtime/model/decoder_layer.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/rowops.h"
#include "runtime/core/error.h"

namespace ssd {

void DecoderScratch::reserve(Backend& be, int64_t n, const DecoderShape& s, const DecoderTp* tp) {
  const int64_t q_w = s.n_heads * s.head_dim, kv_w = s.n_kv_heads * s.head_dim;
  reserve_floats(be, h, n * s.dim);
  reserve_floats(be, q, n * q_w);
  reserve_floats(be, k, n * kv_w);
  reserve_floats(be, v, n * kv_w);
  reserve_floats(be, attn, n * q_w);
  reserve_floats(be, o, n * s.dim);
  reserve_floats(be, gate, n * s.ffn_dim);
  reserve_floats(be, up, n * s.ffn_dim);
  if (!tp) return;
  const int64_t t = tp->comm->size();
  int64_t widest = t * tp->out_rows.back();  // a rank-order sum's gathered rows, or the output
  if (tp->mode == TpMode::Exact) {
    int64_t part_w = 0;
    for (int64_t r = 0; r < t; ++r)
      part_w = std::max(part_w, tp->out_rows[r + 1] - tp->out_rows[r]);
    const int64_t in_w = std::max(tp->attn_cols.back(), tp->ffn_cols.back());
    reserve_floats(be, whole, n * in_w);
    reserve_floats(be, part, n * part_w);
    widest = std::max(widest, in_w);
  }
  reserve_floats(be, xchg, n * widest);
}

std::vector<float> decode_vector(const TensorRef* t) {
  if (!t) return {};
  std::vector<float> out(t->elements());
  kernels::dequantize_row(t->type, t->data, out.data(), static_cast<int64_t>(out.size()));
  return out;
}

DecoderLayerWeights prepare_decoder_layer(Backend& backend, const LayerWeights& t) {
  DecoderLayerWeights l;
  l.wq = backend.prepare_weight(*t.wq);
  l.wk = backend.prepare_weight(*t.wk);
  l.wv = backend.prepare_weight(*t.wv);
  l.wo = backend.prepare_weight(*t.wo);
  l.w_gate = backend.prepare_weight(*t.w_gate);
  l.w_up = backend.prepare_weight(*t.w_up);
  l.w_down = backend.prepare_weight(*t.w_down);
  l.attn_norm = decode_vector(t.attn_norm);
  l.ffn_norm = decode_vector(t.ffn_norm);
  l.bq = decode_vector(t.bq);
  l.bk = decode_vector(t.bk);
  l.bv = decode_vector(t.bv);
  l.q_norm = decode_vector(t.q_norm);
  l.k_norm = decode_vector(t.k_norm);
  return l;
}

namespace {

// An output projection y = W * in for y: [n, dim] (o_proj: in = attention output, down_proj:
// in = MLP activation, this rank's `in_width` columns of it). Single rank: one matmul. Megatron:
// the rank's columns' partial product, all-reduced. Exact: the whole input gathered, the rank's
// output rows, gathered.
void project_out(Backend& be, const Weight& w, const float* in, int64_t in_width,
                 int64_t n, const DecoderTp* tp, const std::vector<int64_t>* in_cols,
                 DecoderScratch& sc, float* y) {
  if (!tp) {
    be.matmul(w, in, y, n);
    return;
  }
  if (tp->mode == TpMode::Megatron) {
    be.matmul(w, in, y, n);
    be.allreduce_sum(*tp->comm, y, n * tp->out_rows.back(), sc.xchg.data());
    return;
  }
  const int r = tp->comm->rank();
  SSD_ASSERT((*in_cols)[r + 1] - (*in_cols)[r] == in_width);
  be.gather_columns(*tp->comm, in, n, *in_cols, sc.whole.data(), sc.xchg.data());
  be.matmul(w, sc.whole.data(), sc.part.data(), n);
  be.gather_columns(*tp->comm, sc.part.data(), n, tp->out_rows, y, sc.xchg.data());
}

// K and V of the normed rows hn into scratch.k / scratch.v (bias, per-head norm, RoPE applied).
void project_kv(Backend& be, const DecoderLayerWeights& w, const DecoderShape& s,
                const BatchView& b, const float* hn, DecoderScratch& sc) {
  const int64_t kv_w = s.n_kv_heads * s.head_dim;
  be.matmul(w.wk, hn, sc.k.data(), b.n);
  be.matmul(w.wv, hn, sc.v.data(), b.n);
  if (!w.bk.empty()) {
    be.add_bias(sc.k.data(), w.bk.data(), b.n, kv_w);
    be.add_bias(sc.v.data(), w.bv.data(), b.n, kv_w);
  }
  if (!w.k_norm.empty())  // Qwen3: RMSNorm over each head's vector before RoPE
    be.rmsnorm(sc.k.data(), w.k_norm.data(), sc.k.data(), b.n * s.n_kv_heads, s.head_dim, s.rms_eps);
  be.rope(sc.k.data(), b.n, s.n_kv_heads, s.head_dim, s.rope_dim, b.positions, s.inv_freq,
          s.rope_layout);
}

}  // namespace

void store_layer_kv(Backend& be, const DecoderLayerWeights& w, const DecoderShape& s,
                    int64_t layer, KvCache& kv, const BatchView& b, const float* hn,
                    DecoderScratch& sc) {
  sc.reserve(be, b.n, s);
  project_kv(be, w, s, b, hn, sc);
  be.store_kv(kv, layer, b.seqs, b.cache_pos, sc.k.data(), sc.v.data(), b.n);
}

void run_decoder_layer(Backend& be, const DecoderLayerWeights& w, const DecoderShape& s,
                       int64_t layer, KvCache& kv, const BatchView& b, float* x,
                       DecoderScratch& sc, const DecoderTp* tp) {
  const int64_t n = b.n, q_w = s.n_heads * s.head_dim;
  sc.reserve(be, n, s, tp);
  // --- attention block ---
  be.rmsnorm(x, w.attn_norm.data(), sc.h.data(), n, s.dim, s.rms_eps);
  be.matmul(w.wq, sc.h.data(), sc.q.data(), n);
  if (!w.bq.empty()) be.add_bias(sc.q.data(), w.bq.data(), n, q_w);
  if (!w.q_norm.empty())
    be.rmsnorm(sc.q.data(), w.q_norm.data(), sc.q.data(), n * s.n_heads, s.head_dim, s.rms_eps);
  be.rope(sc.q.data(), n, s.n_heads, s.head_dim, s.rope_dim, b.positions, s.inv_freq,
          s.rope_layout);
  project_kv(be, w, s, b, sc.h.data(), sc);
  be.store_kv(kv, layer, b.seqs, b.cache_pos, sc.k.data(), sc.v.data(), n);
  AttentionCall call;
  call.q = sc.q.data();
  call.out = sc.attn.data();
  call.n = n;
  call.n_heads = s.n_heads;
  call.n_kv_heads = s.n_kv_heads;
  call.kv_head_of = s.kv_head_of;
  call.head_dim = s.head_dim;
  call.layer = layer;
  call.scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  call.cache = &kv;
  call.seqs = b.seqs;
  call.prefix_len = b.prefix;
  call.visible = b.visible;
  call.visible_offsets = b.offsets;
  be.attention(call);
  project_out(be, w.wo, sc.attn.data(), q_w, n, tp, tp ? &tp->attn_cols : nullptr, sc,
              sc.o.data());
  be.add(x, sc.o.data(), n * s.dim);

  // --- MLP block ---
  be.rmsnorm(x, w.ffn_norm.data(), sc.h.data(), n, s.dim, s.rms_eps);
  be.matmul(w.w_gate, sc.h.data(), sc.gate.data(), n);
  be.matmul(w.w_up, sc.h.data(), sc.up.data(), n);
  be.swiglu(sc.gate.data(), sc.up.data(), sc.gate.data(), n * s.ffn_dim);
  project_out(be, w.w_down, sc.gate.data(), s.ffn_dim, n, tp, tp ? &tp->ffn_cols : nullptr, sc,
              sc.o.data());
  be.add(x, sc.o.data(), n * s.dim);
}

}  // namespace ssd
