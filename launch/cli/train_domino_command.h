// `ssd train-domino`: trains a Domino drafter (the Domino paper; runtime/train/domino_trainer.h)
// for a target model from a self-distillation dataset written by `ssd distill`, and writes ONE
// safetensors checkpoint that `--drafter domino:PATH` loads, plus PATH.optim for --resume.
#pragma once

namespace ssd {

int run_train_domino_command(int argc, const char* const* argv);

}  // namespace ssd
