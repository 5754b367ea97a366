// The CUDA backend on a machine without a usable GPU (this build machine): the probe answers 0
// without throwing or crashing, and asking for the backend anyway is a clear ssd::Error. On a
// machine with a GPU the second test checks the probe agrees with the runtime instead.
#include <gtest/gtest.h>

#include <string>

#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

TEST(CudaProbe, CountIsNonNegativeAndStable) {
  const int a = cuda_device_count();
  const int b = cuda_device_count();
  EXPECT_GE(a, 0);
  EXPECT_EQ(a, b);
}

TEST(CudaProbe, BackendWithoutDeviceIsAClearError) {
  const int n = cuda_device_count();
  if (n > 0) {
    EXPECT_THROW(make_cuda_backend(n), Error);  // one past the last device
    auto be = make_cuda_backend(0);
    EXPECT_STREQ(be->name(), "cuda");
    return;
  }
  try {
    make_cuda_backend(0);
    FAIL() << "make_cuda_backend succeeded without a device";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ssd
