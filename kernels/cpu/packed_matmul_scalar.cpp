// The integer matmul in baseline x86-64 code: one row per "lane", a 16-row tile in 16 passes. A
// step is one row's 4 codes (a uint32) times 4 activation codes. The float operations are the
// same IEEE operations as the SIMD lanes (std::fma is correctly rounded), so the results are
// bitwise those of the AVX2 and AVX-512 kernels. Used on CPUs without AVX2 and as the lowest
// rung of force_isa.
#include <cmath>

#include "kernels/cpu/half.h"
#include "kernels/cpu/packed_matmul_impl.h"

namespace ssd::kernels::detail {
namespace {

struct V1 {
  static constexpr int kLanes = 1;
  static constexpr int kMaxTokens = 4;
  static constexpr bool kQ8Biased = false;
  using F = float;
  using I = int32_t;
  using B = uint32_t;
  using Q8 = uint32_t;  // the biased bytes

  static int32_t u8(uint32_t v, int k) { return static_cast<int32_t>((v >> (8 * k)) & 0xff); }

  static B load_b(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  static B nib_lo(B v) { return v & 0x0f0f0f0fu; }
  static B nib_hi(B v) { return (v >> 4) & 0x0f0f0f0fu; }
  template <int O>
  static B q6_high(B n, B h) {
    const B s = O == 0 ? h << 4 : O == 1 ? h << 2 : O == 2 ? h : h >> 2;
    return n | (s & 0x30303030u);
  }
  static I zero_i() { return 0; }
  static I dot_u(I acc, B w, const int8_t* x) {
    for (int k = 0; k < 4; ++k) acc += u8(w, k) * x[k];
    return acc;
  }
  static Q8 prep_q8(B b) { return b; }
  static I dot_q8(I acc, Q8 w, const int8_t* x) {
    for (int k = 0; k < 4; ++k) acc += (u8(w, k) - 128) * x[k];
    return acc;
  }
  static I add_i(I a, I b) { return a + b; }
  static I sub_i(I a, int32_t v) { return a - v; }

  static F zero_f() { return 0.0f; }
  static F set1(float v) { return v; }
  static F cvt(I v) { return static_cast<float>(v); }
  static F mul(F a, F b) { return a * b; }
  static F fma(F a, F b, F c) { return std::fma(a, b, c); }
  static F fnma(F a, F b, F c) { return std::fma(-a, b, c); }
  static F load_h(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return fp16_to_fp32(h);
  }
  static F load_u8(const uint8_t* p) { return static_cast<float>(*p); }
  static F load_i8(const uint8_t* p) { return static_cast<float>(static_cast<int8_t>(*p)); }
  static void store(float* p, F v) { *p = v; }
};

}  // namespace

PackedKernel scalar_packed_kernel(DType t) { return packed::kernel_for<V1>(t); }

}  // namespace ssd::kernels::detail
