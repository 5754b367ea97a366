// Parametric acceptance for the round simulator: how many draft tokens the target accepts and
// where the bonus token sits in the drafter's ranking (which decides an SSD cache hit).
//
// Acceptance: position i of a speculation is accepted with probability a_i (a_i = a for every i
// unless per-position values are given), and acceptance stops at the first reject, so for a
// speculation of K tokens
//     P(k) = a_1 ... a_k (1 - a_{k+1})   k < K,        P(K) = a_1 ... a_K,
// and with a constant a the expected tokens per round (bonus included) are the canonical
// (1 - a^(K+1)) / (1 - a) of speculative sampling.
//
// Bonus rank: the SSD paper models the cache miss rate at fan-out F as a power law,
//     miss(F) = P(the bonus is not among the drafter's F likeliest) = m1 F^(-r)   (F >= 1),
// m1 = the miss rate at F = 1 (the bonus is not the drafter's top choice), r the exponent; so the
// bonus's rank j (0 = the top) has P(j >= F) = miss(F). For an outcome at position k with fan-out
// F_k the cache can hit only if j < F_k; over a round, P(hit) = sum_k P(k) (1 - miss(F_k)).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace ssd::sim {

struct AcceptanceParams {
  double a = 0.7;                  // per-position acceptance
  std::vector<double> per_position;  // a_1..a_n (positions past n use the last); empty = a
  double miss_at_1 = 0.5;          // m1: P(bonus is not the drafter's top choice)
  double r = 0.5;                  // power-law exponent of the miss rate

  // Throws ssd::Error naming the parameter when it is outside [0, 1] (a, m1) or r <= 0.
  void validate() const;
  double at(int32_t position) const;  // a_position, 1-based
  double mean(int32_t k) const;       // (a_1 + ... + a_k) / k; a at k = 0
  // [K + 1] P(k) for a speculation of K tokens.
  std::vector<double> outcome_probs(int32_t k) const;
  // Expected tokens per round, bonus included: sum_k (k + 1) P(k).
  double expected_tokens(int32_t k) const;
  double miss_rate(double fan_out) const;  // m1 F^-r, clamped to [0, 1]; F < 1 misses surely
  // P(hit) of a round of K tokens pre-speculated with fan-outs F[0..K].
  double hit_rate(std::span<const int32_t> fan_out) const;

  int32_t sample_accepted(int32_t k, std::mt19937_64& rng) const;
  int32_t sample_bonus_rank(std::mt19937_64& rng) const;  // capped at 1 << 20
};

// The per-position acceptance a whose expected tokens per round at K equal `mean_tokens` (a mean
// acceptance length, bonus included), by bisection; 0 for mean_tokens <= 1, 1 at K + 1.
double acceptance_for_mean_tokens(double mean_tokens, int32_t k);

}  // namespace ssd::sim
