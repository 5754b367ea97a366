#include "actors/serve/text_stream.h"

#include <algorithm>

#include "runtime/core/error.h"

namespace ssd {

TextStream::TextStream(const Tokenizer& tok, std::vector<std::string> stops,
                       std::vector<int32_t> silent_ids)
    : decoder_(tok), stops_(std::move(stops)), silent_(std::move(silent_ids)) {
  for (const std::string& s : stops_) {
    SSD_CHECK(!s.empty(), "a stop string is empty");
    max_stop_ = std::max(max_stop_, s.size());
  }
}

std::string TextStream::push(int32_t id) {
  if (stopped_) return {};
  if (std::find(silent_.begin(), silent_.end(), id) != silent_.end()) return {};
  held_ += decoder_.push(id);
  // The earliest stop string ends the text there.
  size_t cut = std::string::npos;
  for (const std::string& s : stops_) cut = std::min(cut, held_.find(s));
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, cut);
    held_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of a stop string.
  size_t keep = 0;
  for (const std::string& s : stops_)
    for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n)
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string TextStream::finish() {
  if (stopped_) return {};
  std::string out = std::move(held_) + decoder_.flush();
  held_.clear();
  // A stop string completed by the flushed bytes still ends the text.
  for (const std::string& s : stops_) {
    const size_t at = out.find(s);
    if (at != std::string::npos) {
      out.resize(at);
      stopped_ = true;
    }
  }
  return out;
}

}  // namespace ssd
