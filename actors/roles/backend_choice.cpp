// Backend resolution (see backend_choice.h). The only SSD_HAVE_CUDA test of the front end.
#include "actors/roles/backend_choice.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string_view>

#include "runtime/core/error.h"

#if defined(SSD_HAVE_CUDA)
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/backend/cuda/device_token_picker.h"
#endif

namespace ssd {
namespace {

int device_count() {
#if defined(SSD_HAVE_CUDA)
  return cuda_device_count();
#else
  return 0;
#endif
}

}  // namespace

bool cuda_backend_built() {
#if defined(SSD_HAVE_CUDA)
  return true;
#else
  return false;
#endif
}

BackendKind resolve_backend(const std::string& choice, std::string* note) {
  if (note) note->clear();
  if (choice == "cpu") return BackendKind::Cpu;
  SSD_CHECK(choice == "auto" || choice == "cuda",
            "--backend {}: expected auto, cpu or cuda", choice);
  if (choice == "cuda") {
    SSD_CHECK(cuda_backend_built(),
              "--backend cuda: this ssd was built without CUDA (configure with nvcc present and "
              "-DSSD_CUDA=ON or AUTO); use --backend cpu");
    SSD_CHECK(device_count() > 0,
              "--backend cuda: no CUDA device is available (no driver or no GPU); use --backend "
              "cpu");
    return BackendKind::Cuda;
  }
  if (device_count() > 0) return BackendKind::Cuda;
  if (cuda_backend_built() && note)
    *note = "auto: no CUDA device found, running on the CPU";
  return BackendKind::Cpu;
}

std::string BackendChoice::summary() const {
  std::string s = kind == BackendKind::Cuda ? fmt::format("backend cuda:{}", device)
                                            : std::string("backend cpu");
  if (!note.empty()) s += " (" + note + ")";
  return s;
}

namespace {

// SSD_CUDA_GRAPHS=off (or 0): every op eager, for comparing with and without CUDA graphs.
[[maybe_unused]] bool cuda_graphs_on() {
  const char* g = std::getenv("SSD_CUDA_GRAPHS");
  return !g || (std::string_view(g) != "off" && std::string_view(g) != "0");
}

}  // namespace

std::unique_ptr<Backend> make_backend(const BackendChoice& choice, int threads) {
  if (choice.kind == BackendKind::Cpu) return make_cpu_backend(threads);
#if defined(SSD_HAVE_CUDA)
  CudaBackendOptions opts{.device = choice.device};
  opts.graphs = cuda_graphs_on();
  return make_cuda_backend(opts);
#else
  fail("the CUDA backend is not built into this ssd");
#endif
}

std::unique_ptr<TokenPicker> make_token_picker(const BackendChoice& choice, Backend& backend) {
  if (choice.kind == BackendKind::Cpu) return std::make_unique<HostTokenPicker>();
#if defined(SSD_HAVE_CUDA)
  return make_device_token_picker(backend);
#else
  (void)backend;
  fail("the CUDA backend is not built into this ssd");
#endif
}

ReplayStatus replay_status(Backend& backend) {
  ReplayStatus r;
#if defined(SSD_HAVE_CUDA)
  if (std::string_view(backend.name()) == "cuda") {
    r.replays = cuda_graphs_on();
    r.max_rows = CudaBackendOptions{}.invariant_max_tokens;
    r.captured = cuda_graphs_ready(backend);
  }
#else
  (void)backend;
#endif
  return r;
}

}  // namespace ssd
