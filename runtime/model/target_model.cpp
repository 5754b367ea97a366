#include "runtime/model/target_model.h"

#include <algorithm>

#include "runtime/core/error.h"
#include "runtime/generate/token_picker.h"
#include "runtime/model/transformer.h"

namespace ssd {

TokenPicker& TargetModel::picker() { return host_token_picker(); }

TokenPicker& LocalTarget::picker() { return picker_ ? *picker_ : host_token_picker(); }

const ModelConfig& LocalTarget::config() const { return model_.config(); }

ForwardResult LocalTarget::forward(const Batch& batch) { return model_.forward(batch, kv_); }

TargetSeqs::~TargetSeqs() {
  for (auto it = live_.rbegin(); it != live_.rend(); ++it) {
    try {
      target_.release_seq(*it);
    } catch (...) {
    }
  }
}

SeqId TargetSeqs::create() {
  live_.reserve(live_.size() + 1);  // so that a created sequence is always recorded
  const SeqId s = target_.create_seq();
  live_.push_back(s);
  return s;
}

void TargetSeqs::release(SeqId seq) {
  auto it = std::find(live_.begin(), live_.end(), seq);
  SSD_CHECK(it != live_.end(), "target sequence {} is not held here", seq);
  live_.erase(it);
  target_.release_seq(seq);
}

}  // namespace ssd
