// The figures `ssd bench` aggregates per configuration (mode, drafter, k) over a set of prompts,
// and the tables and JSON it prints from them. One BenchTable per prompt set: the whole prompt
// file, or one workload category (`--workloads`), whose tables also merge into a summary.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "actors/roles/remote_decode.h"

namespace ssd {

// One configuration's sums over the prompts it ran.
struct BenchRow {
  std::string mode, drafter;
  int32_t k = 0;          // the speculation length, or with auto_k the top of its range
  bool auto_k = false;    // --k auto
  std::vector<int64_t> chosen_k;  // [K + 1] rounds at each chosen length (--k auto)
  int64_t tokens = 0, after_first = 0, rounds = 0, accepted = 0;
  double decode_s = 0, draft_s = 0, verify_s = 0;
  int exact = 0, compared = 0;
  bool split = false;  // the drafter ran on its own ranks: fig holds the split-run figures
  SplitFigures fig;

  double tps() const { return decode_s > 0 ? after_first / decode_s : 0; }
  double mal() const { return mode == "ar" ? 1.0 : rounds ? 1.0 + double(accepted) / rounds : 0; }
  std::string k_text() const { return auto_k ? "auto" : std::to_string(k); }
  void add(const BenchRow& o);  // sums every counter, time and histogram bin
  void add_chosen_k(const std::vector<int64_t>& hist);
};

class BenchTable {
 public:
  // The row of (mode, drafter, k, auto), created empty on first use; rows keep first-use order.
  BenchRow& row(const std::string& mode, const std::string& drafter, int32_t k, bool auto_k);
  const std::vector<BenchRow>& rows() const { return rows_; }
  void merge(const BenchTable& o);  // adds o's rows into the matching rows here
  double ar_tps() const;            // 0 without an AR row

  // | mode | drafter | k | mean acceptance length | decode tok/s | vs AR | ... |, then the
  // lengths --k auto chose, one line per automatic configuration.
  std::string markdown() const;
  nlohmann::json json() const;  // one object per row

 private:
  std::vector<BenchRow> rows_;
};

// One compact table over categories: a row per category, and per non-AR configuration its mean
// acceptance length and speed ratio to AR in that category.
std::string category_matrix(const std::vector<std::string>& names,
                            const std::vector<BenchTable>& tables);

}  // namespace ssd
