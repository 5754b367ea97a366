// Activations quantized to 8 bits for the integer matmul (packed_matmul.h): each block of 32
// values of a token gets one float scale d = amax / 127 and int8 codes q = round(x / d), so that
// x ~ d * q with |x - d * q| <= d / 2 (half a step). With the codes come the sums the weight
// formats need for their offsets: the integer sums of the codes per half block (Q4_0's -8,
// Q8_0's +128 bias and Q6_K's -32 offsets multiply them) and d times their total (Q4_1 / Q4_K
// minimums multiply it). Every term of a block's dot product is thus taken against the same
// rounded activations d * q: the matmul computes sum_i w_i (d q_i) exactly up to float32
// rounding, so its error is sum_i w_i (d q_i - x_i), weighted by the weights themselves. (Using
// the exact float sum of x for the minimums instead weights the error by w_i - m, which for Q4_1
// is all of one sign and about twice as large: measured on SmolLM2, it doubled the logit error.)
//
// The quantization is one scalar function, the same for every instruction set and for the
// reference twin, and it depends on nothing but the token's own values: a token's codes are the
// same whatever else is in the batch, which is what keeps the matmul deterministic per token.
// It runs once per matmul call (not per row or thread) into a buffer the caller keeps and reuses.
#pragma once

#include <cstdint>
#include <vector>

namespace ssd::kernels {

constexpr int kActBlock = 32;  // values per activation block (every weight block is a multiple)

// n tokens of `cols` values (cols a multiple of kActBlock), quantized. Views into the owning
// ActQ8Buffer; `blocks` = cols / kActBlock. Block-major: the n tokens' entries for one block are
// adjacent, so that a kernel walking the blocks of a weight row finds every token of its batch
// at a fixed offset from one pointer.
struct ActQ8 {
  int64_t n = 0, cols = 0, blocks = 0;
  const int8_t* q = nullptr;      // [blocks, n, 32]  codes in [-127, 127]
  const float* d = nullptr;       // [blocks, n]      scale: x ~ d * q
  const float* sum = nullptr;     // [blocks, n]      d * (sum of the block's codes), one rounding
  const int32_t* qsum = nullptr;  // [blocks, n, 2]   sum of the codes of values 0..15, 16..31

  // (always_inline: also used by the ISA-specific kernel files; see half.h for why.)
  [[gnu::always_inline]] int64_t at(int64_t t, int64_t b) const { return b * n + t; }
  [[gnu::always_inline]] const int8_t* codes(int64_t t, int64_t b) const {
    return q + at(t, b) * kActBlock;
  }
};

// Owns the storage of an ActQ8 and grows it on demand (never shrinks), so that a caller reusing
// one buffer allocates only while the shapes it sees grow.
class ActQ8Buffer {
 public:
  // Quantizes x: [n, cols] and returns the view (valid until the next call).
  const ActQ8& quantize(const float* x, int64_t n, int64_t cols);

 private:
  std::vector<int8_t> q_;
  std::vector<float> d_, sum_;
  std::vector<int32_t> qsum_;
  ActQ8 view_;
};

// One block of 32 values: codes, scale, the two half sums of the codes and d times their total.
// A non-finite input gives a NaN scale and sum and zero codes, so that it reaches the output.
void quantize_act_block(const float* x, int8_t* q, float* d, float* sum, int32_t* qsum);

}  // namespace ssd::kernels
