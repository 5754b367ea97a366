// CudaGraphSet: the size list a decoder needs (runs everywhere), and capture / replay by size
// on a device (skips visibly without one).
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda/kernels.cuh"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/backend/cuda/cuda_graphs.h"
#include "runtime/core/error.h"
#include "tests/unit/cuda/skip_without_gpu.h"

namespace ssd::cuda {
namespace {

TEST(CudaGraphs, DecoderSizesCoverDecodeVerifyAndTreeBatches) {
  EXPECT_EQ(CudaGraphSet::decoder_sizes({4, 2}, {2, 8}),
            (std::vector<int64_t>{1, 3, 5, 6, 10, 24, 40}));
  EXPECT_EQ(CudaGraphSet::decoder_sizes({}, {}), (std::vector<int64_t>{1}));
  EXPECT_THROW(CudaGraphSet::decoder_sizes({0}, {}), Error);
}

TEST(CudaGraphs, CaptureAndReplayBySize) {
  SSD_SKIP_WITHOUT_GPU("graph capture");
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  const int64_t max_n = 17;
  float *y = nullptr, *x = nullptr;
  ASSERT_EQ(cudaMalloc(&y, max_n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&x, max_n * sizeof(float)), cudaSuccess);
  std::vector<float> ones(max_n, 1.0f), zeros(max_n, 0.0f);
  cudaMemcpy(x, ones.data(), max_n * sizeof(float), cudaMemcpyHostToDevice);
  {
    CudaGraphSet g(s);
    g.capture_all({1, 5, 17}, [&](cudaStream_t st, int64_t n) { launch_add(y, x, n, st); });
    EXPECT_EQ(g.sizes(), (std::vector<int64_t>{1, 5, 17}));
    cudaMemcpy(y, zeros.data(), max_n * sizeof(float), cudaMemcpyHostToDevice);
    g.replay(5);
    g.replay(5);
    g.replay(1);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    std::vector<float> got(max_n);
    cudaMemcpy(got.data(), y, max_n * sizeof(float), cudaMemcpyDeviceToHost);
    EXPECT_EQ(got[0], 3.0f);   // in all three replays
    EXPECT_EQ(got[4], 2.0f);   // in the two of size 5
    EXPECT_EQ(got[5], 0.0f);   // in none
    EXPECT_THROW(g.replay(2), Error);
    // A capture whose enqueue throws leaves no graph and a usable stream.
    EXPECT_THROW(g.capture(3, [](cudaStream_t, int64_t) { fail("boom"); }), Error);
    EXPECT_FALSE(g.has(3));
    g.replay(17);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  }
  cudaFree(x);
  cudaFree(y);
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace ssd::cuda
