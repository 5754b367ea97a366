// The decode engine of a server whose drafter (if any) runs in this process: --mode ar (the target
// alone: one decode forward per round over every running sequence, exactly generate_ar_batch's
// step) and --mode sd (the drafter proposes a chain per sequence, one verify_round forward checks
// them all, as generate_sd_batch does). Sequences join and leave between rounds (decode_engine.h).
// Each round's lengths come from the same length policy generate_sd_batch uses
// (runtime/spec/spec_length.h): under --k auto chosen per sequence from the server's own measured
// costs and acceptance (kept over the server's life), under a fixed --k always K (clipped to the
// tokens a request has left).
#pragma once

#include <vector>

#include "actors/serve/decode_engine.h"
#include "actors/serve/metrics.h"
#include "runtime/model/target_model.h"
#include "runtime/spec/drafter.h"
#include "runtime/spec/spec_length.h"

namespace ssd {

class LocalEngine final : public DecodeEngine {
 public:
  // drafter: null for AR; otherwise it must outlive the engine, as must target and metrics.
  // length: K (k_max) and whether it is chosen per round (--k auto) or fixed.
  LocalEngine(TargetModel& target, Drafter* drafter, const SpecLengthOptions& length,
              ServeMetrics& metrics);

  void admit(std::span<Slot* const> slots) override;
  void round(std::span<Slot* const> slots) override;
  void release(Slot& slot) override;
  int64_t extra_positions() const override { return drafter_ ? k_ : 0; }
  int32_t k() const override { return drafter_ ? k_ : 0; }
  bool recoverable() const override { return true; }

 private:
  void decode_round(std::span<Slot* const> running);  // AR
  void verify_round_sd(std::span<Slot* const> running);
  int32_t dseq(const Slot& s) const { return static_cast<int32_t>(s.id & 0x7fffffff); }

  TargetModel& target_;
  Drafter* drafter_;
  int32_t k_;
  ServeMetrics& metrics_;
  SpecLengthController length_;  // every round's per-sequence lengths
  std::vector<int32_t> layers_;  // target layers the drafter conditions on
};

}  // namespace ssd
