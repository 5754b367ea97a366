#include "runtime/drafters/suffix_cache.h"

#include <algorithm>

#include "runtime/core/error.h"

namespace ssd {

SuffixCache::SuffixCache(const SuffixCacheOptions& opts) : opts_(opts) {
  SSD_CHECK(opts.max_tokens >= 0, "suffix cache: a budget of {} tokens is negative",
            opts.max_tokens);
  SSD_CHECK(opts.segments >= 1 && opts.segments <= 64,
            "suffix cache: {} segments is outside 1..64", opts.segments);
  segment_tokens_ = opts.max_tokens / opts.segments;
}

void SuffixCache::add(std::span<const int32_t> document) {
  if (segment_tokens_ == 0 || document.empty()) return;
  if (static_cast<int64_t>(document.size()) > segment_tokens_)
    document = document.subspan(document.size() - static_cast<size_t>(segment_tokens_));
  const int64_t n = static_cast<int64_t>(document.size());
  if (segments_.empty() || segments_.back().tokens() + n > segment_tokens_) {
    segments_.emplace_back();
    if (static_cast<int32_t>(segments_.size()) > opts_.segments) {
      segments_.pop_front();
      ++evicted_;
    }
  }
  segments_.back().append(document);
  segments_.back().end_document();
  ++added_;
}

int64_t SuffixCache::tokens() const {
  int64_t n = 0;
  for (const auto& s : segments_) n += s.tokens();
  return n;
}

int64_t SuffixCache::bytes() const {
  int64_t n = 0;
  for (const auto& s : segments_) n += s.bytes();
  return n;
}

}  // namespace ssd
