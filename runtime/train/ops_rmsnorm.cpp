// RMSNorm forward/backward (see ops_rmsnorm.h). Row sums in float64: rows are up to a few
// thousand wide and the backward's mean(dxhat * xhat) is a small difference of large terms.
#include "runtime/train/ops_rmsnorm.h"

#include <cmath>

namespace ssd::train {

void rmsnorm_forward(const float* x, const float* g, float* y, float* rstd, int64_t n,
                     int64_t dim, float eps) {
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x + r * dim;
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float s = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
    rstd[r] = s;
    float* yr = y + r * dim;
    for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * s * g[i];
  }
}

void rmsnorm_backward(const float* dy, const float* x, const float* g, const float* rstd,
                      float* dx, float* dg, int64_t n, int64_t dim) {
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x + r * dim;
    const float* dyr = dy + r * dim;
    const float s = rstd[r];
    double dot = 0;  // sum_i dxhat_i * xhat_i
    for (int64_t i = 0; i < dim; ++i) {
      const float xhat = xr[i] * s;
      if (dg) dg[i] += dyr[i] * xhat;
      dot += static_cast<double>(dyr[i]) * g[i] * xhat;
    }
    const float mean = static_cast<float>(dot / static_cast<double>(dim));
    float* dxr = dx + r * dim;
    for (int64_t i = 0; i < dim; ++i) dxr[i] += s * (dyr[i] * g[i] - xr[i] * s * mean);
  }
}

}  // namespace ssd::train
