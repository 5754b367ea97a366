// Whole-vocabulary passes used by process() (sampler.cpp), kept apart so that each can be read
// and tested on its own. They are the only O(vocab) work of a sampling step, so each is written
// for the compiler to vectorise on plain x86-64 or to touch as few tokens as possible.
//
// Order keys: a candidate token is a uint64 whose ascending order is the order of the sampler's
// list (logit descending, then id ascending), so sorting and selecting compare integers.
#pragma once

#include <cstdint>
#include <vector>

namespace ssd::sampling_detail {

// The largest logit, NaN ignored; -inf when there is none.
float max_logit(const float* logits, int32_t n);

// Exponents below this are treated as probability 0 relative to the top token (e^-708 is near
// the smallest normal double): it keeps the exp polynomial in its valid range, and it drops
// nothing a 53-bit uniform could ever select next to the top token (whose e is 1).
inline constexpr double kMinExponent = -708.0;

// e[i] = exp((logits[i] - l_max) / t) for i in [0, n), computed in double; 0 where the logit is
// -inf or NaN or the exponent is below kMinExponent. x is scratch [n]. Returns the sum of e
// (blocked_total's order). The exp itself is within 2 ulp of the exact exp of the rounded
// exponent.
double relative_exp(const float* logits, int32_t n, float l_max, double t, double* e, double* x);

// The sum of e[0..n) in the blocked order of kernels/common/blocked_scan.h (the order the device
// sampler's thread block sums Z in). scratch: [scan_chunks(n)] doubles.
double blocked_total(const double* e, int32_t n, double* scratch);

// The same definition for a single logit (used when only a few tokens need it).
double relative_exp_one(float logit, float l_max, double t);

// A floor for top-p: taking tokens binade by binade of e from the top (binade b holds e in
// [2^-b, 2^(1-b)): b = 0 is e = 1, then [1/2, 1), [1/4, 1/2), ...), the lower edge 2^-b of the
// binade in which the cumulative mass first reaches `aim`; 0 if it never does. Every token the
// top-p cut keeps has e >= this floor. e: [n].
double mass_floor(const double* e, int32_t n, double aim);

uint64_t order_key(float logit, int32_t id);
inline int32_t key_id(uint64_t key) { return static_cast<int32_t>(static_cast<uint32_t>(key)); }

// Sorts keys that were gathered in increasing id order (stable LSD radix on the logit half; small
// inputs use std::sort). tmp is scratch.
void sort_gathered_keys(std::vector<uint64_t>& keys, std::vector<uint64_t>& tmp);

// The k smallest keys (the k best tokens), unsorted, in `keys`; false when fewer than k logits
// are valid (not -inf or NaN), i.e. top-k would keep every valid token.
bool top_k_keys(const float* logits, int32_t n, int32_t k, std::vector<uint64_t>& keys);

}  // namespace ssd::sampling_detail
