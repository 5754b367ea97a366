// Element-wise and per-row kernels of the CUDA backend: weight decoding, embedding, RMSNorm,
// RoPE, SwiGLU, adds, K/V stores. The arithmetic is kernels/common's (the CPU twins' code);
// these files only map it onto threads. Untested on a GPU so far (none here): the twin tests in
// tests/unit/device_math cover the arithmetic, tests/unit/cuda the kernels where a GPU exists.
#include <cmath>

#include "kernels/common/dequant.h"
#include "kernels/common/half_math.h"
#include "kernels/common/row_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"

namespace ssd::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t count) {
  return static_cast<unsigned>((count + kThreads - 1) / kThreads);
}

__global__ void dequant_to_bf16_kernel(DType type, const uint8_t* data, uint64_t row_bytes,
                                       int64_t rows, int64_t cols, uint16_t* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  out[i] = kernels::hd::fp32_to_bf16(kernels::hd::dequant_elem(type, data + r * row_bytes, c));
}

__global__ void embed_kernel(DType type, const uint8_t* table, uint64_t row_bytes, int64_t cols,
                             const int32_t* tokens, int64_t n, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * cols) return;
  const int64_t t = i / cols, c = i % cols;
  out[i] = kernels::hd::dequant_elem(type, table + tokens[t] * row_bytes, c);
}

// One block of kRowThreads per row; the float64 sum of squares in strided_tree_sum's order.
__global__ void rmsnorm_kernel(const float* x, const float* g, float* y, int64_t dim, float eps) {
  __shared__ double partial[kernels::hd::kRowThreads];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * dim;
  const int t = static_cast<int>(threadIdx.x);
  double acc = 0.0;
  for (int64_t i = t; i < dim; i += kernels::hd::kRowThreads)
    acc = kernels::hd::dadd_rn(acc, kernels::hd::dmul_rn(xr[i], xr[i]));
  partial[t] = acc;
  __syncthreads();
  for (int s = kernels::hd::kRowThreads / 2; s > 0; s /= 2) {
    if (t < s) partial[t] = kernels::hd::dadd_rn(partial[t], partial[t + s]);
    __syncthreads();
  }
  const float scale = kernels::hd::rms_inv_scale(partial[0], dim, eps);
  for (int64_t i = t; i < dim; i += kernels::hd::kRowThreads)
    yr[i] = kernels::hd::rmsnorm_apply(xr[i], scale, g[i]);  // y may alias x: read before write
}

// One thread per (token, head, pair).
__global__ void rope_kernel(float* x, int64_t n, int64_t n_heads, int64_t head_dim,
                            int64_t rot_dim, const int32_t* positions, const float* inv_freq,
                            bool neox) {
  const int64_t half = rot_dim / 2;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * n_heads * half) return;
  const int64_t pair = i % half, th = i / half;  // th = token * n_heads + head
  const int64_t t = th / n_heads;
  const double theta = kernels::hd::rope_theta(static_cast<float>(positions[t]), inv_freq[pair]);
  int64_t ia = 0, ib = 0;
  kernels::hd::rope_pair_index(neox, pair, rot_dim, &ia, &ib);
  float* xh = x + th * head_dim;
  kernels::hd::rope_pair(xh[ia], xh[ib], static_cast<float>(cos(theta)),
                         static_cast<float>(sin(theta)));
}

__global__ void swiglu_kernel(const float* gate, const float* up, float* out, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) out[i] = kernels::hd::swiglu(gate[i], up[i]);
}

__global__ void silu_kernel(float* m, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) m[i] = kernels::hd::silu(m[i]);
}

__global__ void add_kernel(float* y, const float* x, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) y[i] = kernels::hd::add_rn(y[i], x[i]);
}

__global__ void add_bias_kernel(float* y, const float* b, int64_t rows, int64_t cols) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < rows * cols) y[i] = kernels::hd::add_rn(y[i], b[i % cols]);
}

__global__ void f32_to_bf16_kernel(const float* x, uint16_t* y, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) y[i] = kernels::hd::fp32_to_bf16(x[i]);
}

__global__ void store_kv_kernel(float* pool, const int64_t* k_off, int64_t v_off, const float* k,
                                const float* v, int64_t n, int64_t row) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * row) return;
  const int64_t t = i / row, c = i % row;
  pool[k_off[t] + c] = k[i];
  pool[k_off[t] + v_off + c] = v[i];
}

__global__ void gru_update_kernel(const float* gi, const float* gh, float* state, int64_t n,
                                  int64_t g) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * g) return;
  const int64_t j = i / g, u = i % g;
  const float* xi = gi + j * 3 * g;
  const float* hh = gh + j * 3 * g;
  state[i] = kernels::hd::gru_unit(xi[u], xi[g + u], xi[2 * g + u], hh[u], hh[g + u],
                                   hh[2 * g + u], state[i]);
}

}  // namespace

void launch_dequant_to_bf16(DType type, const uint8_t* data, uint64_t row_bytes, int64_t rows,
                            int64_t cols, uint16_t* out, cudaStream_t s) {
  if (rows * cols == 0) return;
  dequant_to_bf16_kernel<<<blocks_for(rows * cols), kThreads, 0, s>>>(type, data, row_bytes, rows,
                                                                       cols, out);
  SSD_CUDA_LAUNCHED();
}

void launch_embed(DType type, const uint8_t* table, uint64_t row_bytes, int64_t cols,
                  const int32_t* tokens, int64_t n, float* out, cudaStream_t s) {
  if (n * cols == 0) return;
  embed_kernel<<<blocks_for(n * cols), kThreads, 0, s>>>(type, table, row_bytes, cols, tokens, n,
                                                          out);
  SSD_CUDA_LAUNCHED();
}

void launch_rmsnorm(const float* x, const float* g, float* y, int64_t rows, int64_t dim,
                    float eps, cudaStream_t s) {
  if (rows == 0) return;
  rmsnorm_kernel<<<static_cast<unsigned>(rows), kernels::hd::kRowThreads, 0, s>>>(x, g, y, dim,
                                                                                  eps);
  SSD_CUDA_LAUNCHED();
}

void launch_rope(float* x, int64_t n, int64_t n_heads, int64_t head_dim, int64_t rot_dim,
                 const int32_t* positions, const float* inv_freq, bool neox, cudaStream_t s) {
  const int64_t count = n * n_heads * (rot_dim / 2);
  if (count == 0) return;
  rope_kernel<<<blocks_for(count), kThreads, 0, s>>>(x, n, n_heads, head_dim, rot_dim, positions,
                                                      inv_freq, neox);
  SSD_CUDA_LAUNCHED();
}

void launch_swiglu(const float* gate, const float* up, float* out, int64_t count,
                   cudaStream_t s) {
  if (count == 0) return;
  swiglu_kernel<<<blocks_for(count), kThreads, 0, s>>>(gate, up, out, count);
  SSD_CUDA_LAUNCHED();
}

void launch_silu(float* m, int64_t count, cudaStream_t s) {
  if (count == 0) return;
  silu_kernel<<<blocks_for(count), kThreads, 0, s>>>(m, count);
  SSD_CUDA_LAUNCHED();
}

void launch_add(float* y, const float* x, int64_t count, cudaStream_t s) {
  if (count == 0) return;
  add_kernel<<<blocks_for(count), kThreads, 0, s>>>(y, x, count);
  SSD_CUDA_LAUNCHED();
}

void launch_add_bias(float* y, const float* b, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows * cols == 0) return;
  add_bias_kernel<<<blocks_for(rows * cols), kThreads, 0, s>>>(y, b, rows, cols);
  SSD_CUDA_LAUNCHED();
}

void launch_f32_to_bf16(const float* x, uint16_t* y, int64_t count, cudaStream_t s) {
  if (count == 0) return;
  f32_to_bf16_kernel<<<blocks_for(count), kThreads, 0, s>>>(x, y, count);
  SSD_CUDA_LAUNCHED();
}

void launch_store_kv(float* pool, const int64_t* k_off, int64_t v_off, const float* k,
                     const float* v, int64_t n, int64_t row, cudaStream_t s) {
  if (n * row == 0) return;
  store_kv_kernel<<<blocks_for(n * row), kThreads, 0, s>>>(pool, k_off, v_off, k, v, n, row);
  SSD_CUDA_LAUNCHED();
}

void launch_gru_update(const float* gi, const float* gh, float* state, int64_t n, int64_t g,
                       cudaStream_t s) {
  if (n * g == 0) return;
  gru_update_kernel<<<blocks_for(n * g), kThreads, 0, s>>>(gi, gh, state, n, g);
  SSD_CUDA_LAUNCHED();
}

}  // namespace ssd::cuda
