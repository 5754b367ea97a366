// The target leader's end of its exchange with the drafter lead, round by round, as both leaders
// of a split run use it: RemoteDecoder (remote_decode.h: `ssd generate` and `ssd bench` with
// drafter ranks) and the server's RemoteEngine (actors/serve/remote_engine.h). One
// implementation, so the two cannot drift apart on how a round's next speculations arrive:
//
//   - frames to the lead go through send() (counted in bytes(); none once the drafter is lost);
//   - frames from it through receive(): heartbeats are noted and passed over, pushed
//     pre-speculation (PrespecPush) is kept, anything else is returned in order (a frame read
//     while looking for pushes is held for the next receive());
//   - after each verification, poll() reads every frame that has arrived (so the round's pushes
//     are in) and checks that the lead was heard from within its heartbeats' deadline (rounds
//     that take pushes or draft misses here wait for no answer, so no answer's deadline would
//     see the lead hang: heartbeat.h, DrafterSilence);
//   - ahead() decides, per outcome, where its next speculation comes from: the round's push when
//     the outcome is in it (a hit, SeqOutcome::pushed), else, under --miss-at leader, drafted
//     here with the leader's copy of the lookup the drafter said answers its misses
//     (leader_lookup.h, SeqOutcome::leader_drafted), else nothing: the drafter's answer brings it;
//   - the leader's lookup copies see every sequence's start, tokens and finish (started(),
//     committed(), finished()), as the drafter ranks' lookups do;
//   - after a lost drafter rank (lose()), it decides for both leaders how the run goes on: every
//     later speculation is drafted here with a lookup copy (ahead(), draft_here(): the primary's
//     copy if there is one, else the backup's), SD in the target's process. Under --miss-at
//     leader the copy is the one it already holds; else it builds one at the loss
//     (LeaderLookups::at_loss, the job's recipe) and starts it on the running sequences' prompts
//     and emitted tokens (RunningSeq). Only when no copy can be built (no recipe, or one with
//     neither lookup) does it go on with plain decoding (lengths 0). Its one loss line says which.
//
// Pushes and leader-drafted misses are taken only in a batch that asked for pushes
// (StartSeqs::push, set by start_batch() for ssd with pushes on): the drafter tells a change of
// how it answers misses in a push when no answer comes, so a leader that takes no pushes could
// draft with a stale choice, and waits for every answer instead. A sequence that ends while its
// pushed or leader-drafted speculation is on its way is simply never looked up again: the
// caller drops what it holds for it, and the lead drops it on the FinishSeqs.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "actors/roles/drafter_loss.h"
#include "actors/roles/heartbeat.h"
#include "actors/roles/leader_lookup.h"
#include "actors/roles/round_speculations.h"
#include "actors/transport/frame.h"
#include "actors/transport/protocol.h"
#include "actors/transport/rank_layout.h"
#include "actors/transport/transport.h"
#include "actors/transport/watchdog.h"
#include "runtime/generate/generation.h"

namespace ssd {

class DrafterLeadLink {
 public:
  // step_s: the deadline of one wait (--watchdog-s); the lead's heartbeats are due twice as often.
  DrafterLeadLink(Transport& world, const RankLayout& layout, Watchdog& dog, double step_s);

  // What to do when the drafter lead dies or misses a deadline (default: end the job).
  void set_loss_policy(DrafterLossPolicy policy) { policy_ = std::move(policy); }
  const DrafterLossPolicy& loss_policy() const { return policy_; }
  // ssd: ask the drafter to push its pre-speculation and take hits from it (default on).
  void set_push(bool on) { push_enabled_ = on; }
  // The leader's lookup copies (leader_lookup.h): from_start (--miss-at leader; null: --miss-at
  // drafter) drafts misses while the drafter lives, and at_loss builds them at a loss when there
  // are none. Set before the first batch: a copy held from the start must see every sequence the
  // drafter ranks see.
  void set_leader_lookups(LeaderLookups lookups);

  // ---- sending (to the lead only: it relays starts, joins and finishes to the other drafter
  // ranks in order with its own work, which messages from two senders could not guarantee)
  template <class T>
  void send(const T& msg, std::span<const std::byte> bulk = {}) {
    if (loss_) return;  // nobody to tell
    std::vector<std::byte> frame = encode_frame(msg, bulk);
    bytes_ += static_cast<int64_t>(frame.size());
    world_.send_frame(layout_.drafter_lead(), std::move(frame));
  }
  // A new batch: sets m.push (ssd with pushes on), sends m, forgets the last batch's push, and
  // expects the lead's heartbeats from now when it pushes.
  void start_batch(StartSeqs& m, std::span<const std::byte> bulk);
  int64_t bytes() const { return bytes_; }  // drafter-link frames sent and received

  // ---- receiving
  // The next frame of `kind` from the lead, waited for under the step deadline and the loss
  // policy (throws DrafterLost under a continue policy); another rank's error ends the job.
  Envelope receive(MsgKind kind, const std::string& waiting_for);
  // Round `round`'s answer (SpeculationMsg); notes how the drafter answers misses.
  SpeculationMsg receive_answer(int64_t round);
  // After round `round`'s verification, in a batch that takes pushes: reads what has arrived and
  // checks the lead's heartbeats (fails the job, or throws DrafterLost under a continue policy).
  void poll(int64_t round);

  // ---- the next speculation of an outcome, when no answer is needed for it
  // Sequence o.seq's outcome of round `round` (its next length o.next_k already chosen), of
  // request `req` that has emitted `position` tokens: its next speculation from the round's push
  // (o.pushed set) or drafted here (o.leader_drafted and o.drafted set), or nothing. After a
  // loss: drafted here whenever a lookup copy can (draft_here()), in any batch.
  std::optional<SeqSpeculation> ahead(int64_t round, SeqOutcome& o, const GenerationRequest& req,
                                      uint32_t position);

  // ---- after a loss
  // Whether the leader drafts every later speculation with its lookup copy (else plain decoding).
  bool drafts_after_loss() const;
  // Sequence `seq`'s speculation of up to k tokens (k >= 1) drafted with that copy, its first
  // token at output index `position` of the request; nothing when there is no copy.
  std::optional<SeqSpeculation> draft_here(int32_t seq, int32_t k, const GenerationRequest& req,
                                           uint32_t position);
  // A running sequence of a round whose answer will not come (the drafter is lost).
  struct Awaiting {
    int32_t seq = 0;
    int32_t k = 0;                           // the length chosen for it this round
    const GenerationRequest* req = nullptr;  // its request
    uint32_t position = 0;                   // tokens the request has emitted
  };
  // Each of `seqs` still awaiting its speculation in `specs` has it drafted here (draft_here());
  // returns the indices into `seqs` of those drafted. Without a lookup copy
  // (!drafts_after_loss()) every sequence of the round verifies an empty speculation
  // (specs.take_none()), a plain decode step: nullopt.
  std::optional<std::vector<size_t>> speculate_without_drafter(RoundSpeculations& specs,
                                                               std::span<const Awaiting> seqs);

  // ---- the leader's lookup copies (no-ops under --miss-at drafter)
  void set_memory_scope(uint64_t scope);
  void started(int32_t seq, std::span<const int32_t> prompt, std::span<const int32_t> emitted);
  void committed(int32_t seq, std::span<const int32_t> tokens);
  void finished(int32_t seq);

  // ---- a lost drafter rank
  const std::optional<DrafterLoss>& loss() const { return loss_; }
  // A sequence the caller is decoding when the drafter is lost: what a lookup copy built then
  // starts it on (its prompt, and every token it emitted so far).
  struct RunningSeq {
    int32_t seq = 0;
    std::span<const int32_t> prompt, emitted;
  };
  // Records the loss in round `round` and prints its line (which says what the leader finishes
  // with: its lookup's drafts or plain decoding); false when one was already recorded. Without a
  // lookup copy it first builds one (at_loss) and starts it on `running`, every sequence the
  // caller decodes (later ones come through started()).
  bool lose(const DrafterLost& e, int64_t round, std::span<const RunningSeq> running);
  // A loss found elsewhere, already reported: kept (the first one stays), and a lookup copy built
  // for the sequences started from now on.
  void note_loss(const DrafterLoss& loss);

 private:
  static constexpr double kSpinS = 0.02;  // see spin_for_frame()
  std::optional<Envelope> spin_for_frame();
  void heard_from(const Envelope& env);
  void keep_push(const Envelope& env);
  const PushedSpec* find_pushed(int64_t round, int32_t seq, int32_t k, int32_t bonus) const;
  void build_lookup(std::span<const RunningSeq> running);  // at a loss, when there is none

  Transport& world_;
  const RankLayout& layout_;
  Watchdog& dog_;
  double step_s_;
  DrafterLossPolicy policy_;
  DrafterSilence silence_{2 * step_s_};  // twice the step, as the drafter's LeaderWatch
  int64_t bytes_ = 0;
  bool push_enabled_ = true;
  bool batch_push_ = false;          // this batch asked for pushes
  std::optional<PrespecPush> push_;  // the latest pre-speculation the drafter pushed
  std::unique_ptr<LeaderLookup> lookup_;  // --miss-at leader, or built at the loss; else null
  std::function<std::unique_ptr<LeaderLookup>()> lookup_at_loss_;  // LeaderLookups::at_loss
  uint64_t memory_scope_ = 0;  // the latest set_memory_scope() (for a copy built later)
  MissLookup miss_lookup_ = MissLookup::kNone;  // as the drafter last said
  std::deque<Envelope> held_;  // frames read while looking for pushes, not yet received
  std::optional<DrafterLoss> loss_;
};

}  // namespace ssd
