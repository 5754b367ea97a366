// `ssd serve`: an OpenAI-compatible HTTP server (actors/serve/) over the model, with continuous
// batching; alone, or as rank 0 of an mpirun / ssd-launch job whose other ranks follow it as they
// do for `ssd generate` (TP workers, drafter ranks). SIGTERM (or SIGINT) to rank 0 drains: new
// requests get 503, the ones in flight finish, then every rank exits 0.
#pragma once

namespace ssd {

// argv holds the tokens after "ssd serve". Returns the process exit code.
int run_serve_command(int argc, const char* const* argv);

}  // namespace ssd
