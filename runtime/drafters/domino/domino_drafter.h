// `--drafter domino:PATH`: block-parallel drafting with a DFlash-style backbone and the Domino
// causal head (the Domino paper). One backbone pass drafts the whole block; the head then walks the
// block left to right, correcting each position's base logits with a GRU summary of the tokens
// chosen before it (domino_backbone.h, domino_head.h; checkpoint format in domino_checkpoint.h).
//
// Per sequence the drafter keeps the emitted tokens and, in its own KvCache, the context K/V of
// every position whose target features it has received (set_features appends; nothing is
// recomputed per draft). Features lag the tokens: the last emitted token (the root) has none, so
// a draft's block is [root, MASK x (B - 1)] at positions root_pos .. root_pos + B - 1.
//
// More generally, every token after the last featured position is a KNOWN token of the block,
// put in front of the MASK rows as its embedding, the last of them being the anchor. This covers
// DraftRequest.suffix (SSD pre-speculation: hypothetical tokens whose target features do not
// exist): the block is [tokens without features..., suffix..., MASK x (B - 1)], the anchor being
// the suffix's last token, and the draft continues after the suffix. Drafts are at most B - 1
// deep: a request for more returns B - 1 tokens. Width is ignored (a Domino draft is a chain).
//
// All requests of a draft() call run as ONE batched backbone pass (each block on a fork of its
// sequence's context cache), and the head walks all chains together. On a backend with the fused
// walk (the CUDA backend) a call whose requests are all greedy keeps the backbone's rows in
// device memory and walks every chain in one launch (DominoHead::walk_fused); sampled requests,
// and every request on the CPU, take the op-by-op walk from host rows.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "runtime/drafters/domino/domino_backbone.h"
#include "runtime/drafters/domino/domino_checkpoint.h"
#include "runtime/drafters/domino/domino_head.h"
#include "runtime/spec/drafter.h"

namespace ssd {

struct DominoOptions {
  std::string path;            // the checkpoint (a .safetensors file, or a directory holding
                               // model.safetensors)
  bool head = true;            // --domino-head on|off: off drafts from the backbone alone
  bool trim_block = false;     // --domino-block trim: k MASK rows per draft, not the trained B - 1
  int64_t kv_tokens = 65536;   // drafter cache capacity in positions (all sequences + blocks)
};

class DominoDrafter final : public Drafter {
 public:
  // Opens and checks the checkpoint against the target (target layers exist, dim and vocabulary
  // match); throws ssd::Error naming the file and field before any generation. The target must
  // outlive the drafter (its embeddings, LM head and backend are used).
  DominoDrafter(Transformer& target, const DominoOptions& opts);

  std::string name() const override;
  std::vector<int32_t> target_feature_layers() const override;
  int64_t target_feature_dim() const override;
  void start(int32_t seq, std::span<const int32_t> prompt) override;
  void commit(int32_t seq, std::span<const int32_t> tokens) override;
  void set_features(int32_t seq, int64_t from, std::span<const float> features) override;
  std::vector<DraftTree> draft(std::span<const DraftRequest> requests) override;
  void finish(int32_t seq) override;

  const DominoConfig& config() const { return ck_.config(); }
  const DominoOptions& options() const { return opts_; }
  // Context positions of `seq` whose features are cached (tests, diagnostics).
  int64_t context_entries(int32_t seq) const;
  // The pieces, for tests that check each against a reference.
  DominoBackbone& backbone() { return *backbone_; }
  DominoHead& head() { return *head_; }
  KvCache& kv_cache() { return *kv_; }

 private:
  struct Seq {
    SeqId kv = -1;                // context entries [0, n_feat)
    std::vector<int32_t> tokens;  // every emitted token, prompt included
    int64_t n_feat = 0;
    std::vector<float> inject;    // [n_feat, d] u_j = W_inject c_j (context_inject only)
    std::vector<float> pending;   // [p, feature_dim] features of positions n_feat.. not yet in
                                  // the context cache (appended at the next draft)
  };
  Seq& seq_ref(int32_t seq);
  int64_t pending_rows(const Seq& s) const;
  // Appends s's pending features to its context cache (one backbone pass over them).
  void flush(Seq& s);

  Transformer& target_;
  DominoOptions opts_;
  DominoCheckpoint ck_;
  std::unique_ptr<DominoBackbone> backbone_;
  std::unique_ptr<DominoHead> head_;
  std::unique_ptr<KvCache> kv_;
  std::map<int32_t, Seq> seqs_;
};

}  // namespace ssd
