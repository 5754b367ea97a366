// Chi-square goodness of fit for the verification tests.
//
// Significance alpha = 1e-4 for every fit. Critical values are the Wilson-Hilferty approximation
// of the upper-alpha point of chi-square(df):
//   c(df) = df * (1 - 2 / (9 df) + z * sqrt(2 / (9 df)))^3,   z = Phi^-1(1 - 1e-4) = 3.7190165
// (z from Python's statistics.NormalDist().inv_cdf). Against the exact quantile (regularised
// incomplete gamma, bisection) it errs slightly high, so the true level is a little below 1e-4:
//   df  1: 16.21 vs 15.14   df  2: 19.29 vs 18.42   df  3: 21.84 vs 21.11   df  4: 24.16 vs 23.51
//   df  5: 26.32 vs 25.75   df  7: 30.37 vs 29.88   df  9: 34.15 vs 33.72   df 15: 44.59 vs 44.26
//   df 24: 58.87 vs 58.61   df 35: 75.13 vs 74.93   df 48: 93.39 vs 93.22   df 63: 113.66 vs 113.51
// Cells whose exact probability is 0 are not part of the statistic: a single observation in one
// is an outright failure (the verifier emitted a token the target can never produce).
// All trials are seeded, so each fit is deterministic; a correct verifier fails a given seed
// with probability <= 1e-4 per fit.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace ssd::spec_test {

inline constexpr double kZ1e4 = 3.7190164854557084;

inline double chi_square_critical(int df) {
  const double k = df;
  const double a = 2.0 / (9.0 * k);
  const double c = 1.0 - a + kZ1e4 * std::sqrt(a);
  return k * c * c * c;
}

struct Fit {
  double stat = 0;
  int df = 0;
  double critical = 0;
  int64_t impossible = 0;   // observations in cells of probability 0
  double min_expected = 0;  // smallest expected count among cells of probability > 0
  bool pass() const { return impossible == 0 && (df == 0 || stat <= critical); }
  std::string describe() const {
    return fmt::format(
        "chi2 = {:.2f}, df = {}, critical = {:.2f}, impossible = {}, min expected = {:.1f}", stat,
        df, critical, impossible, min_expected);
  }
};

// counts[i] observed, probs[i] exact probability of cell i (summing to 1).
inline Fit chi_square_fit(const std::vector<int64_t>& counts, const std::vector<double>& probs) {
  int64_t n = 0;
  for (const int64_t c : counts) n += c;
  Fit f;
  f.min_expected = 1e300;
  int cells = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] <= 0) {
      f.impossible += counts[i];
      continue;
    }
    const double e = probs[i] * static_cast<double>(n);
    const double d = static_cast<double>(counts[i]) - e;
    f.stat += d * d / e;
    f.min_expected = std::min(f.min_expected, e);
    ++cells;
  }
  f.df = cells - 1;
  f.critical = f.df > 0 ? chi_square_critical(f.df) : 0;
  return f;
}

}  // namespace ssd::spec_test
