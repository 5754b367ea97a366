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
// --mode ssd takes what RemoteDecoder takes, through the same DrafterLeadLink
// (actors/roles/drafter_lead_link.h): the drafter's pushed pre-speculation (an outcome found in
// the push is verified next without waiting for the answer) and, under --miss-at leader with a
// lookup drafter, misses drafted on the leader with its copies of the lookup (sent with the
// outcome). A round whose running sequences all have their speculation so gets an answer only
// for the sequences joining it. The leader's lookup copies see every start (StartSeqs, JoinSeqs),
// token and finish; a sequence that leaves while a pushed or leader-drafted speculation for it
// is held, or its entry in a push or an answer is on its way, has it dropped. The pre-speculation
// switch (runtime/saguaro/prespec_switch.h) runs as in RemoteDecoder: rounds in blocks with
// pre-speculation on or off (Outcome::prespeculate), each regime with its own length policy; its
// rate is tokens per second of the rounds, whatever the batch held (sequences join and leave).
// /metrics counts the pushed hits and the misses drafted here (ServeMetrics::add_ahead).
//
// An answer is due after an Outcome (or StartSeqs) exactly when one of its sequences was asked
// for tokens and got none ahead (pushed, drafted here) or one joined asking for tokens; the
// engine reads it in the next round even when every sequence it was for has left since (its
// entries are then dropped), so it never meets a stale answer later.
//
// A lost drafter rank (actors/roles/drafter_loss.h, under --on-drafter-loss continue): the wait
// for an answer, or a lead that sends no heartbeats while the rounds take pushes, names the loss
// (the lead's or another drafter rank's process gone, or the deadline expired); the engine prints
// the one line, sets ssd:drafter_lost in the metrics, and from then on sends the drafter nothing.
// Every sequence, in flight or admitted later, goes on as RemoteDecoder's do (the link decides):
// each speculation is drafted here with the leader's lookup copy, at the length the policy
// chooses (counted as leader-drafted): the copy held under --miss-at leader, else one built at
// the loss and started on the running sequences' prompts and emitted tokens; only when none can
// be built is each round a plain decode step (length 0). The target's tokens either way. loss()
// hands it to the job.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "actors/roles/drafter_lead_link.h"
#include "actors/roles/drafter_loss.h"
#include "actors/roles/leader_lookup.h"
#include "actors/roles/round_speculations.h"
#include "actors/serve/decode_engine.h"
#include "actors/serve/metrics.h"
#include "actors/transport/protocol.h"
#include "actors/transport/rank_layout.h"
#include "actors/transport/transport.h"
#include "actors/transport/watchdog.h"
#include "runtime/model/target_model.h"
#include "runtime/saguaro/prespec_switch.h"
#include "runtime/spec/spec_length.h"

namespace ssd {

struct RemoteEngineOptions {
  std::vector<int32_t> feature_layers;  // what the drafter asked for in its kDrafterReady
  int32_t k = 4;         // the speculation length, or with auto_k the top of its range
  bool auto_k = false;   // --k auto: each sequence's length chosen per round
  bool prespeculate = true;  // ssd; false: sd (the drafter drafts after each outcome)
  bool push = true;          // ssd: take the drafter's pushed pre-speculation (PrespecPush)
  PrespecSwitchOptions prespec;  // ssd: the pre-speculation switch (--prespec-switch)
  double step_s = 120;       // watchdog deadline of one wait
  DrafterLossPolicy loss_policy;  // what a lost drafter rank does (default: ends the job)
};

class RemoteEngine final : public DecodeEngine {
 public:
  RemoteEngine(TargetModel& target, Transport& world, const RankLayout& layout, Watchdog& dog,
               const RemoteEngineOptions& opts, ServeMetrics& metrics);

  // The leader's lookup copies (leader_lookup.h): from_start (ssd, --miss-at leader) drafts misses
  // here; at_loss builds them at a lost drafter rank when there are none. Neither by default
  // (--miss-at drafter, plain decoding after a loss). Set before the first admit().
  void set_leader_lookups(LeaderLookups lookups) { link_.set_leader_lookups(std::move(lookups)); }
  void admit(std::span<Slot* const> slots) override;
  void round(std::span<Slot* const> slots) override;
  void release(Slot& slot) override;
  int64_t extra_positions() const override { return opts_.k; }
  int32_t k() const override { return opts_.k; }
  bool recoverable() const override { return false; }
  // The drafter rank lost under a continue policy (the rounds since are drafted by the leader's
  // lookup copy, or plain decode steps without one).
  const std::optional<DrafterLoss>& loss() const { return link_.loss(); }
  const PrespecSwitch& prespec_switch() const { return prespec_; }

 private:
  struct Joiner {
    int32_t seq = 0;
    std::vector<int32_t> prompt;
    int32_t first = 0;
    uint64_t stream = 0;
    std::vector<float> features;  // [prompt, dim]
    int32_t limit = 0;            // the most tokens its first speculation may offer
  };
  // Records the loss, says so once, sets the metric; `running`: every slot the drafter knows
  // that still runs (a lookup copy built at the loss starts on them).
  void lose_drafter(const DrafterLost& e, const std::vector<Slot*>& running);
  void start_batch();
  template <class M> M joiners_message();  // StartSeqs or JoinSeqs of joining_ (then cleared)
  std::vector<float> joiners_features() const;
  int32_t dseq(const Slot& s) const { return static_cast<int32_t>(s.id & 0x7fffffff); }
  // The length policy of the current pre-speculation regime (ssd: one per regime).
  SpecLengthController& length() { return prespec_on_ ? length_ : off_length_; }
  // The next speculation's length of each sequence (ids, with the most tokens each may offer),
  // chosen together and kept in chosen_.
  std::vector<int32_t> choose(const std::vector<int32_t>& ids, const std::vector<int32_t>& limit);
  // The round's speculations: those held (pushed, drafted here), the answer when one is due.
  RoundSpeculations take_speculations(const std::vector<Slot*>& active, double& wait_s);
  void speculate_without_drafter(const std::vector<Slot*>& active, RoundSpeculations& specs);
  // Sends the outcome (and the joiners before it); next speculations that need no answer are
  // taken ahead. `still`: the slots of outcome.seqs, in order.
  void send_outcome(Outcome& outcome, const std::vector<Slot*>& still,
                    std::span<const float> features);

  TargetModel& target_;
  Watchdog& dog_;
  RemoteEngineOptions opts_;
  ServeMetrics& metrics_;
  DrafterLeadLink link_;
  SpecLengthController length_;
  SpecLengthController off_length_;  // ssd rounds with pre-speculation off
  PrespecSwitch prespec_;
  bool prespec_on_ = true;           // this round's regime
  std::map<int32_t, int32_t> chosen_;  // sequence -> the length asked of its next speculation
  std::map<int32_t, SeqSpeculation> ahead_;  // next speculations held before the answer
  int64_t dim_ = 0;                 // floats of one position's features
  std::vector<Joiner> joining_;     // admitted, not yet told to the drafter
  std::map<int32_t, bool> known_;   // sequences the drafter speculates for
  bool awaiting_ = false;           // a round is due: StartSeqs or an Outcome was sent
  bool answer_due_ = false;         // and the drafter answers it
  int64_t round_ = 0;               // the round that answer is for
};

}  // namespace ssd
