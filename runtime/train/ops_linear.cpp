// sgemm calls behind the trainer's linear layers (see ops_linear.h).
#include "runtime/train/ops_linear.h"

#include <cblas.h>

namespace ssd::train {

void linear_forward(const float* x, const float* w, float* y, int64_t n, int64_t in, int64_t out,
                    float beta) {
  if (n == 0 || out == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(out),
              static_cast<int>(in), 1.0f, x, static_cast<int>(in), w, static_cast<int>(in), beta, y,
              static_cast<int>(out));
}

void linear_backward(const float* dy, const float* x, const float* w, float* dx, float* dw,
                     int64_t n, int64_t in, int64_t out) {
  if (n == 0 || out == 0 || in == 0) return;
  if (dx)  // [n, out] x [out, in]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n),
                static_cast<int>(in), static_cast<int>(out), 1.0f, dy, static_cast<int>(out), w,
                static_cast<int>(in), 1.0f, dx, static_cast<int>(in));
  if (dw)  // [out, n] x [n, in]
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(out),
                static_cast<int>(in), static_cast<int>(n), 1.0f, dy, static_cast<int>(out), x,
                static_cast<int>(in), 1.0f, dw, static_cast<int>(in));
}

void set_blas_threads(int threads) { openblas_set_num_threads(threads); }

}  // namespace ssd::train
