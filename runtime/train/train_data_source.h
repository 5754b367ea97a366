// A self-distillation dataset (distill_dataset.h) as the trainer's TrainData: lengths and prompt
// lengths from the index (no decoding), sequences decoded on demand. The dataset must outlive
// the returned object.
#pragma once

#include "runtime/train/distill_dataset.h"
#include "runtime/train/domino_trainer.h"

namespace ssd::train {

TrainData train_data_from(const DistillDataset& ds);

}  // namespace ssd::train
