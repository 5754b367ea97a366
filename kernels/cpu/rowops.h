// Row-level kernels over one weight type: decode a row to float, dot a row with float
// activations, and encode floats into a type (the reference quantizers, used by the test model
// writers and by tools). Each has a scalar reference twin in namespace ref; the dispatched
// versions pick the best instruction set of this CPU once (AMX, AVX-512, AVX2+FMA, or scalar).
#pragma once

#include <cstdint>

#include "runtime/core/dtype.h"

namespace ssd::kernels {

// Amx: AVX-512 as above plus the AMX tile unit (AMX-TILE and AMX-INT8, and the kernel's permission
// to use its state); only the integer matmul of many tokens differs (packed_matmul_amx.cpp).
enum class Isa { Scalar, Avx2, Avx512, Amx };
Isa detected_isa();       // what this CPU supports
Isa active_isa();         // what the dispatched kernels use (detected unless forced)
void force_isa(Isa isa);  // tests: run the dispatched kernels on a lower ISA
const char* isa_name(Isa isa);

// n values of row `src` (of type t) to float. n is a multiple of the block size.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
// sum_i row[i] * x[i] over n values.
float dot_row(DType t, const void* row, const float* x, int64_t n);
// Encode n floats as type t: GGML's block formats, each value rounded to the nearest step of its
// block's stored scale, scales chosen so that no value is clipped (error bounds are stated in
// tests/unit/kernels/quantize_test.cpp). Throws on non-finite input to a block type, or on a
// scale beyond the f16 range.
void quantize_row(DType t, const float* src, void* dst, int64_t n);

// Scalar reference twins: one element at a time from the layouts in quant_blocks.h; dot_row
// accumulates in float64. The dispatched dequantize_row is bit-identical to ref::dequantize_row.
namespace ref {
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
double dot_row(DType t, const void* row, const float* x, int64_t n);
}  // namespace ref

}  // namespace ssd::kernels
