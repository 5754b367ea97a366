// Independent check of the decoders against the PyPI `gguf` package: the fixture written by
// tests/reference/gguf_dequant_fixture.py holds random valid blocks of every quantized type (and
// F16/BF16 bit patterns, and rows of real tensors when SSD_MODEL was set) with the floats gguf's
// numpy dequantizers produce. ctest -R reference.kernels runs the script, then this test with
// SSD_KERNELS_GGUF_REF pointing at the file; run alone, it skips.
//
// Tolerance: exact (bit-identical, NaN == NaN) for ref::dequantize_row and for the dispatched
// dequantize_row on every ISA. Exactness holds because each value is an exact product of an f16
// scale and small integers (<= 24 significant bits) with at most one rounded addition (Q4_1's +m,
// Q4_K's -dmin*m), which numpy's float32 arithmetic rounds the same way. dot_row is checked
// against a float64 dot of gguf's values with the rowops_test.cpp tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

#include "kernel_test_util.h"

namespace ssd::kernels {
namespace {

struct Record {
  std::string name;
  uint32_t ggml_type = 0;
  std::vector<uint8_t> raw;
  std::vector<float> values;
};

template <class T>
bool read_pod(std::ifstream& f, T* v) {
  return static_cast<bool>(f.read(reinterpret_cast<char*>(v), sizeof(T)));
}

std::vector<Record> read_fixture(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f) << "cannot open " << path;
  char magic[8];
  uint32_t version = 0;
  f.read(magic, 8);
  read_pod(f, &version);
  EXPECT_EQ(std::string(magic, 8), "SSDGQREF") << path;
  EXPECT_EQ(version, 1u) << path;
  std::vector<Record> out;
  uint32_t name_len;
  while (read_pod(f, &name_len)) {
    Record r;
    r.name.resize(name_len);
    uint64_t n_values = 0, n_bytes = 0;
    f.read(r.name.data(), name_len);
    read_pod(f, &r.ggml_type);
    read_pod(f, &n_values);
    read_pod(f, &n_bytes);
    r.raw.resize(n_bytes);
    r.values.resize(n_values);
    f.read(reinterpret_cast<char*>(r.raw.data()), static_cast<std::streamsize>(n_bytes));
    f.read(reinterpret_cast<char*>(r.values.data()), static_cast<std::streamsize>(n_values * 4));
    EXPECT_TRUE(f) << "truncated record " << r.name << " in " << path;
    if (!f) break;
    out.push_back(std::move(r));
  }
  return out;
}

TEST(GgufReference, DequantizeMatchesGgufPackage) {
  const char* path = std::getenv("SSD_KERNELS_GGUF_REF");
  if (!path || !*path)
    GTEST_SKIP() << "SSD_KERNELS_GGUF_REF unset: run `ctest -R reference.kernels` (needs python3 "
                    "with numpy and gguf) to generate the fixture and run this check";
  if (!std::ifstream(path).good())
    GTEST_SKIP() << "fixture " << path << " was not generated (python3, numpy or gguf missing?)";
  test::IsaGuard guard;
  const auto records = read_fixture(path);
  ASSERT_GE(records.size(), 7u) << "fixture " << path << " is incomplete";
  std::mt19937 rng(4);
  for (const auto& r : records) {
    const auto tr = dtype_traits_from_ggml_id(r.ggml_type);
    ASSERT_TRUE(tr.has_value()) << r.name << ": unsupported GGML type " << r.ggml_type;
    const auto n = static_cast<int64_t>(r.values.size());
    ASSERT_EQ(r.raw.size(), dtype_row_bytes(tr->type, n)) << r.name;
    std::vector<float> got(n);
    ref::dequantize_row(tr->type, r.raw.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_TRUE(test::same_float(got[i], r.values[i]))
          << r.name << " (ref) value " << i << ": " << got[i] << " vs gguf " << r.values[i];
    bool finite = true;
    for (float v : r.values) finite = finite && std::isfinite(v);
    const auto x = test::random_floats(n, rng);
    double want = 0, abs_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      want += static_cast<double>(r.values[i]) * x[i];
      abs_sum += std::fabs(static_cast<double>(r.values[i]) * x[i]);
    }
    for (Isa isa : test::runnable_isas()) {
      force_isa(isa);
      dequantize_row(tr->type, r.raw.data(), got.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_TRUE(test::same_float(got[i], r.values[i]))
            << r.name << " (" << isa_name(isa) << ") value " << i << ": " << got[i] << " vs gguf "
            << r.values[i];
      if (finite) {
        EXPECT_NEAR(dot_row(tr->type, r.raw.data(), x.data(), n), want, 1e-5 * abs_sum + 1e-6)
            << r.name << " (" << isa_name(isa) << ")";
      }
    }
    std::printf("ok: %s (%lld values)\n", r.name.c_str(), static_cast<long long>(n));
  }
}

}  // namespace
}  // namespace ssd::kernels
