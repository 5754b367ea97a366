// Which compute backend a session runs on, resolved from the `--backend auto|cpu|cuda` choice
// (the flag is declared once, in launch/cli/backend_flags.h), and the one place of the roles
// that knows whether this binary was built with CUDA (backend_choice.cpp tests SSD_HAVE_CUDA).
//   auto  CUDA when this binary has the CUDA backend and a device is present; otherwise the CPU,
//         with a note when a CUDA-built binary finds no device (printed on the model summary
//         line, ModelSession::backend_summary(), so stderr keeps its line count).
//   cpu   always the CPU backend.
//   cuda  the CUDA backend, or a clear ssd::Error (no device, or a CPU-only build): never a crash.
// A command resolves the flag once, on every rank, before it joins the job (run_on_cluster); the
// Cluster agrees on it over the ranks and picks each rank's device (actors/roles/gpu_link.h),
// and the result reaches the ModelSession as a BackendChoice: nothing downstream re-resolves.
#pragma once

#include <memory>
#include <string>

#include "runtime/backend/backend.h"
#include "runtime/generate/token_picker.h"

namespace ssd {

enum class BackendKind { Cpu, Cuda };

// What one session computes on, decided at start-up and passed down.
struct BackendChoice {
  BackendKind kind = BackendKind::Cpu;
  int device = 0;    // the CUDA device when kind == Cuda
  std::string note;  // why --backend auto chose the CPU ("" otherwise)

  // "backend cpu" / "backend cuda:D", with the note in parentheses.
  std::string summary() const;
};

// True when this binary contains the CUDA backend.
bool cuda_backend_built();

// `choice` (auto, cpu or cuda) resolved on this machine. Sets *note to a one-line explanation
// when auto falls back to the CPU in a CUDA build (empty otherwise). Throws ssd::Error for cuda
// without a device or without a CUDA build, and for an unknown choice.
BackendKind resolve_backend(const std::string& choice, std::string* note);

// The chosen backend: the CPU with `threads` workers, or CUDA device `choice.device`.
std::unique_ptr<Backend> make_backend(const BackendChoice& choice, int threads);

// How the decoding loops pick tokens from `backend`'s logits (runtime/generate/token_picker.h),
// decided with the backend: the host picker for the CPU, the device picker for CUDA (logits stay
// on the device). `backend` must outlive the picker.
std::unique_ptr<TokenPicker> make_token_picker(const BackendChoice& choice, Backend& backend);

// Whether `backend` replays the forwards a model marks replayable (CUDA graphs, unless
// SSD_CUDA_GRAPHS=off), the largest batch it replays, and how many forward shapes it holds
// captured: what the start-up warm-up (LeaderJob::warm_up) needs. All zero on the CPU.
struct ReplayStatus {
  bool replays = false;
  int64_t max_rows = 0;
  int64_t captured = 0;
};
ReplayStatus replay_status(Backend& backend);

}  // namespace ssd
