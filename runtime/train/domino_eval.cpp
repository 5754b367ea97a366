// Offline evaluation of a Domino drafter (see domino_eval.h).
#include "runtime/train/domino_eval.h"

#include <algorithm>

#include "runtime/core/error.h"

namespace ssd::train {

double EvalReport::mal(int32_t k) const {
  SSD_CHECK(k >= 0 && k < rows, "eval: k {} outside 0..{}", k, rows - 1);
  if (blocks == 0) return 0;
  double sum = 0;
  for (int32_t i = 0; i < rows; ++i) sum += static_cast<double>(accepted[i]) * std::min(i, k);
  return 1.0 + sum / static_cast<double>(blocks);
}

double EvalReport::acc_final(int32_t i) const {
  return labelled[i] ? static_cast<double>(hits_final[i]) / labelled[i] : 0;
}
double EvalReport::acc_base(int32_t i) const {
  return labelled[i] ? static_cast<double>(hits_base[i]) / labelled[i] : 0;
}

namespace {

int64_t argmax(const float* row, int64_t n) {
  return std::max_element(row, row + n) - row;
}

}  // namespace

EvalReport evaluate_domino(const DominoConfig& cfg_in, const FrozenTarget& target,
                           const std::vector<float>& params, const TrainData& data,
                           const EvalOptions& opt) {
  DominoConfig cfg = cfg_in;
  if (opt.rows > 0) cfg.block_size = opt.rows;
  SSD_CHECK(cfg.block_size >= 2, "eval: a block needs at least 2 rows, not {}", cfg.block_size);
  SSD_CHECK(opt.stride >= 1 && opt.max_anchors >= 1 && opt.known >= 1,
            "eval: stride {}, max anchors {} and known tokens {} must be >= 1", opt.stride,
            opt.max_anchors, opt.known);
  const ParamLayout layout(cfg);
  SSD_CHECK(static_cast<int64_t>(params.size()) == layout.total(),
            "eval: {} parameters for a layout of {}", params.size(), layout.total());
  const int32_t R = cfg.block_size;
  const int64_t Vd = cfg.draft_vocab_size();
  auto token_of = [&](int64_t j) {
    return cfg.draft_vocab.empty() ? static_cast<int32_t>(j) : cfg.draft_vocab[j];
  };

  EvalReport rep;
  rep.rows = R;
  rep.hits_final.assign(R, 0);
  rep.hits_base.assign(R, 0);
  rep.labelled.assign(R, 0);
  rep.accepted.assign(R, 0);
  DominoTrainModel model(cfg, target);
  model.keep_logits(true);
  LossOptions lo;
  lo.lambda = 0.5f;  // ce_final and ce_base are reported separately; lambda only mixes the loss
  lo.gamma = 7.0f * static_cast<float>(R) / 16.0f;
  lo.known = opt.known;
  const DominoConstView view = make_view(layout, cfg, params.data());
  std::vector<int32_t> tokens, anchors;
  std::vector<float> feats;
  LossStats stats;
  for (size_t idx = 0; idx < data.size; ++idx) {
    if (opt.max_seqs > 0 && rep.seqs >= opt.max_seqs) break;
    const int32_t L = data.length(idx), P = data.prompt_len(idx);
    // Full blocks only: anchor a needs labels a+1 .. a+R-1 inside the sequence (and its kn
    // known tokens t[a-kn+1 .. a]).
    const int32_t first = std::max(P - 1, opt.known - 1);
    if (P < 1 || L - R < first) continue;
    anchors.clear();
    for (int32_t a = first; a <= L - R; a += opt.stride) anchors.push_back(a);
    if (static_cast<int32_t>(anchors.size()) > opt.max_anchors) {
      std::vector<int32_t> thin(opt.max_anchors);
      for (int32_t k = 0; k < opt.max_anchors; ++k)
        thin[k] = anchors[static_cast<size_t>(k) * anchors.size() / opt.max_anchors];
      anchors = std::move(thin);
    }
    data.read(idx, tokens, feats);
    stats.add(model.run(view, nullptr, tokens, feats, anchors, lo));
    ++rep.seqs;
    for (size_t b = 0; b < anchors.size(); ++b) {
      const auto out = model.block_out(static_cast<int64_t>(b));
      SSD_ASSERT(out.rows == R - 1);
      int32_t prefix = 0;
      bool chain = true;
      for (int32_t i = 1; i < R; ++i) {
        const int32_t label = tokens[anchors[b] + i];
        const bool hit_f = token_of(argmax(out.final_logits.data() + (i - 1) * Vd, Vd)) == label;
        const bool hit_b = token_of(argmax(out.base.data() + (i - 1) * Vd, Vd)) == label;
        ++rep.labelled[i];
        rep.hits_final[i] += hit_f;
        rep.hits_base[i] += hit_b;
        chain = chain && hit_f;
        prefix += chain;
      }
      ++rep.accepted[prefix];
      ++rep.blocks;
    }
  }
  if (stats.blocks > 0) {
    rep.ce_final = stats.ce_final / static_cast<double>(stats.blocks);
    rep.ce_base = stats.ce_base / static_cast<double>(stats.blocks);
  }
  return rep;
}

}  // namespace ssd::train
