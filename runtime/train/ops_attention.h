// Attention of one Domino block for the trainer: the block's B query rows see the context
// entries [0, a) of their sequence (keys/values computed once per sequence) and the block's own
// B keys/values, bidirectionally; GQA with query head h reading KV head h / (heads / kv_heads),
// scale 1 / sqrt(head_dim), as the runtime's attention. Per (block, head) the scores and the
// weighted sums are sgemm calls; the probabilities are kept for the backward.
#pragma once

#include <cstdint>
#include <vector>

namespace ssd::train {

struct AttentionShape {
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
};

// One block's inputs: q [B, heads * hd]; context kc/vc [a, kv * hd] (may be null when a = 0);
// block kb/vb [B, kv * hd].
struct BlockAttention {
  const float* q = nullptr;
  const float* kc = nullptr;
  const float* vc = nullptr;
  const float* kb = nullptr;
  const float* vb = nullptr;
  int64_t rows = 0;  // B
  int64_t ctx = 0;   // a
};

// out: [B, heads * hd]. probs (out): [heads, B, a + B], resized here.
void block_attention_forward(const AttentionShape& s, const BlockAttention& in, float* out,
                             std::vector<float>& probs);

// Gradients ADDED into dq [B, heads*hd], dkc/dvc [a, kv*hd], dkb/dvb [B, kv*hd], given dout and
// the forward's probs.
void block_attention_backward(const AttentionShape& s, const BlockAttention& in,
                              const std::vector<float>& probs, const float* dout, float* dq,
                              float* dkc, float* dvc, float* dkb, float* dvb);

}  // namespace ssd::train
