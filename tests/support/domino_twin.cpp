// The fused Domino walk's CPU twin (see domino_twin.h): domino_walk.cu's loop, thread by thread
// collapsed into plain loops. Where the kernel has a barrier, the twin has finished a loop.
#include "tests/support/domino_twin.h"

#include "kernels/common/dequant.h"
#include "kernels/common/domino_math.h"
#include "kernels/common/half_math.h"
#include "runtime/model/decoder_layer.h"

namespace ssd::test {
namespace {

namespace hd = kernels::hd;

// out[row] = W[row] . x(.) in the device's order.   W: [rows, cols]
template <class X>
void twin_rows(const std::vector<float>& w, int64_t rows, int64_t cols, X&& x, float* out) {
  for (int64_t row = 0; row < rows; ++row) {
    const float* wr = w.data() + row * cols;
    out[row] = hd::warp_order_dot([wr](int64_t c) { return wr[c]; }, x, cols);
  }
}

// s <- GRU(s, emb(token)).   s: [g]
void twin_gru(const DominoTwinHead& h, int32_t token, std::vector<float>& s) {
  const float* x = h.embd.data() + static_cast<int64_t>(token) * h.d;
  std::vector<float> gi(3 * h.g), gh(3 * h.g);
  twin_rows(h.w_ih, 3 * h.g, h.d, [x](int64_t c) { return x[c]; }, gi.data());
  twin_rows(h.w_hh, 3 * h.g, h.g, [&s](int64_t c) { return s[c]; }, gh.data());
  for (int64_t u = 0; u < 3 * h.g; ++u) {
    gi[u] = hd::domino_gate(gi[u], h.b_ih[u]);
    gh[u] = hd::domino_gate(gh[u], h.b_hh[u]);
  }
  for (int64_t u = 0; u < h.g; ++u) s[u] = hd::domino_gru_state(gi.data(), gh.data(), h.g, u, s[u]);
}

}  // namespace

DominoTwinHead domino_twin_head(const DominoCheckpoint& ck, const ModelFile& target) {
  const DominoConfig& cfg = ck.config();
  DominoTwinHead h;
  h.d = cfg.target_dim;
  h.g = cfg.gru_dim;
  h.r = cfg.rank;
  h.vd = cfg.draft_vocab_size();
  const TensorRef& e = *target.weights().token_embd;
  h.embd.resize(e.ne[1] * e.ne[0]);
  for (uint64_t row = 0; row < e.ne[1]; ++row)
    for (uint64_t c = 0; c < e.ne[0]; ++c)
      h.embd[row * e.ne[0] + c] =
          hd::dequant_elem(e.type, e.data + row * e.row_bytes(), static_cast<int64_t>(c));
  h.w_ih = decode_vector(ck.head.gru_w_ih);
  h.w_hh = decode_vector(ck.head.gru_w_hh);
  h.b_ih = decode_vector(ck.head.gru_b_ih);
  h.b_hh = decode_vector(ck.head.gru_b_hh);
  h.w1 = decode_vector(ck.head.w1);
  h.w2 = decode_vector(ck.head.w2);
  h.vocab_ids = cfg.draft_vocab;
  return h;
}

std::vector<int32_t> domino_twin_walk(const DominoTwinHead& h, float* logits, const float* hidden,
                                      std::span<const int64_t> first,
                                      std::span<const int32_t> anchors, bool use_head) {
  const int64_t chains = static_cast<int64_t>(anchors.size());
  std::vector<int32_t> tokens(first[chains], -1);
  const int32_t* ids = h.vocab_ids.empty() ? nullptr : h.vocab_ids.data();
  for (int64_t c = 0; c < chains; ++c) {
    std::vector<float> s(h.g, 0.0f), mid(h.r);
    if (use_head) twin_gru(h, anchors[c], s);  // s_0
    for (int64_t row = first[c]; row < first[c + 1]; ++row) {
      float* f = logits + row * h.vd;
      if (use_head) {
        const float* hr = hidden + row * h.d;
        const int64_t d = h.d;
        twin_rows(h.w1, h.r, h.d + h.g,
                  [&](int64_t col) { return hd::domino_w1_input(hr, s.data(), d, col); },
                  mid.data());
        for (float& m : mid) m = hd::silu(m);
        std::vector<float> corr(h.vd);
        twin_rows(h.w2, h.vd, h.r, [&mid](int64_t col) { return mid[col]; }, corr.data());
        for (int64_t v = 0; v < h.vd; ++v) f[v] = hd::domino_final(f[v], corr[v]);
      }
      const int32_t token =
          hd::domino_target_id(ids, hd::argmax_row(f, static_cast<int32_t>(h.vd)));
      tokens[row] = token;
      if (token < 0) break;
      if (use_head && row + 1 < first[c + 1]) twin_gru(h, token, s);
    }
  }
  return tokens;
}


}  // namespace ssd::test
