// A request's output text as the client sees it: tokens become text through a StreamDecoder
// (whole UTF-8 characters only), end-of-generation tokens give no text, and the request's stop
// strings end it: the text stops just before the first occurrence of any of them. While
// streaming, text that could still turn out to begin a stop string is held back until it cannot
// (or until the end), so a client never receives part of a stop string.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/tokenizer/stream_decoder.h"

namespace ssd {

class TextStream {
 public:
  // silent_ids: tokens that produce no text (end-of-generation ids). Every stop string must be
  // non-empty.
  TextStream(const Tokenizer& tok, std::vector<std::string> stops,
             std::vector<int32_t> silent_ids);

  // Adds a token; returns the text now safe to send. stopped() turns true when a stop string
  // appeared (the returned text then ends just before it and later pushes return nothing).
  std::string push(int32_t id);
  // The end of the request: whatever was held back.
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  StreamDecoder decoder_;
  std::vector<std::string> stops_;
  std::vector<int32_t> silent_;
  std::string held_;  // decoded text not yet sent
  bool stopped_ = false;
  size_t max_stop_ = 0;
};

}  // namespace ssd
