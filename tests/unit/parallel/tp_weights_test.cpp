// Weight slicing for tensor parallelism (runtime/parallel/tp_weights.h): row slices point into
// the original bytes; column slices are copies, in the stored type when both ends fall on block
// boundaries and decoded to F32 otherwise. Checked exactly: slicing moves or decodes stored
// values, it never computes new ones.
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/cpu/rowops.h"
#include "runtime/core/error.h"
#include "runtime/parallel/tp_weights.h"
#include "tests/support/tensor_data.h"

namespace ssd {
namespace {

// A [rows, cols] matrix of random values stored as `type`.
struct Matrix {
  std::vector<uint8_t> bytes;
  TensorRef ref;
  Matrix(DType type, int64_t rows, int64_t cols) {
    const std::vector<float> v = test::random_floats(rows * cols, 11, 1.0f);
    const uint64_t rb = dtype_row_bytes(type, cols);
    bytes.resize(rb * rows);
    for (int64_t r = 0; r < rows; ++r)
      kernels::quantize_row(type, v.data() + r * cols, bytes.data() + r * rb, cols);
    ref.name = "w";
    ref.type = type;
    ref.ne = {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)};
    ref.data = bytes.data();
    ref.nbytes = bytes.size();
  }
  // Row r decoded.
  std::vector<float> row(int64_t r) const {
    std::vector<float> out(ref.ne[0]);
    kernels::dequantize_row(ref.type, ref.data + r * ref.row_bytes(), out.data(), ref.ne[0]);
    return out;
  }
};

std::vector<float> decoded_row(const TensorRef& t, int64_t r) {
  std::vector<float> out(t.ne[0]);
  kernels::dequantize_row(t.type, t.data + r * t.row_bytes(), out.data(), t.ne[0]);
  return out;
}

TEST(TpWeights, RowSlicePointsIntoTheOriginal) {
  const Matrix m(DType::Q4_1, 5, 64);
  const TensorRef s = slice_rows(m.ref, 1, 4);
  EXPECT_EQ(s.ne, (std::vector<uint64_t>{64, 3}));
  EXPECT_EQ(s.type, DType::Q4_1);
  EXPECT_EQ(s.data, m.ref.data + m.ref.row_bytes());
  EXPECT_EQ(s.nbytes, 3 * m.ref.row_bytes());
  EXPECT_THROW(slice_rows(m.ref, 3, 6), Error);
  EXPECT_THROW(slice_rows(m.ref, 2, 2), Error);
}

TEST(TpWeights, BlockAlignedColumnSliceKeepsTheStoredType) {
  const Matrix m(DType::Q8_0, 4, 128);
  TpWeightBuffers store;
  const TensorRef s = slice_cols(m.ref, 32, 96, store);
  EXPECT_EQ(s.type, DType::Q8_0);
  EXPECT_EQ(s.ne, (std::vector<uint64_t>{64, 4}));
  EXPECT_EQ(store.bytes(), static_cast<int64_t>(4 * dtype_row_bytes(DType::Q8_0, 64)));
  for (int64_t r = 0; r < 4; ++r) {
    const std::vector<float> full = m.row(r), part = decoded_row(s, r);
    EXPECT_EQ(part, std::vector<float>(full.begin() + 32, full.begin() + 96)) << "row " << r;
  }
}

TEST(TpWeights, MisalignedColumnSliceIsDecodedToF32) {
  const Matrix m(DType::Q4_1, 3, 96);
  TpWeightBuffers store;
  const TensorRef s = slice_cols(m.ref, 16, 80, store);  // 16 and 80 are mid-block
  EXPECT_EQ(s.type, DType::F32);
  EXPECT_EQ(s.ne, (std::vector<uint64_t>{64, 3}));
  for (int64_t r = 0; r < 3; ++r) {
    const std::vector<float> full = m.row(r), part = decoded_row(s, r);
    EXPECT_EQ(part, std::vector<float>(full.begin() + 16, full.begin() + 80)) << "row " << r;
  }
  EXPECT_THROW(slice_cols(m.ref, 90, 100, store), Error);
}

}  // namespace
}  // namespace ssd
