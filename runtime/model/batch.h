// The one call every forward goes through: n tokens, each with a RoPE position and a KV sequence,
// and a mask saying which of the batch's own tokens each token may attend to. Every token also
// sees its sequence's whole cached prefix (the positions cached before this call).
//
// Decoding one token, prefilling a prompt, verifying K+1 drafted tokens, drafting a bidirectional
// block and decoding a speculation tree are all this call with a different mask:
//   - causal (mask empty): token i sees the batch tokens j <= i of its own sequence;
//   - custom: mask[i * n + j] != 0 lets token i see token j (same sequence only; a tree mask
//     lets each branch node see its ancestors, a block mask lets a block see itself).
// New K/V are appended to each token's sequence in batch order.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/kv/kv_cache.h"

namespace ssd {

class Backend;

struct Batch {
  std::vector<int32_t> tokens;         // [n]
  std::vector<int32_t> positions;      // [n] RoPE positions (tree siblings share a position)
  std::vector<SeqId> seqs;             // [n] KV sequence of each token
  std::vector<uint8_t> mask;           // [n, n] or empty for causal
  std::vector<int32_t> logits_rows;    // batch rows whose logits are returned
  std::vector<int32_t> hidden_layers;  // layers whose output hidden state is returned, [n, dim] each
  // Leave the logits rows in the model's backend memory (ForwardResult::backend_logits) instead
  // of downloading them, for a TokenPicker that reads them there (runtime/generate/
  // token_picker.h); under tensor parallelism, the rows the group gathered there.
  bool logits_in_backend = false;

  size_t size() const { return tokens.size(); }

  // `tokens` of one sequence at positions start, start+1, ... with a causal mask; logits for the
  // last token only (or all tokens when all_logits).
  static Batch sequence(SeqId seq, const std::vector<int32_t>& tokens, int32_t start,
                        bool all_logits = false);
};

struct ForwardResult {
  int64_t vocab = 0;
  int64_t dim = 0;
  std::vector<float> logits;               // [logits_rows.size(), vocab] (empty: see below)
  std::vector<std::vector<float>> hidden;  // per requested layer: [n, dim]
  // Set when the batch asked for logits_in_backend and the forward honoured it: the rows,
  // [logits_rows.size(), vocab], in `backend`'s memory, valid until the model's next forward;
  // `logits` is then empty until download_logits() fills it.
  const float* backend_logits = nullptr;
  Backend* backend = nullptr;
  int64_t rows = 0;  // logits rows computed (host or backend)

  const float* logits_row(size_t i) const { return logits.data() + i * vocab; }
  // Brings backend_logits to `logits` (one download; nothing when they are already there).
  void download_logits();
};

}  // namespace ssd
