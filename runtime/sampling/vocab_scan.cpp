// Whole-vocabulary passes of the sampler (see vocab_scan.h for the why).
//
// Vectorisation notes: the project builds for baseline x86-64 (SSE2), and GCC with its default
// -ftrapping-math will not vectorise a floating-point compare-and-select. So the loops below
// keep selects out of the hot loops: the exp polynomial runs unconditionally over every token
// (garbage for invalid inputs is harmless, there are no traps) and a separate scalar pass with a
// well-predicted branch zeroes the invalid ones. glibc's exp is scalar (~15-20 cycles); the
// polynomial below vectorises two-wide and is about twice as fast on a 49k vocabulary.
#include "runtime/sampling/vocab_scan.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <utility>

#include "kernels/common/blocked_scan.h"

namespace ssd::sampling_detail {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// exp(x) for x in [kMinExponent, 0]: x = k ln2 + r with |r| <= ln2 / 2 (Cody-Waite split of ln2
// so that k * ln2_hi is exact), e^r by its Taylor series to degree 13 (truncation < 2e-16 on
// that interval), times 2^k built in the exponent field. Measured against glibc exp on
// [-708, 0]: max relative difference 2.2e-16 (2 ulp).
inline double exp_nonpositive(double x) {
  constexpr double kShift = 0x1.8p52;                       // rounds to an integer in low bits
  constexpr double kLog2e = 0x1.71547652b82fep0;
  constexpr double kLn2Hi = 0x1.62e42fee00000p-1;           // ln 2 = kLn2Hi + kLn2Lo
  constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;
  const double shifted = x * kLog2e + kShift;
  const double k = shifted - kShift;                        // round(x / ln 2)
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;
  double p = 1.0 / 6227020800.0;                            // 1/13!
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  // The integer k sits in the low bits of `shifted`; move k + 1023 into the exponent field.
  const uint64_t biased = std::bit_cast<uint64_t>(shifted) - std::bit_cast<uint64_t>(kShift) + 1023;
  return p * std::bit_cast<double>(biased << 52);
}

inline bool exponent_ok(double x) { return x >= kMinExponent; }  // false for NaN and -inf too

}  // namespace

float max_logit(const float* l, int32_t n) {
  // Eight running maxima, so that the compiler keeps them in vector registers.
  float m8[8];
  std::fill(m8, m8 + 8, -kInf);
  int32_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) m8[j] = l[i + j] > m8[j] ? l[i + j] : m8[j];
  float m = -kInf;
  for (; i < n; ++i) m = l[i] > m ? l[i] : m;
  for (int j = 0; j < 8; ++j) m = m8[j] > m ? m8[j] : m;
  return m;
}

double relative_exp(const float* logits, int32_t n, float l_max, double t, double* e, double* x) {
  const double lm = l_max;
  for (int32_t i = 0; i < n; ++i) x[i] = (static_cast<double>(logits[i]) - lm) / t;
  for (int32_t i = 0; i < n; ++i) e[i] = exp_nonpositive(x[i]);
  for (int32_t i = 0; i < n; ++i)
    if (!exponent_ok(x[i])) e[i] = 0;
  return blocked_total(e, n, x);
}

double blocked_total(const double* e, int32_t n, double* scratch) {
  namespace hd = kernels::hd;
  constexpr int64_t kC = hd::kScanChunk, kWays = 4;
  const int64_t m = hd::scan_chunks(n), full = n / kC;
  // Chunk totals, kWays chunks at a time so that their addition chains overlap; each chunk is
  // still summed left to right from 0, as chunk_total() does.
  int64_t c = 0;
  for (; c + kWays <= full; c += kWays) {
    double s[kWays] = {};
    for (int64_t j = 0; j < kC; ++j)
      for (int64_t w = 0; w < kWays; ++w) s[w] += e[(c + w) * kC + j];
    for (int64_t w = 0; w < kWays; ++w) scratch[c + w] = s[w];
  }
  auto ev = [e](int64_t i) { return e[i]; };
  for (; c < m; ++c) scratch[c] = hd::chunk_total(c, n, ev);
  hd::exclusive_tree_scan(scratch, m);
  return hd::blocked_sum(scratch, n, ev);
}

double relative_exp_one(float logit, float l_max, double t) {
  const double x = (static_cast<double>(logit) - static_cast<double>(l_max)) / t;
  return exponent_ok(x) ? exp_nonpositive(x) : 0.0;
}

double mass_floor(const double* e, int32_t n, double aim) {
  constexpr int kBinades = 1024;  // b = 1023 - exponent field; the last collects subnormals, 0
  std::array<double, kBinades> mass{};
  for (int32_t i = 0; i < n; ++i) {
    const int exp_bits = static_cast<int>((std::bit_cast<uint64_t>(e[i]) >> 52) & 0x7ff);
    mass[std::clamp(1023 - exp_bits, 0, kBinades - 1)] += e[i];
  }
  double acc = 0;
  for (int b = 0; b < kBinades - 1; ++b) {
    acc += mass[b];
    if (acc >= aim) return std::ldexp(1.0, -b);
  }
  return 0;
}

uint64_t order_key(float logit, int32_t id) {
  // High half: the logit's bits mapped to an unsigned that decreases as the logit grows (-0 is
  // folded into +0 first so that the two compare equal, as floats do); low half: the id.
  uint32_t b = std::bit_cast<uint32_t>(logit + 0.0f);
  b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);  // increasing with the logit
  return uint64_t{~b} << 32 | static_cast<uint32_t>(id);
}

void sort_gathered_keys(std::vector<uint64_t>& keys, std::vector<uint64_t>& tmp) {
  // LSD radix is stable, so sorting on the logit half alone (3 digits of 11 bits, skipping a
  // digit every key shares) leaves equal logits in their gathered id order: the full key order.
  constexpr int kBits = 11, kDigits = 3;
  constexpr uint32_t kMask = (1u << kBits) - 1;
  const size_t n = keys.size();
  if (n < 1024) {
    std::sort(keys.begin(), keys.end());
    return;
  }
  auto digit = [](uint64_t k, int d) {
    return static_cast<uint32_t>(k >> (32 + d * kBits)) & kMask;
  };
  std::vector<std::array<uint32_t, kMask + 1>> count(kDigits);  // [digit][bucket]
  for (const uint64_t k : keys)
    for (int d = 0; d < kDigits; ++d) ++count[d][digit(k, d)];
  tmp.resize(n);
  for (int d = 0; d < kDigits; ++d) {
    auto& c = count[d];
    if (c[digit(keys[0], d)] == n) continue;  // one bucket holds every key
    uint32_t sum = 0;
    for (auto& v : c) sum += std::exchange(v, sum);  // exclusive prefix sum: bucket starts
    for (const uint64_t k : keys) tmp[c[digit(k, d)]++] = k;
    keys.swap(tmp);
  }
}

bool top_k_keys(const float* logits, int32_t n, int32_t k, std::vector<uint64_t>& heap) {
  // A max-heap of the k best keys so far. Ids arrive in increasing order, so a newcomer beats
  // the worst kept key exactly when its logit is strictly larger: after the heap fills, most
  // tokens cost one float compare.
  heap.clear();
  int32_t i = 0;
  for (; i < n && static_cast<int32_t>(heap.size()) < k; ++i)
    if (logits[i] > -kInf) heap.push_back(order_key(logits[i], i));  // not -inf, not NaN
  if (static_cast<int32_t>(heap.size()) < k) return false;
  std::make_heap(heap.begin(), heap.end());
  float worst = logits[key_id(heap.front())];
  for (; i < n; ++i) {
    if (!(logits[i] > worst)) continue;
    std::pop_heap(heap.begin(), heap.end());
    heap.back() = order_key(logits[i], i);
    std::push_heap(heap.begin(), heap.end());
    worst = logits[key_id(heap.front())];
  }
  return true;
}

}  // namespace ssd::sampling_detail
