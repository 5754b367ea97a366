// The one way a GPU-only test case skips on a machine without a CUDA device: visibly, with a
// message naming what was not run. A macro because GTEST_SKIP returns from the test body.
#pragma once

#include <gtest/gtest.h>

#include "runtime/backend/cuda/cuda_backend.h"

#define SSD_SKIP_WITHOUT_GPU(what)                                                  \
  do {                                                                              \
    if (::ssd::cuda_device_count() == 0)                                            \
      GTEST_SKIP() << "no CUDA device: " << (what) << " not run on this machine";   \
  } while (0)
