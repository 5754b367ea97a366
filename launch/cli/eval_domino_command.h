// `ssd eval-domino`: the offline acceptance of a Domino checkpoint on self-distillation data
// (runtime/train/domino_eval.h): per-position accuracy of the final and base logits against the
// target's own greedy tokens, and the mean acceptance length a greedy verifier would give. Quick
// and deterministic; no decoding. `ssd bench --drafter domino:PATH` is the measure of a real run.
#pragma once

namespace ssd {

int run_eval_domino_command(int argc, const char* const* argv);

}  // namespace ssd
