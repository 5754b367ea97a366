// DominoDrafter: per-sequence bookkeeping (tokens, featured positions, context cache) around the
// backbone pass and the head walk.
#include "runtime/drafters/domino/domino_drafter.h"

#include <algorithm>

#include "runtime/core/error.h"

namespace ssd {

DominoDrafter::DominoDrafter(Transformer& target, const DominoOptions& opts)
    : target_(target), opts_(opts), ck_(DominoCheckpoint::open(opts.path)) {
  ck_.config().check_target(target.layers(), target.config().dim, target.config().vocab,
                            opts.path);
  SSD_CHECK(opts.kv_tokens > 0, "domino drafter: KV capacity {} must be positive", opts.kv_tokens);
  backbone_ = std::make_unique<DominoBackbone>(ck_, target);
  head_ = std::make_unique<DominoHead>(ck_, target);
  kv_ = std::make_unique<KvCache>(backbone_->kv_config(opts.kv_tokens));
}

std::string DominoDrafter::name() const { return opts_.head ? "domino" : "domino-nohead"; }

std::vector<int32_t> DominoDrafter::target_feature_layers() const {
  return ck_.config().target_layers;
}

int64_t DominoDrafter::target_feature_dim() const { return ck_.config().feature_dim(); }

DominoDrafter::Seq& DominoDrafter::seq_ref(int32_t seq) {
  auto it = seqs_.find(seq);
  SSD_CHECK(it != seqs_.end(), "domino drafter: sequence {} was not started", seq);
  return it->second;
}

void DominoDrafter::start(int32_t seq, std::span<const int32_t> prompt) {
  finish(seq);  // a restarted sequence begins from scratch
  Seq s;
  s.kv = kv_->create();
  s.tokens.assign(prompt.begin(), prompt.end());
  seqs_[seq] = std::move(s);
}

void DominoDrafter::commit(int32_t seq, std::span<const int32_t> tokens) {
  Seq& s = seq_ref(seq);
  s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
}

// Features wait in the sequence's pending rows until a draft needs them: a round that drafts
// nothing for the sequence (a plain decode step under --k auto, a pre-speculation hit on a
// drafter rank) costs no backbone pass, and the pass at the next draft takes every waiting
// position at once. The cache then holds the same entries, bit for bit, as if each round had
// appended its own (a row's result does not depend on the rows beside it).
void DominoDrafter::set_features(int32_t seq, int64_t from, std::span<const float> features) {
  Seq& s = seq_ref(seq);
  const int64_t fdim = ck_.config().feature_dim();
  SSD_CHECK(features.size() % fdim == 0,
            "domino drafter: sequence {}: {} feature values are not whole rows of {}", seq,
            features.size(), fdim);
  const int64_t n = static_cast<int64_t>(features.size()) / fdim;
  const int64_t fed = s.n_feat + pending_rows(s);
  SSD_CHECK(from >= 0 && from <= fed,
            "domino drafter: sequence {}: features from position {} leave a gap (positions "
            "0..{} have features)",
            seq, from, fed - 1);
  SSD_CHECK(from + n <= static_cast<int64_t>(s.tokens.size()),
            "domino drafter: sequence {}: features for positions {}..{} but only {} tokens were "
            "committed",
            seq, from, from + n - 1, s.tokens.size());
  if (from < s.n_feat) {  // re-delivered positions replace the old entries
    kv_->truncate(s.kv, from);
    s.inject.resize(from * ck_.config().target_dim);
    s.n_feat = from;
    s.pending.clear();
  }
  s.pending.resize((from - s.n_feat) * fdim);  // re-delivered pending rows are replaced too
  s.pending.insert(s.pending.end(), features.begin(), features.end());
}

int64_t DominoDrafter::pending_rows(const Seq& s) const {
  return static_cast<int64_t>(s.pending.size()) / ck_.config().feature_dim();
}

void DominoDrafter::flush(Seq& s) {
  if (s.pending.empty()) return;
  std::vector<float> inject;
  backbone_->append_context(*kv_, s.kv, s.n_feat, s.pending,
                            ck_.config().context_inject ? &inject : nullptr);
  s.inject.insert(s.inject.end(), inject.begin(), inject.end());
  s.n_feat += pending_rows(s);
  s.pending.clear();
}

std::vector<DraftTree> DominoDrafter::draft(std::span<const DraftRequest> requests) {
  const DominoConfig& cfg = ck_.config();
  std::vector<DraftTree> trees(requests.size());
  std::vector<DominoBackbone::Block> blocks;
  std::vector<size_t> which;  // request of each block
  for (size_t r = 0; r < requests.size(); ++r) {
    const DraftRequest& req = requests[r];
    Seq& s = seq_ref(req.seq);
    const int32_t k = std::min(req.k, cfg.block_size - 1);
    if (k <= 0) continue;
    flush(s);
    const int64_t n_tok = static_cast<int64_t>(s.tokens.size());
    SSD_CHECK(n_tok + static_cast<int64_t>(req.suffix.size()) > 0,
              "domino drafter: sequence {} has no token to draft after", req.seq);
    for (int32_t t : req.suffix)
      SSD_CHECK(t >= 0 && t < cfg.target_vocab,
                "domino drafter: suffix token {} is outside the vocabulary (0..{})", t,
                cfg.target_vocab - 1);
    DominoBackbone::Block b;
    b.seq = s.kv;
    // The anchor must be a block token, never only a context entry: with no suffix and features
    // for every token, hide the last one from the context.
    b.n_ctx = req.suffix.empty() ? std::min(s.n_feat, n_tok - 1) : s.n_feat;
    b.known.assign(s.tokens.begin() + b.n_ctx, s.tokens.end());
    b.known.insert(b.known.end(), req.suffix.begin(), req.suffix.end());
    b.n_out = k;
    b.trim = opts_.trim_block;
    if (cfg.context_inject && b.n_ctx > 0) b.inject = s.inject.data() + (b.n_ctx - 1) * cfg.target_dim;
    blocks.push_back(std::move(b));
    which.push_back(r);
  }
  if (blocks.empty()) return trees;

  // Blocks on a backend with the fused walk stay in its memory: one backbone pass, one walk, the
  // tokens (and sampled rows' q lists) read back (domino_head.h). Otherwise (or when a request's
  // Saguaro reshape needs the host's draw) the rows come to the host.
  bool fused = head_->fused();
  for (size_t b = 0; b < blocks.size(); ++b)
    fused = fused && DominoHead::walks_fused(requests[which[b]].sampler, &requests[which[b]],
                                             blocks[b].n_out);
  const DominoBackbone::Result res = backbone_->forward(*kv_, blocks, /*download=*/!fused);
  std::vector<DominoChain> chains(blocks.size());
  for (size_t b = 0; b < blocks.size(); ++b) {
    const DraftRequest& req = requests[which[b]];
    DominoChain& c = chains[b];
    if (!fused) {
      c.base = res.logits.data() + res.offset[b] * cfg.draft_vocab_size();
      c.hidden = res.hidden.data() + res.offset[b] * cfg.target_dim;
    }
    c.anchor = blocks[b].known.back();
    c.k = blocks[b].n_out;
    c.sampler = req.sampler;
    c.stream = req.stream;
    c.step = req.position;
    c.request = &req;
  }
  std::vector<DraftTree> walked =
      fused ? head_->walk_fused(res.dev_logits, res.dev_hidden, res.offset, chains, opts_.head)
            : head_->walk(chains, opts_.head);
  for (size_t b = 0; b < blocks.size(); ++b) trees[which[b]] = std::move(walked[b]);
  return trees;
}

void DominoDrafter::finish(int32_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  if (kv_->alive(it->second.kv)) kv_->release(it->second.kv);
  seqs_.erase(it);
}

int64_t DominoDrafter::context_entries(int32_t seq) const {
  auto it = seqs_.find(seq);
  SSD_CHECK(it != seqs_.end(), "domino drafter: sequence {} was not started", seq);
  return it->second.n_feat + pending_rows(it->second);
}

}  // namespace ssd
