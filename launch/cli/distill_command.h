// `ssd distill`: builds a self-distillation dataset for drafter training (format in
// runtime/train/distill_dataset.h). The target answers every prompt of a prompt file itself
// (greedy, batched, chat template by default), and its hidden states at the drafter's layers are
// captured for every position of prompt + response. Progress on stderr after each batch; a
// summary at the end. Refuses, before any work: a missing or empty prompt file, a layer outside
// the model, an existing output without --force.
#pragma once

namespace ssd {

// argv holds the tokens after "ssd distill". Returns the process exit code.
int run_distill_command(int argc, const char* const* argv);

}  // namespace ssd
