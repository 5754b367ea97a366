#include "runtime/drafters/ngram_drafter.h"

#include <algorithm>
#include <cmath>

#include "runtime/core/error.h"

namespace ssd {

NgramDrafter::NgramDrafter(const NgramOptions& opts) : opts_(opts) {
  SSD_CHECK(opts.n_min >= 1 && opts.n_max >= opts.n_min && opts.n_max <= 64,
            "n-gram drafter: n range {}..{} must satisfy 1 <= min <= max <= 64", opts.n_min,
            opts.n_max);
  SSD_CHECK(opts.depth_per_match >= 0 && std::isfinite(opts.depth_per_match),
            "n-gram drafter: depth per matched token {} must be >= 0", opts.depth_per_match);
}

std::string NgramDrafter::name() const {
  return "ngram:" + std::to_string(opts_.n_min) + "-" + std::to_string(opts_.n_max);
}

void NgramDrafter::start(int32_t seq, std::span<const int32_t> prompt) {
  contexts_[seq].assign(prompt.begin(), prompt.end());
}

void NgramDrafter::commit(int32_t seq, std::span<const int32_t> tokens) {
  auto it = contexts_.find(seq);
  SSD_CHECK(it != contexts_.end(), "n-gram drafter: sequence {} was not started", seq);
  it->second.insert(it->second.end(), tokens.begin(), tokens.end());
}

void NgramDrafter::finish(int32_t seq) { contexts_.erase(seq); }

std::vector<std::vector<int32_t>> NgramDrafter::lookup(std::span<const int32_t> ctx, int32_t k,
                                                       int32_t width, const NgramOptions& o) {
  std::vector<std::vector<int32_t>> out;
  const int64_t len = static_cast<int64_t>(ctx.size());
  if (k <= 0 || width <= 0) return out;
  for (int32_t n = std::min<int64_t>(o.n_max, len - 1); n >= o.n_min; --n) {
    const int32_t* tail = ctx.data() + len - n;
    const int64_t lowest = std::max<int64_t>(0, len - n - o.max_scan);
    // Latest match first: recent text predicts the continuation best.
    for (int64_t start = len - n - 1; start >= lowest; --start) {
      if (!std::equal(tail, tail + n, ctx.data() + start)) continue;
      const int64_t from = start + n;
      int64_t take = std::min<int64_t>(k, len - from);
      if (o.depth_per_match > 0)
        take = std::min<int64_t>(take, static_cast<int64_t>(std::ceil(o.depth_per_match * n)));
      if (take <= 0) continue;
      std::vector<int32_t> cont(ctx.begin() + from, ctx.begin() + from + take);
      const bool seen = std::any_of(out.begin(), out.end(), [&](const auto& c) {
        return !c.empty() && c.front() == cont.front();
      });
      if (!seen) out.push_back(std::move(cont));  // siblings must start with distinct tokens
      if (static_cast<int32_t>(out.size()) == width) return out;
    }
  }
  return out;
}

namespace {

// The distinct next tokens of the lookup as a ranked list: weights 1 / (rank + 1), normalised
// (a ranking, not a probability model).
ProcessedDist ranked(const std::vector<std::vector<int32_t>>& continuations) {
  ProcessedDist d;
  double total = 0;
  for (size_t i = 0; i < continuations.size(); ++i) {
    d.tokens.push_back(TokenProb{continuations[i].front(), 1.0 / static_cast<double>(i + 1)});
    total += d.tokens.back().prob;
  }
  for (TokenProb& tp : d.tokens) tp.prob /= total;
  return d;
}

}  // namespace

std::vector<DraftTree> NgramDrafter::draft(std::span<const DraftRequest> requests) {
  std::vector<DraftTree> trees;
  for (const DraftRequest& r : requests) {
    auto it = contexts_.find(r.seq);
    SSD_CHECK(it != contexts_.end(), "n-gram drafter: sequence {} was not started", r.seq);
    std::vector<int32_t> ctx = it->second;
    ctx.insert(ctx.end(), r.suffix.begin(), r.suffix.end());
    DraftTree tree;
    const size_t base = ctx.size();
    for (const auto& cont : lookup(ctx, r.k, std::max(1, r.width), opts_)) {
      int32_t parent = -1;
      for (int32_t t : cont) {
        parent = tree.add(parent, t, one_hot(t));
        if (r.predict_top > 0)
          tree.predicted.push_back(ranked(lookup(ctx, 1, r.predict_top, opts_)));
        ctx.push_back(t);  // the next node's position: context + suffix + the branch so far
      }
      ctx.resize(base);
    }
    trees.push_back(std::move(tree));
  }
  return trees;
}

}  // namespace ssd
