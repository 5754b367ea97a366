// The decode engine of a server whose drafter runs on drafter ranks (--mode sd or ssd in an
// mpirun / ssd-launch job): RemoteDecoder's rounds (actors/roles/remote_decode.h), with
// sequences that join and leave between rounds. The drafter lead answers every outcome with the
// next speculation of each sequence still running; in --mode ssd it pre-speculated that answer
// while the target verified.
//
// Joining: a sequence admitted between rounds is prefilled and emits its first token at once,
// but its first speculation comes with the drafter's next answer: the leader sends JoinSeqs just
// before the round's Outcome, and the sequence takes part in the round after. When nothing is
// running (an idle server, or every sequence ended in the last round) there is no outcome to ride
// on: the joiners start a new batch with StartSeqs (rounds count from 0 again), as `ssd bench`
// starts each of its batches. Leaving: FinishSeqs as soon as the sequence ends (or its client
// goes); a speculation already on its way for it is dropped.
//
// Speculation length: the leader's length policy (runtime/spec/spec_length.h), as in `ssd
// generate` and `ssd bench` with drafter ranks (remote_decode.h): every sequence's next length is
// chosen after each verification, from the rounds verified so far (--k auto) or K (a fixed --k),
// and sent with the outcome (SeqOutcome::next_k); a sequence's first one with StartSeqs::first_k
// or JoinSeqs::first_k. The policy lives as long as the engine: its costs carry over requests.
//
// A lost drafter rank (actors/roles/drafter_loss.h, under --on-drafter-loss continue): the wait
// for an answer names the loss (the lead's or another drafter rank's process gone, or the
// deadline expired); the engine prints the one line, sets ssd:drafter_lost in the metrics, and
// from then on sends the drafter nothing and runs every sequence, in flight or admitted later,
// as a plain decode step (length 0): the target's tokens, slower. loss() hands it to the job.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "actors/roles/drafter_loss.h"
#include "actors/serve/decode_engine.h"
#include "actors/serve/metrics.h"
#include "actors/transport/protocol.h"
#include "actors/transport/rank_layout.h"
#include "actors/transport/transport.h"
#include "actors/transport/watchdog.h"
#include "runtime/model/target_model.h"
#include "runtime/spec/spec_length.h"

namespace ssd {

struct RemoteEngineOptions {
  std::vector<int32_t> feature_layers;  // what the drafter asked for in its kDrafterReady
  int32_t k = 4;         // the speculation length, or with auto_k the top of its range
  bool auto_k = false;   // --k auto: each sequence's length chosen per round
  bool prespeculate = true;  // ssd; false: sd (the drafter drafts after each outcome)
  double step_s = 120;       // watchdog deadline of one wait
  DrafterLossPolicy loss_policy;  // what a lost drafter rank does (default: ends the job)
};

class RemoteEngine final : public DecodeEngine {
 public:
  RemoteEngine(TargetModel& target, Transport& world, const RankLayout& layout, Watchdog& dog,
               const RemoteEngineOptions& opts, ServeMetrics& metrics);

  void admit(std::span<Slot* const> slots) override;
  void round(std::span<Slot* const> slots) override;
  void release(Slot& slot) override;
  int64_t extra_positions() const override { return opts_.k; }
  int32_t k() const override { return opts_.k; }
  bool recoverable() const override { return false; }
  // The drafter rank lost under a continue policy (the rounds since are plain decode steps).
  const std::optional<DrafterLoss>& loss() const { return loss_; }

 private:
  struct Joiner {
    int32_t seq = 0;
    std::vector<int32_t> prompt;
    int32_t first = 0;
    uint64_t stream = 0;
    std::vector<float> features;  // [prompt, dim]
    int32_t limit = 0;            // the most tokens its first speculation may offer
  };
  Envelope receive(MsgKind kind, const std::string& waiting_for);
  void lose_drafter(const DrafterLost& e);  // records the loss, says so once, sets the metric
  template <class T> void send(const T& msg, std::span<const float> bulk = {});
  template <class M> M joiners_message();  // StartSeqs or JoinSeqs of joining_ (then cleared)
  int32_t dseq(const Slot& s) const { return static_cast<int32_t>(s.id & 0x7fffffff); }
  // The next speculation's length of each sequence (ids, with the most tokens each may offer),
  // chosen together and kept in chosen_.
  std::vector<int32_t> choose(const std::vector<int32_t>& ids, const std::vector<int32_t>& limit);

  TargetModel& target_;
  Transport& world_;
  const RankLayout& layout_;
  Watchdog& dog_;
  RemoteEngineOptions opts_;
  ServeMetrics& metrics_;
  SpecLengthController length_;
  std::map<int32_t, int32_t> chosen_;  // sequence -> the length asked of its next speculation
  int64_t dim_ = 0;                 // floats of one position's features
  std::vector<Joiner> joining_;     // admitted, not yet told to the drafter
  std::map<int32_t, bool> known_;   // sequences the drafter speculates for
  bool awaiting_ = false;           // an answer (StartSeqs' or Outcome's) is on its way
  int64_t round_ = 0;               // the round that answer is for
  std::optional<DrafterLoss> loss_;  // set: the drafter is gone, nothing is sent to it
};

}  // namespace ssd
