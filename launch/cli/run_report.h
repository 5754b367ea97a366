// One request run in one mode (ar or sd), and the figures every front end prints about it: the
// text summary (with the accepted-length histogram for sd) and the JSON fields that --stats-json
// and `ssd bench` write. Shared so that generate and bench cannot report differently.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "actors/roles/remote_decode.h"
#include "runtime/spec/sd_generation.h"

namespace ssd {

struct RunReport {
  std::string mode;     // "ar" or "sd"
  std::string drafter;  // empty for ar
  int32_t k = 0;        // the speculation length, or with auto_k the top of its range
  bool auto_k = false;  // --k auto
  GenerationResult gen;
  SdStats sd;  // rounds == 0 for ar
  bool split = false;   // the drafter ran on drafter ranks (sd / ssd under mpirun)
  SplitFigures split_figures;
  std::optional<DrafterLoss> drafter_loss;  // the drafter lead was lost: rounds after it are plain

  double prefill_tokens_per_s() const;
  double decode_tokens_per_s() const;  // tokens after the first / decode wall time
  double mean_acceptance_length() const;  // 1 for ar (one token per target forward)

  std::string figures_line() const;  // one line: prompt, prefill, generated, decode, acceptance
  std::string sd_summary() const;    // multi-line: per-position rates, accepted and chosen-k
                                     // histograms
  std::string k_text() const;        // "4", or "auto<=8"
  nlohmann::json to_json() const;    // mode, drafter, k, rounds, ... (names as documented)
};

// Runs `req` as AR (drafter == nullptr) or SD.
RunReport run_request(TargetModel& target, Drafter* drafter, const GenerationRequest& req,
                      const SdOptions& sd, const TokenCallback& on_token = {});
// Runs `req` with the drafter on the drafter ranks (`mode` sd or ssd, as they were started).
RunReport run_remote_request(RemoteDecoder& remote, const std::string& mode,
                             const std::string& drafter, const GenerationRequest& req, int32_t k,
                             bool auto_k, const TokenCallback& on_token = {});

}  // namespace ssd
