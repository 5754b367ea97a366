// Options of the CPU backend beyond the thread count (make_cpu_backend(threads) in backend.h is
// the common case): the CPUs its worker threads are pinned to, when a rank owns some cores of a
// shared machine (topology/binding.h decides which).
#pragma once

#include <memory>
#include <vector>

#include "runtime/backend/backend.h"

namespace ssd {

struct CpuBackendOptions {
  int threads = 1;            // >= 1, the calling thread included
  std::vector<int> pin_cpus;  // empty: threads float; else worker i on pin_cpus[i % size]
  int spin_us = 200;          // idle spin of the pool's threads before they sleep
};

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& opts);

}  // namespace ssd
