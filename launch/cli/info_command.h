// `ssd info`: what a model file holds (architecture, hyper-parameters, tensor types and sizes,
// tokenizer), after the same checks a run does, so a bad file is diagnosed without running it.
#pragma once

namespace ssd {

int run_info_command(int argc, const char* const* argv);

}  // namespace ssd
