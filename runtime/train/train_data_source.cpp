// DistillDataset -> TrainData (see train_data_source.h).
#include "runtime/train/train_data_source.h"

namespace ssd::train {

TrainData train_data_from(const DistillDataset& ds) {
  TrainData d;
  d.size = ds.size();
  d.path = ds.path();
  d.length = [&ds](size_t i) { return ds.length(i); };
  d.prompt_len = [&ds](size_t i) { return ds.prompt_len(i); };
  d.read = [&ds](size_t i, std::vector<int32_t>& tokens, std::vector<float>& features) {
    DistillSequence s = ds.read(i);
    tokens = std::move(s.tokens);
    features = std::move(s.features);
  };
  return d;
}

}  // namespace ssd::train
