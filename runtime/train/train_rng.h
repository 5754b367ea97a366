// Counter-based random numbers for the trainer: every draw is a pure function of (seed, stream,
// counter), so the trainer's whole random state at a step is (seed, step) and a resumed run
// draws exactly what an uninterrupted one would (no generator state to save).
#pragma once

#include <cmath>
#include <cstdint>

namespace ssd::train {

// splitmix64 finaliser: a bijective 64-bit mix.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline uint64_t rng_u64(uint64_t seed, uint64_t stream, uint64_t counter) {
  return mix64(mix64(mix64(seed) ^ stream) ^ counter);
}

// Uniform in [0, 1) with 53 bits.
inline double rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter) {
  return static_cast<double>(rng_u64(seed, stream, counter) >> 11) * 0x1.0p-53;
}

// Uniform integer in [0, n) (n > 0); the modulo bias is below 2^-40 for n < 2^24.
inline uint64_t rng_below(uint64_t seed, uint64_t stream, uint64_t counter, uint64_t n) {
  return rng_u64(seed, stream, counter) % n;
}

// Standard normal (Box-Muller on two counters).
inline double rng_normal(uint64_t seed, uint64_t stream, uint64_t counter) {
  const double u1 = 1.0 - rng_uniform(seed, stream, 2 * counter);  // (0, 1]
  const double u2 = rng_uniform(seed, stream, 2 * counter + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace ssd::train
