// F32 is copied as is; every other type goes through kernels::quantize_row so that test files
// hold exactly the bytes the runtime's own encoder produces (F16/BF16 round to nearest even).
#include "tests/support/tensor_data.h"

#include <cstring>

#include "kernels/cpu/rowops.h"
#include "runtime/core/error.h"

namespace ssd::test {

std::vector<float> random_floats(size_t n, uint64_t seed, float scale) {
  std::vector<float> out(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (auto& v : out) {
    // splitmix64: good enough spread for test data, and identical everywhere.
    s += 0x9E3779B97F4A7C15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) * 0x1p-24f;  // [0, 1)
    v = (2.0f * u - 1.0f) * scale;
  }
  return out;
}

std::vector<uint8_t> encode_tensor(DType t, std::span<const float> values, uint64_t row_len) {
  const auto& tr = dtype_traits(t);
  SSD_CHECK(row_len > 0 && row_len % tr.block_elems == 0,
            "encode_tensor: row length {} is not a positive multiple of the {} block size {}",
            row_len, tr.name, tr.block_elems);
  SSD_CHECK(values.size() % row_len == 0, "encode_tensor: {} values are not whole rows of {}",
            values.size(), row_len);
  const uint64_t rows = values.size() / row_len;
  const uint64_t row_bytes = dtype_row_bytes(t, row_len);
  std::vector<uint8_t> out(rows * row_bytes);
  if (t == DType::F32) {
    if (!values.empty()) std::memcpy(out.data(), values.data(), values.size() * sizeof(float));
    return out;
  }
  for (uint64_t r = 0; r < rows; ++r)
    kernels::quantize_row(t, values.data() + r * row_len, out.data() + r * row_bytes,
                          static_cast<int64_t>(row_len));
  return out;
}

TensorRef matrix_ref(DType t, const void* data, int64_t rows, int64_t cols) {
  TensorRef r;
  r.name = "w";
  r.type = t;
  r.ne = {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)};
  r.data = static_cast<const uint8_t*>(data);
  r.nbytes = r.row_bytes() * static_cast<uint64_t>(rows);
  return r;
}

}  // namespace ssd::test
