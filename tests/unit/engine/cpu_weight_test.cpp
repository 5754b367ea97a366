// The CPU backend's prepared weights (runtime/backend/cpu/cpu_backend.cpp, CpuWeight): a float-path
// matrix is read from a copy of its rows, not from the bytes given (which may go away), and
// multiplies as the reference does; a block-quantized one keeps the given bytes for its embedding
// rows; a tensor prepared again while its first form lives shares that form.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/packed_matrix.h"
#include "runtime/backend/backend.h"
#include "runtime/io/tensor_ref.h"
#include "tests/support/huge_page_flags.h"
#include "tests/support/tensor_data.h"

namespace ssd {
namespace {

// [rows, cols] F32 values r - c / 8 in `storage`, as a tensor over it.
TensorRef f32_matrix(std::vector<float>& storage, int64_t rows, int64_t cols) {
  storage.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      storage[static_cast<size_t>(r * cols + c)] =
          static_cast<float>(r) - static_cast<float>(c) / 8;
  return test::matrix_ref(DType::F32, storage.data(), rows, cols);
}

TEST(CpuWeight, AFloatMatrixIsReadFromItsOwnCopyAndMultipliesAsTheReference) {
  auto cpu = make_cpu_backend(1);
  std::vector<float> storage;
  const TensorRef t = f32_matrix(storage, 40, 64);
  const Weight w = cpu->prepare_weight(t);
  ASSERT_NE(w.data, t.data) << "the float path reads a copy";
  EXPECT_EQ(std::memcmp(w.data, t.data, t.nbytes), 0);

  std::vector<float> x(2 * 64), want(2 * 40), got(2 * 40);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * static_cast<float>(i % 17) - 0.05f;
  kernels::WeightMatrix ref{DType::F32, t.data, 40, 64, t.row_bytes(), nullptr};
  kernels::matmul(ref, x.data(), want.data(), 2, nullptr);
  std::fill(storage.begin(), storage.end(), 0.0f);  // the given bytes are not read again
  cpu->matmul(w, x.data(), got.data(), 2);
  EXPECT_EQ(got, want) << "the same kernel on the same bytes: bit for bit";
}

TEST(CpuWeight, PreparedAgainWhileAliveSharesTheCopy) {
  auto cpu = make_cpu_backend(1);
  std::vector<float> storage;
  const TensorRef t = f32_matrix(storage, 16, 32);
  auto first = std::make_unique<Weight>(cpu->prepare_weight(t));
  const Weight again = cpu->prepare_weight(t);
  EXPECT_EQ(again.data, first->data);
  EXPECT_EQ(again.prepared, first->prepared);
  first.reset();
  const Weight third = cpu->prepare_weight(t);  // `again` still holds the copy
  EXPECT_EQ(third.data, again.data);
}

TEST(CpuWeight, AQuantizedMatrixKeepsTheGivenBytesForItsRows) {
  auto cpu = make_cpu_backend(1);
  // One Q8_0 row of 32 values: an f16 scale of 1.0 and codes 0..31.
  std::vector<uint8_t> block(34);
  block[0] = 0x00;
  block[1] = 0x3c;
  for (int i = 0; i < 32; ++i) block[2 + static_cast<size_t>(i)] = static_cast<uint8_t>(i);
  const TensorRef t = test::matrix_ref(DType::Q8_0, block.data(), 1, 32);
  const Weight w = cpu->prepare_weight(t);
  EXPECT_EQ(w.data, t.data) << "embedding lookups read the file's rows";
  EXPECT_NE(w.prepared, nullptr) << "the matmul reads its packed tiles";
}

TEST(CpuWeight, BothPreparedFormsAreMarkedForHugePages) {
  if (!test::thp_available()) GTEST_SKIP() << "this kernel has no transparent huge pages";
  auto cpu = make_cpu_backend(1);
  std::vector<float> storage;
  const Weight f = cpu->prepare_weight(f32_matrix(storage, 16, 32));
  EXPECT_TRUE(test::marked_for_huge_pages(f.data)) << test::vm_flags_of(f.data);
  std::vector<uint8_t> block(34, 1);  // one Q8_0 row
  const kernels::WeightMatrix q = kernels::prepare_matmul_weight(
      kernels::WeightMatrix{DType::Q8_0, block.data(), 1, 32, 34, nullptr});
  ASSERT_NE(q.packed, nullptr);
  const uint8_t* tiles = q.packed->tile(0);
  EXPECT_TRUE(test::marked_for_huge_pages(tiles)) << test::vm_flags_of(tiles);
}

}  // namespace
}  // namespace ssd
