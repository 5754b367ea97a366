// Draft-vocabulary selection (see draft_vocab.h).
#include "runtime/train/draft_vocab.h"

#include <algorithm>
#include <numeric>

#include "runtime/core/error.h"

namespace ssd::train {

std::vector<int32_t> select_draft_vocab(const std::vector<int64_t>& counts, int64_t n) {
  const int64_t v = static_cast<int64_t>(counts.size());
  SSD_CHECK(n >= 1 && n <= v, "--draft-vocab {}: must be in 1..{} (the target's vocabulary)", n, v);
  std::vector<int32_t> ids(v);
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
    return counts[a] != counts[b] ? counts[a] > counts[b] : a < b;
  });
  ids.resize(n);
  std::sort(ids.begin(), ids.end());
  return ids;
}

double draft_vocab_coverage(const std::vector<int64_t>& counts, const std::vector<int32_t>& vocab) {
  int64_t in = 0, all = 0;
  for (int64_t c : counts) all += c;
  for (int32_t t : vocab) in += counts[t];
  return all > 0 ? static_cast<double>(in) / all : 0.0;
}

}  // namespace ssd::train
