// The one shim for code compiled both by nvcc (device kernels) and by the host compiler (their
// CPU twins). Everything in kernels/common/*.h is header-only, `SSD_HD` inline functions of plain
// arithmetic: the CUDA kernel and the CPU twin call the very same function, so a twin test on the
// CPU checks the arithmetic the GPU runs.
//
// Rounding: nvcc contracts a * b + c into one FMA by default (--fmad=true), the host build does
// not (-std=c++20 implies -ffp-contract=off in GCC, and the baseline x86-64 target has no FMA).
// Where a twin must match the CPU kernels bit for bit (dequantisation, RoPE, the sampler's exp),
// the products and sums go through mul_rn / add_rn below, which are __fmul_rn / __fadd_rn on the
// device (never contracted) and plain operators on the host. Elsewhere contraction is allowed and
// the tests state a tolerance.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define SSD_HD __host__ __device__ __forceinline__
#else
#define SSD_HD inline
#endif

namespace ssd::kernels::hd {

SSD_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

SSD_HD float f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

SSD_HD uint64_t f64_bits(double d) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
#endif
}

SSD_HD double f64_from_bits(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
#endif
}

// Correctly rounded float / double operations that the device compiler may not fuse.
SSD_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
SSD_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
SSD_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
SSD_HD double dmul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
SSD_HD double dadd_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
SSD_HD double dsub_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

}  // namespace ssd::kernels::hd
