// `ssd synth-prompts`: the target writes a prompt file of user requests itself (Magpie-style,
// runtime/train/prompt_synth.h), the varied input `ssd distill` needs to train a drafter. The
// file starts with '#' lines recording the model and the settings; the same flags give the same
// file. Refuses, before any work: a model without a chat template's user turn or without an
// end-of-generation token, temperature 0, an existing output without --force, an unreadable
// --exclude file.
#pragma once

namespace ssd {

// argv holds the tokens after "ssd synth-prompts". Returns the process exit code.
int run_synth_prompts_command(int argc, const char* const* argv);

}  // namespace ssd
