// The residual distribution of speculative verification at one node of the draft tree.
//
// It starts as the target's processed distribution p at the node; each rejected child, drawn
// from q, turns it into r' = normalise(max(0, r - q)). The residual only shrinks, so only p's
// support can carry mass and the state is one mass per entry of p's list: m = Z * r, kept
// unnormalised together with its total Z (Z = 1 at the start: p is taken as normalised). A
// rejection subtracts Z * q over q's support only, found through a token -> entry index, so a
// sparse q (top-k, one-hot) costs O(|q|) however large the vocabulary; building the index costs
// O(|p|), which the caller already paid to produce p.
//
// Precision. Z is updated by subtracting what a rejection removed; when it drops below 1e-3 of
// its previous value that subtraction has lost digits, and Z is summed afresh over p's support.
//
// Zero mass. In exact arithmetic a rejection never leaves an empty residual: rejecting token x
// needs r(x) < q(x), and then the mass left is Z' / Z = sum max(0, r - q) = sum max(0, q - r)
// >= q(x) - r(x) > 0 (q and r both sum to 1). So Z' ~ 0 means r == q to rounding, and the
// rejection itself had probability sum max(0, q - r) ~ Z' / Z, i.e. it was a rounding artefact.
// Below kZeroMass (relative) reject() therefore leaves the residual as it was and returns false;
// this changes the output distribution by at most that probability (< 1e-12 in total
// variation). It is also why verification insists that q sums to 1 (see verify.cpp): an
// unnormalised q could empty the residual for real.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/sampling/sampler.h"

namespace ssd {

class Residual {
 public:
  // Relative mass below which a residual counts as empty (see the top of the file).
  static constexpr double kZeroMass = 1e-12;
  // |sum - 1| allowed for p (and, in verify.cpp, for q): process() is exact to ~1e-11 at a 49k
  // vocabulary; a float-precision drafter is within ~1e-6.
  static constexpr double kSumTolerance = 1e-6;

  // Starts from p (copied: p need not outlive this call). Throws ssd::Error when p is empty,
  // repeats a token id, or does not sum to 1 within kSumTolerance.
  void reset(const ProcessedDist& p);

  // The accept test of a child with token `token` drawn from q, where q_token = q(token) > 0:
  // passes when u < r(token) / q(token), i.e. with probability min(1, r / q) for u ~ U[0, 1).
  // With r == q bit for bit it always passes (u < 1).
  bool accepts(int32_t token, double q_token, double u) const {
    return u * z_ * q_token < mass_of(token);
  }

  // r <- normalise(max(0, r - q)) after rejecting a child drawn from q. Returns false, leaving r
  // unchanged, when that would leave no mass (r == q to rounding).
  bool reject(const ProcessedDist& q);

  // Inverse-CDF draw from r in p's list order, u in [0, 1).
  int32_t sample(double u) const;

  // r(token), normalised (0 off p's support).
  double prob(int32_t token) const { return mass_of(token) / z_; }

 private:
  double mass_of(int32_t token) const {
    const int32_t e = token >= 0 && static_cast<size_t>(token) < entry_.size() ? entry_[token] : -1;
    return e < 0 ? 0.0 : mass_[e];
  }
  void clear_index();

  std::vector<int32_t> ids_;    // [|p|] token ids, p's order
  std::vector<double> mass_;    // [|p|] m = Z * r
  double z_ = 0;                // total of mass_ (up to rounding)
  std::vector<int32_t> entry_;  // [max id seen + 1] token -> index into ids_, -1 when absent
  std::vector<std::pair<int32_t, double>> undo_;  // entries a rejection changed, old masses
};

}  // namespace ssd
