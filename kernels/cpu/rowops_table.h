// Internal to kernels/cpu: the per-ISA kernel tables behind the dispatched row operations of
// rowops.h and matmul.h. Each instruction-set file (rowops_scalar.cpp, rowops_avx2.cpp,
// rowops_avx512.cpp) fills one table per weight type; rowops.cpp picks the table of the active
// ISA. The multi-token dot is the primitive matmul's float path is built on: it decodes each
// block of a weight row once, in registers, and multiplies it with up to kMaxDotTokens
// activation rows. The packed tile kernel is the primitive of the integer path
// (packed_matmul_impl.h, one instance per ISA in packed_matmul_<isa>.cpp).
#pragma once

#include <cstdint>

#include "kernels/cpu/rowops.h"
#include "runtime/core/dtype.h"

namespace ssd::kernels {
struct ActQ8;
struct PackedMatrix;
}  // namespace ssd::kernels

namespace ssd::kernels::detail {

constexpr int kMaxDotTokens = 4;

// dst[0, n) = decoded row. n is a multiple of the type's block size.
using DequantizeFn = void (*)(const uint8_t* row, float* dst, int64_t n);
// out[t] = sum_i row[i] * x[t * x_stride + i] for t < n_tok (1 <= n_tok <= kMaxDotTokens).
using DotFn = void (*)(const uint8_t* row, const float* x, int64_t x_stride, int n_tok, int64_t n,
                       float* out);

struct TypeKernels {
  DequantizeFn dequantize = nullptr;
  DotFn dot = nullptr;
};

// Tables for one ISA; null for a type that ISA does not implement (falls back to scalar).
const TypeKernels* scalar_kernels(DType t);
const TypeKernels* avx2_kernels(DType t);
const TypeKernels* avx512_kernels(DType t);

// The kernels of type t for the active ISA (never null for a supported type).
const TypeKernels& active_kernels(DType t);

// y[(t0 + i) * ldy + r] for i < nt (1 <= nt <= max_tokens) and every real row r of tile `tile`.
using PackedTileFn = void (*)(const PackedMatrix& p, int64_t tile, const ActQ8& a, int64_t t0,
                              int nt, float* y, int64_t ldy);
struct PackedKernel {
  PackedTileFn tile = nullptr;
  int max_tokens = 0;  // tokens per call: as many as the ISA keeps accumulators in registers for
};
PackedKernel scalar_packed_kernel(DType t);
PackedKernel avx2_packed_kernel(DType t);
PackedKernel avx512_packed_kernel(DType t);
PackedKernel amx_packed_kernel(DType t);  // many tokens on AMX tiles, fewer on avx512's
// For the active ISA; tile is null for a type without an integer kernel.
PackedKernel active_packed_kernel(DType t);

}  // namespace ssd::kernels::detail
