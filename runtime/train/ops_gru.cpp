// GRU step forward/backward (see ops_gru.h).
#include "runtime/train/ops_gru.h"

#include <algorithm>
#include <cmath>

#include "runtime/train/ops_linear.h"
#include "runtime/train/ops_pointwise.h"

namespace ssd::train {

void gru_forward(const GruWeights& w, const float* x, const float* s_in, float* s_out, int64_t n,
                 int64_t d, int64_t g, GruStepCache& c) {
  c.x.assign(x, x + n * d);
  c.s.assign(s_in, s_in + n * g);
  c.gi.resize(n * 3 * g);
  c.gh.resize(n * 3 * g);
  linear_forward(x, w.w_ih, c.gi.data(), n, d, 3 * g);
  linear_forward(s_in, w.w_hh, c.gh.data(), n, g, 3 * g);
  for (int64_t j = 0; j < n; ++j) {
    float* gi = c.gi.data() + j * 3 * g;
    float* gh = c.gh.data() + j * 3 * g;
    for (int64_t u = 0; u < 3 * g; ++u) {
      gi[u] += w.b_ih[u];
      gh[u] += w.b_hh[u];
    }
    for (int64_t u = 0; u < g; ++u) {
      const float r = sigmoidf(gi[u] + gh[u]);
      const float z = sigmoidf(gi[g + u] + gh[g + u]);
      const float nn = std::tanh(gi[2 * g + u] + r * gh[2 * g + u]);
      s_out[j * g + u] = (1.0f - z) * nn + z * s_in[j * g + u];
    }
  }
}

void gru_backward(const GruWeights& w, const GruStepCache& c, const float* ds_out, float* ds_in,
                  float* dx, GruGrads& gr, int64_t n, int64_t d, int64_t g) {
  std::vector<float> dgi(n * 3 * g), dgh(n * 3 * g);
  for (int64_t j = 0; j < n; ++j) {
    const float* gi = c.gi.data() + j * 3 * g;
    const float* gh = c.gh.data() + j * 3 * g;
    float* dgij = dgi.data() + j * 3 * g;
    float* dghj = dgh.data() + j * 3 * g;
    for (int64_t u = 0; u < g; ++u) {
      const float r = sigmoidf(gi[u] + gh[u]);
      const float z = sigmoidf(gi[g + u] + gh[g + u]);
      const float nn = std::tanh(gi[2 * g + u] + r * gh[2 * g + u]);
      const float dso = ds_out[j * g + u];
      const float dn = dso * (1.0f - z);
      const float dz = dso * (c.s[j * g + u] - nn);
      ds_in[j * g + u] = dso * z;
      const float dpn = dn * (1.0f - nn * nn);
      const float dpz = dz * z * (1.0f - z);
      const float dpr = dpn * gh[2 * g + u] * r * (1.0f - r);
      dgij[u] = dpr;
      dghj[u] = dpr;
      dgij[g + u] = dpz;
      dghj[g + u] = dpz;
      dgij[2 * g + u] = dpn;
      dghj[2 * g + u] = dpn * r;
    }
    for (int64_t u = 0; u < 3 * g; ++u) {
      gr.b_ih[u] += dgij[u];
      gr.b_hh[u] += dghj[u];
    }
  }
  linear_backward(dgi.data(), c.x.data(), w.w_ih, dx, gr.w_ih, n, d, 3 * g);
  linear_backward(dgh.data(), c.s.data(), w.w_hh, ds_in, gr.w_hh, n, g, 3 * g);
}

}  // namespace ssd::train
