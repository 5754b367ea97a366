// `ssd generate`: one prompt through the model, text streamed to stdout as it is decoded, and a
// figures line (prompt tokens, prefill tok/s, generated tokens, decode tok/s) on stderr at the
// end; --stats-json writes the same figures and the output ids/text as JSON.
#pragma once

namespace ssd {

// argv holds the tokens after "ssd generate". Returns the process exit code.
int run_generate_command(int argc, const char* const* argv);

}  // namespace ssd
