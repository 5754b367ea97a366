// Backend memory on the CPU backend: allocate() gives zeroed, aligned host memory that outlives
// the backend if need be, and upload / download / copy are plain copies (the Transformer's
// activations live in these buffers, so the CPU results must be the same bits as host vectors;
// the engine and spec tests check that end to end).
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "runtime/backend/backend.h"

namespace ssd {
namespace {

TEST(BackendBuffer, CpuAllocateIsZeroedAlignedAndMovable) {
  auto be = make_cpu_backend(1);
  BackendBuffer a = be->allocate(100 * sizeof(float));
  ASSERT_NE(a.data(), nullptr);
  EXPECT_EQ(a.bytes(), 100 * sizeof(float));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.data()[i], 0.0f);
  float* p = a.data();
  BackendBuffer b = std::move(a);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(a.bytes(), 0u);
}

TEST(BackendBuffer, CpuTransfersAreExactCopies) {
  auto be = make_cpu_backend(2);
  std::vector<float> host(37);
  std::iota(host.begin(), host.end(), -3.25f);
  BackendBuffer a = be->allocate(host.size() * sizeof(float));
  BackendBuffer b = be->allocate(host.size() * sizeof(float));
  be->upload(a.data(), host.data(), host.size() * sizeof(float));
  be->copy(b.data() + 1, a.data(), (host.size() - 1) * sizeof(float));
  std::vector<float> back(host.size(), 7.0f);
  be->download(back.data(), b.data(), host.size() * sizeof(float));
  EXPECT_EQ(back[0], 0.0f);
  for (size_t i = 1; i < host.size(); ++i) EXPECT_EQ(back[i], host[i - 1]) << i;
}

TEST(BackendBuffer, ReserveFloatsGrowsOnlyWhenSmallerAndOutlivesTheBackend) {
  BackendBuffer buf;
  {
    auto be = make_cpu_backend(1);
    reserve_floats(*be, buf, 10);
    ASSERT_GE(buf.bytes(), 10 * sizeof(float));
    float* p = buf.data();
    reserve_floats(*be, buf, 4);
    EXPECT_EQ(buf.data(), p);
    reserve_floats(*be, buf, 1000);
    EXPECT_GE(buf.bytes(), 1000 * sizeof(float));
    reserve_floats(*be, buf, 0);  // an empty batch still gets a valid pointer
    EXPECT_NE(buf.data(), nullptr);
  }
  buf.data()[999] = 1.0f;  // the backend is gone; the memory is still the buffer's
  buf.reset();
  EXPECT_EQ(buf.data(), nullptr);
}

}  // namespace
}  // namespace ssd
