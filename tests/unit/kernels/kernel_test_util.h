// Shared helpers of the kernel tests: random but valid rows (and matrices) of every weight type,
// the list of instruction sets this CPU can run (each dispatched kernel is tested on all of
// them), and a float comparison that treats two NaNs as equal and +0 / -0 as different.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/half.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/rowops.h"
#include "runtime/core/dtype.h"
#include "runtime/io/tensor_ref.h"

namespace ssd::kernels::test {

inline constexpr DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,
                                      DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q6_K};

inline std::vector<Isa> runnable_isas() {
  std::vector<Isa> v = {Isa::Scalar};
  if (detected_isa() != Isa::Scalar) v.push_back(Isa::Avx2);
  if (detected_isa() >= Isa::Avx512) v.push_back(Isa::Avx512);
  if (detected_isa() == Isa::Amx) v.push_back(Isa::Amx);
  return v;
}

// Restores the detected ISA when a test that forced a lower one ends (even on failure).
struct IsaGuard {
  ~IsaGuard() { force_isa(detected_isa()); }
};

inline bool same_float(float a, float b) {
  if (a != a || b != b) return a != a && b != b;
  return float_bits(a) == float_bits(b);
}

// A random f16 scale of magnitude in [lo, hi), random sign if `signed_`.
inline uint16_t random_scale(std::mt19937& rng, float lo, float hi, bool signed_) {
  std::uniform_real_distribution<float> u(lo, hi);
  float v = u(rng);
  if (signed_ && (rng() & 1)) v = -v;
  return fp32_to_fp16(v);
}

// One row of `cols` values of type t: floats ~ N(0, 1) for the float types; random quants and
// scales of a realistic size (|value| around 0.01 .. 1) for the block types.
inline std::vector<uint8_t> random_row(DType t, int64_t cols, std::mt19937& rng) {
  std::vector<uint8_t> out(dtype_row_bytes(t, static_cast<uint64_t>(cols)));
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (auto& b : out) b = static_cast<uint8_t>(rng());  // quants: every bit pattern is valid
  uint8_t* p = out.data();
  const int64_t nb = cols / dtype_traits(t).block_elems;
  switch (t) {
    case DType::F32:
      for (int64_t i = 0; i < cols; ++i) {
        const float v = g(rng);
        std::memcpy(p + 4 * i, &v, 4);
      }
      break;
    case DType::F16:
    case DType::BF16:
      for (int64_t i = 0; i < cols; ++i) {
        const uint16_t h = t == DType::F16 ? fp32_to_fp16(g(rng)) : fp32_to_bf16(g(rng));
        std::memcpy(p + 2 * i, &h, 2);
      }
      break;
    case DType::Q8_0:
      for (int64_t i = 0; i < nb; ++i)
        reinterpret_cast<BlockQ8_0*>(p)[i].d = random_scale(rng, 1e-3f, 1e-2f, true);
      break;
    case DType::Q4_0:
      for (int64_t i = 0; i < nb; ++i)
        reinterpret_cast<BlockQ4_0*>(p)[i].d = random_scale(rng, 1e-2f, 1e-1f, true);
      break;
    case DType::Q4_1:
      for (int64_t i = 0; i < nb; ++i) {
        reinterpret_cast<BlockQ4_1*>(p)[i].d = random_scale(rng, 1e-2f, 1e-1f, false);
        reinterpret_cast<BlockQ4_1*>(p)[i].m = random_scale(rng, 0.1f, 1.0f, true);
      }
      break;
    case DType::Q4_K:
      for (int64_t i = 0; i < nb; ++i) {
        reinterpret_cast<BlockQ4_K*>(p)[i].d = random_scale(rng, 1e-4f, 1e-3f, false);
        reinterpret_cast<BlockQ4_K*>(p)[i].dmin = random_scale(rng, 1e-4f, 1e-3f, false);
      }
      break;
    case DType::Q6_K:
      for (int64_t i = 0; i < nb; ++i)
        reinterpret_cast<BlockQ6_K*>(p)[i].d = random_scale(rng, 1e-4f, 1e-3f, false);
      break;
  }
  return out;
}

// A [rows, cols] weight tensor of random_row rows, its bytes kept in `bytes` (which the returned
// reference points into).
inline TensorRef random_matrix(DType t, int64_t rows, int64_t cols, std::vector<uint8_t>& bytes,
                               std::mt19937& rng) {
  bytes.clear();
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<uint8_t> row = random_row(t, cols, rng);
    bytes.insert(bytes.end(), row.begin(), row.end());
  }
  TensorRef ref;
  ref.name = "w";
  ref.type = t;
  ref.ne = {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)};
  ref.data = bytes.data();
  ref.nbytes = bytes.size();
  return ref;
}

inline std::vector<float> random_floats(int64_t n, std::mt19937& rng, float sigma = 1.0f) {
  std::normal_distribution<float> g(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = g(rng);
  return v;
}

// `positions` K and V rows of `row` floats each, at shuffled places of one buffer (as a paged KV
// cache hands them out): k[p] / v[p] are position p's rows.
struct ShuffledKvRows {
  std::vector<float> store;
  std::vector<const float*> k, v;
  ShuffledKvRows(int64_t positions, int64_t row, std::mt19937& rng)
      : store(random_floats(2 * positions * row, rng)) {
    std::vector<int64_t> slot(static_cast<size_t>(2 * positions));
    std::iota(slot.begin(), slot.end(), 0);
    std::shuffle(slot.begin(), slot.end(), rng);
    for (int64_t p = 0; p < positions; ++p) {
      k.push_back(store.data() + slot[2 * p] * row);
      v.push_back(store.data() + slot[2 * p + 1] * row);
    }
  }
};

}  // namespace ssd::kernels::test
