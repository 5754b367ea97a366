// RMSNorm for the trainer: y = x / sqrt(mean(x^2) + eps) * g, row by row, as the runtime's
// rmsnorm kernel. The forward keeps each row's 1 / rms for the backward.
#pragma once

#include <cstdint>

namespace ssd::train {

// x, y: [n, dim]; g: [dim]; rstd: [n] (out). y may alias x.
void rmsnorm_forward(const float* x, const float* g, float* y, float* rstd, int64_t n,
                     int64_t dim, float eps);
// dx[n, dim] += d/dx, dg[dim] += d/dg (dg may be null) given dy and the forward's x and rstd.
void rmsnorm_backward(const float* dy, const float* x, const float* g, const float* rstd,
                      float* dx, float* dg, int64_t n, int64_t dim);

}  // namespace ssd::train
