// The flags that say what model a run loads and how much of the machine it uses, declared once:
// `ssd generate`, `ssd bench` and `ssd serve` hold one ModelFlags through JobFlags (job_flags.h),
// so one declaration drives the parsing, --help and the resolved config of all three.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <thread>

#include "launch/cli/flags.h"

namespace ssd {

// The machine's hardware threads, at most 64 (1 when unknown).
inline int32_t default_threads() {
  const unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int32_t>(std::min(hc, 64u));
}

struct ModelFlags {
  std::filesystem::path model;
  int32_t threads = default_threads();
  int64_t ctx_size = 0;

  template <class V>
  void visit(V&& v) {
    v(model, "model", "target: GGUF file, or safetensors checkpoint directory with config.json",
      {.required = true, .short_name = 'm', .must_exist = true});
    v(threads, "threads", "CPU worker threads", {.short_name = 't', .min = 1, .max = 1024});
    v(ctx_size, "ctx-size",
      "KV cache positions (shared by every sequence decoded together); 0 = min(model context, "
      "4096)",
      {.min = 0});
  }
};

}  // namespace ssd
