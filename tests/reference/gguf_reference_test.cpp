// Our GGUF reader against files written by an independent writer: the PyPI `gguf` package's
// GGUFWriter (write_gguf_reference.py, whose values are mirrored here). Skips visibly when python3,
// numpy or gguf is unavailable. Tensor values are decoded by hand in this file, so neither our
// writer nor our kernels take part. Tolerances: F32/F16 values are exact (all representable);
// Q8_0 is within 0.6 * d per value, d = max|x| / 127 of the block (rounding to the nearest step is
// d / 2, plus up to 127 steps of the F16 rounding of d itself, 127 * d * 2^-11 < 0.07 d).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/io/gguf_file.h"

namespace ssd {
namespace {

double f16_to_double(const uint8_t* p) {
  const uint16_t h = static_cast<uint16_t>(p[0] | (p[1] << 8));
  const int e = (h >> 10) & 31, m = h & 1023;
  const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -mag : mag;
}

class PyGgufReference : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* src = std::getenv("SSD_SOURCE_DIR");
    const char* py = std::getenv("SSD_PYTHON");
    if (src == nullptr) GTEST_SKIP() << "SSD_SOURCE_DIR unset (run through ctest)";
    const std::string python = py && *py ? py : "python3";
    // One file per process: ctest runs each test case as its own process, possibly in parallel.
    path_ = ::testing::TempDir() + "ssd_pygguf_reference_" + std::to_string(::getpid()) + ".gguf";
    const std::string cmd = "\"" + python + "\" \"" + std::string(src) +
                            "/tests/reference/write_gguf_reference.py\" \"" + path_ + "\"";
    const int rc = std::system(cmd.c_str());
    const int code = rc == -1 ? -1 : WEXITSTATUS(rc);
    if (code == 77 || code == 127)
      GTEST_SKIP() << "python3 with numpy and gguf (PyPI) is not available: " << cmd;
    ASSERT_EQ(code, 0) << "reference writer failed: " << cmd;
  }
  void TearDown() override {
    if (!path_.empty()) std::remove(path_.c_str());
  }
  std::string path_;
};

TEST_F(PyGgufReference, MetadataValues) {
  const GgufFile f = GgufFile::open(path_);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("ref.u8"), 250);
  EXPECT_EQ(f.metadata().at("ref.u8").type, GgufType::U8);
  EXPECT_EQ(f.get_int("ref.i16"), -1234);
  EXPECT_EQ(f.get_int("ref.u32"), 3000000000ll);
  EXPECT_EQ(f.get_int("ref.i32"), -42);
  EXPECT_EQ(f.get_int("ref.u64"), 1ll << 40);
  EXPECT_EQ(f.get_int("ref.i64"), -(1ll << 40));
  EXPECT_EQ(f.metadata().at("ref.i64").type, GgufType::I64);
  EXPECT_EQ(f.get_float("ref.f32"), 0.375);
  EXPECT_EQ(f.get_float("ref.f64"), 2.0 / 3.0);
  EXPECT_EQ(f.get_bool("ref.bool"), true);
  EXPECT_EQ(f.get_string("ref.str"), "h\xc3\xa9llo");
  EXPECT_EQ(f.get_int_array("ref.ints"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(f.get_float_array("ref.floats"), (std::vector<double>{0.25, -1.5}));
  EXPECT_EQ(f.get_string_array("ref.strs"), (std::vector<std::string_view>{"a", "bb", ""}));
  EXPECT_EQ(f.get_int("llama.block_count"), 30);
}

TEST_F(PyGgufReference, TensorValues) {
  const GgufFile f = GgufFile::open(path_);
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.data_offset() % 64, 0u);

  const TensorRef* a = f.find_tensor("ref.f32_tensor");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->type, DType::F32);
  EXPECT_EQ(a->ne, (std::vector<uint64_t>{2, 3}));
  ASSERT_EQ(a->nbytes, 24u);
  for (int i = 0; i < 6; ++i) {
    float v;
    std::memcpy(&v, a->data + 4 * i, 4);
    EXPECT_EQ(v, i * 0.5f - 1.0f) << i;
  }

  const TensorRef* h = f.find_tensor("ref.f16_tensor");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->type, DType::F16);
  ASSERT_EQ(h->nbytes, 8u);
  const double want_h[] = {1.0, -2.5, 0.125, 65504.0};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(f16_to_double(h->data + 2 * i), want_h[i]) << i;

  const TensorRef* q = f.find_tensor("ref.q8_tensor");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, DType::Q8_0);
  EXPECT_EQ(q->ne, (std::vector<uint64_t>{64, 2}));
  ASSERT_EQ(q->nbytes, 4u * 34);
  for (int b = 0; b < 4; ++b) {  // 4 blocks of 32: F16 scale d, then 32 int8
    const uint8_t* blk = q->data + 34 * b;
    const double d = f16_to_double(blk);
    double amax = 0;
    for (int j = 0; j < 32; ++j) {
      const int i = 32 * b + j;
      amax = std::max(amax, std::abs(std::sin(0.1 * static_cast<float>(i)) * (i >= 64 ? 2.0 : 1.0)));
    }
    for (int j = 0; j < 32; ++j) {
      const int i = 32 * b + j;
      const double want = std::sin(static_cast<double>(0.1f * static_cast<float>(i))) * (i >= 64 ? 2 : 1);
      const double got = d * static_cast<int8_t>(blk[2 + j]);
      EXPECT_NEAR(got, want, 0.6 * amax / 127) << "value " << i;
    }
  }
}

}  // namespace
}  // namespace ssd
