// The `--backend auto|cpu|cuda` flag, declared once: generate and bench visit BackendFlags in
// their own flag lists; the choice reaches the roles as a string resolved there once
// (actors/roles/backend_choice.h).
#pragma once

#include <string>

#include "launch/cli/flags.h"

namespace ssd {

struct BackendFlags {
  std::string backend = "auto";

  template <class V>
  void visit(V&& v) {
    v(backend, "backend",
      "compute backend: cpu, cuda, or auto (cuda when this binary was built with CUDA and a GPU "
      "is present, else cpu)",
      {.choices = {"auto", "cpu", "cuda"}});
  }
};

}  // namespace ssd
