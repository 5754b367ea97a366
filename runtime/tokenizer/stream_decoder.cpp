// Holding back a partial UTF-8 tail: look at most 3 bytes back for a lead byte whose sequence is
// longer than what has arrived. Bytes that can never start a sequence (stray continuations,
// invalid leads) are passed through rather than held forever.
#include "runtime/tokenizer/stream_decoder.h"

#include "runtime/tokenizer/unicode_text.h"

namespace ssd {
namespace {

// Number of trailing bytes of s that form the start of an incomplete UTF-8 sequence.
size_t incomplete_tail(const std::string& s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = static_cast<uint8_t>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for its lead
    const uint32_t need = utf8_sequence_length(b);
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace

std::string StreamDecoder::push(int32_t id) {
  const std::string& p = tok_->piece(id);
  if (skip_special_ && tok_->is_special(id)) return {};
  pending_ += p;
  const size_t keep = incomplete_tail(pending_);
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace ssd
