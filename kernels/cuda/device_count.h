// The binary's one CUDA device probe (defined in cuda_check.cpp), in a header without CUDA
// headers so that host code choosing a backend or placing ranks can ask it. It never throws or
// crashes: a CUDA-built binary on a machine without a driver or a GPU gets 0 and uses the CPU.
#pragma once

namespace ssd {

// Number of usable CUDA devices; 0 when there is no driver, no device or any error.
int cuda_device_count() noexcept;

}  // namespace ssd
