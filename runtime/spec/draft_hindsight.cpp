#include "runtime/spec/draft_hindsight.h"

#include <utility>

namespace ssd {

void DraftHindsight::offer(int32_t seq, std::span<const int32_t> offer) {
  if (offer.empty()) return;
  open_[seq].push_back(Open{{offer.begin(), offer.end()}, 0});
}

void DraftHindsight::emitted(int32_t seq, std::span<const int32_t> tokens,
                             std::vector<Resolved>& out) {
  auto it = open_.find(seq);
  if (it == open_.end()) return;
  std::vector<Open>& open = it->second;
  for (int32_t tok : tokens) {
    // Each open offer compares its next token; an offer that differs or is used up resolves.
    size_t kept = 0;
    for (Open& o : open) {
      const int32_t n = static_cast<int32_t>(o.tokens.size());
      if (o.tokens[static_cast<size_t>(o.matched)] == tok && ++o.matched < n) {
        if (&open[kept] != &o) open[kept] = std::move(o);
        ++kept;
        continue;
      }
      out.push_back(Resolved{n, o.matched});
    }
    open.resize(kept);
  }
  if (open.empty()) open_.erase(it);
}

size_t DraftHindsight::pending(int32_t seq) const {
  auto it = open_.find(seq);
  return it == open_.end() ? 0 : it->second.size();
}

}  // namespace ssd
