// FR-Spec-style reduced draft vocabulary: the N most frequent tokens of the training data's
// RESPONSE tokens (ties broken by the smaller id), returned sorted ascending by id, as the
// "draft_vocab" field of a Domino config wants it (domino_config.h).
#pragma once

#include <cstdint>
#include <vector>

namespace ssd::train {

// counts: [vocab]. n in [1, vocab]. Tokens never seen may fill the tail when n exceeds the
// number of distinct response tokens (they tie at 0, smallest ids first).
std::vector<int32_t> select_draft_vocab(const std::vector<int64_t>& counts, int64_t n);

// Fraction of the counted tokens that fall inside `vocab` (the coverage the progress reports).
double draft_vocab_coverage(const std::vector<int64_t>& counts, const std::vector<int32_t>& vocab);

}  // namespace ssd::train
