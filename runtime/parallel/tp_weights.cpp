// Row slices point into the mapping, column slices are copied (see tp_weights.h for why).
#include "runtime/parallel/tp_weights.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/rowops.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

std::vector<float> slice(const std::vector<float>& v, int64_t begin, int64_t end) {
  if (v.empty()) return {};
  SSD_ASSERT(begin >= 0 && end <= static_cast<int64_t>(v.size()) && begin <= end);
  return std::vector<float>(v.begin() + begin, v.begin() + end);
}

}  // namespace

int64_t TpWeightBuffers::bytes() const {
  int64_t n = 0;
  for (const auto& b : buffers) n += static_cast<int64_t>(b.size());
  return n;
}

TensorRef slice_rows(const TensorRef& t, int64_t begin, int64_t end) {
  SSD_CHECK(t.ne.size() == 2, "{}: a row slice needs a matrix, the tensor has {} dimensions",
            t.name, t.ne.size());
  SSD_CHECK(begin >= 0 && begin < end && end <= static_cast<int64_t>(t.ne[1]),
            "{}: rows [{}, {}) are outside its {} rows", t.name, begin, end, t.ne[1]);
  TensorRef s = t;
  s.name = fmt::format("{}[rows {}:{}]", t.name, begin, end);
  s.ne = {t.ne[0], static_cast<uint64_t>(end - begin)};
  s.data = t.data + static_cast<uint64_t>(begin) * t.row_bytes();
  s.nbytes = static_cast<uint64_t>(end - begin) * t.row_bytes();
  return s;
}

TensorRef slice_cols(const TensorRef& t, int64_t begin, int64_t end, TpWeightBuffers& store) {
  SSD_CHECK(t.ne.size() == 2, "{}: a column slice needs a matrix, the tensor has {} dimensions",
            t.name, t.ne.size());
  const int64_t cols = static_cast<int64_t>(t.ne[0]), rows = static_cast<int64_t>(t.ne[1]);
  SSD_CHECK(begin >= 0 && begin < end && end <= cols, "{}: columns [{}, {}) are outside its {}",
            t.name, begin, end, cols);
  const int64_t width = end - begin;
  const auto& tr = dtype_traits(t.type);
  const bool aligned = begin % tr.block_elems == 0 && end % tr.block_elems == 0;
  TensorRef s = t;
  s.name = fmt::format("{}[cols {}:{}]", t.name, begin, end);
  s.ne = {static_cast<uint64_t>(width), static_cast<uint64_t>(rows)};
  if (!aligned) s.type = DType::F32;
  const uint64_t out_row = dtype_row_bytes(s.type, static_cast<uint64_t>(width));
  std::vector<uint8_t>& buf = store.buffers.emplace_back(out_row * static_cast<uint64_t>(rows));
  if (aligned) {
    const uint64_t skip = dtype_row_bytes(t.type, static_cast<uint64_t>(begin));
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(buf.data() + r * out_row, t.data + r * t.row_bytes() + skip, out_row);
  } else {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      kernels::dequantize_row(t.type, t.data + r * t.row_bytes(), row.data(), cols);
      std::memcpy(buf.data() + r * out_row, row.data() + begin, out_row);
    }
  }
  s.data = buf.data();
  s.nbytes = buf.size();
  return s;
}

DecoderLayerWeights prepare_decoder_layer_shard(Backend& be, const LayerWeights& t,
                                                int64_t head_dim, const TpShard& sh,
                                                TpMode mode, TpWeightBuffers& store) {
  SSD_ASSERT(!sh.q_heads.empty() && !sh.kv_heads.empty());
  // Heads are contiguous in the plan (checked by the caller), so each slice is one range.
  const int64_t q0 = sh.q_heads.front() * head_dim, q1 = (sh.q_heads.back() + 1) * head_dim;
  const int64_t k0 = sh.kv_heads.front() * head_dim, k1 = (sh.kv_heads.back() + 1) * head_dim;
  DecoderLayerWeights l;
  l.wq = be.prepare_weight(slice_rows(*t.wq, q0, q1));
  l.wk = be.prepare_weight(slice_rows(*t.wk, k0, k1));
  l.wv = be.prepare_weight(slice_rows(*t.wv, k0, k1));
  const bool exact = mode == TpMode::Exact;
  l.wo = be.prepare_weight(exact ? slice_rows(*t.wo, sh.dim_begin, sh.dim_end)
                                 : slice_cols(*t.wo, q0, q1, store));
  l.w_gate = be.prepare_weight(slice_rows(*t.w_gate, sh.ffn_begin, sh.ffn_end));
  l.w_up = be.prepare_weight(slice_rows(*t.w_up, sh.ffn_begin, sh.ffn_end));
  l.w_down = be.prepare_weight(exact ? slice_rows(*t.w_down, sh.dim_begin, sh.dim_end)
                                     : slice_cols(*t.w_down, sh.ffn_begin, sh.ffn_end, store));
  l.attn_norm = decode_vector(t.attn_norm);
  l.ffn_norm = decode_vector(t.ffn_norm);
  l.bq = slice(decode_vector(t.bq), q0, q1);
  l.bk = slice(decode_vector(t.bk), k0, k1);
  l.bv = slice(decode_vector(t.bv), k0, k1);
  l.q_norm = decode_vector(t.q_norm);  // per head_dim: the same for every head
  l.k_norm = decode_vector(t.k_norm);
  return l;
}

}  // namespace ssd
