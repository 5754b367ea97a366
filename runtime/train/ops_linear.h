// Linear layers for the trainer: y = x W^T with W stored [out, in] row-major (the checkpoint's
// Linear layout), forward and backward through OpenBLAS sgemm. Float32 throughout: the drafter is
// small and trained on CPUs, where float32 GEMMs are the fast path (no bf16 compute to exploit).
//
// Convention of every backward op in runtime/train: gradients are ADDED into the given buffers
// (callers zero them once per step), so several uses of one tensor simply accumulate.
#pragma once

#include <cstdint>

namespace ssd::train {

// y[n, out] = x[n, in] W[out, in]^T  (beta = 0: y is overwritten; 1: added to).
void linear_forward(const float* x, const float* w, float* y, int64_t n, int64_t in, int64_t out,
                    float beta = 0.0f);
// dx[n, in] += dy[n, out] W (skipped when dx is null); dw[out, in] += dy^T x (skipped when null).
void linear_backward(const float* dy, const float* x, const float* w, float* dx, float* dw,
                     int64_t n, int64_t in, int64_t out);

// Sets OpenBLAS's thread count (once, from --threads).
void set_blas_threads(int threads);

}  // namespace ssd::train
