// The drafter actor: what a drafter rank runs for the whole job (ranks T..N-1; rank T leads).
//
// The lead answers the target leader once per round: it receives the round's outcome (kOutcome:
// accepted count and emitted tokens per sequence, plus the accepted tokens' target features when
// the drafter conditions on them), and replies with every sequence's next speculation
// (kSpeculation), from the speculation cache on a hit, else from the miss policy's fallback
// (runtime/saguaro/ssd_drafter_core.h). Then, in --mode ssd, it pre-speculates for the outcomes of
// the round it just sent, on its compute thread, while the target verifies: that is the overlap
// SSD is about. In --mode sd the same actor answers every round by drafting then (no cache): the
// synchronous baseline with the same placement, only the overlap differs. A sequence whose next
// length is 0 (--k auto chose a plain decode step) gets no entry in the answer and nothing
// pre-speculated; a round of decode steps alone gets no answer (protocol.h, SpeculationMsg). An
// outcome with prespeculate = false (the leader measured pre-speculation not paying) is answered
// without pre-speculating after it (one drafter rank; several keep pre-speculating).
//
// Several drafter ranks (draft-compute scaling): after answering, the lead sends its answers
// (kPrespecWork) to the other drafter ranks, which adopt them so every rank plans the same branch
// list; branch i is drafted by drafter rank i mod D; the others send their entries back
// (kPrespecShare) and the lead installs the merged cache before it answers the next outcome.
//
// Sequences joining a running batch (kJoinSeqs, the server's continuous batching) are started at
// once and get their first speculation in the answer to the next outcome, beside the others'.
//
// Sequence starts and finishes reach only the lead, which relays them to the other drafter ranks
// when it handles them: one sender, so a secondary rank sees a sequence's start before the first
// kPrespecWork that names it and its finish after the last (were they sent by the target leader,
// the two senders' messages could arrive in either order).
//
// Ordering: the core is not thread-safe and the pre-speculation job uses it, so drafter-link
// messages that arrive while the job (or the shares of other ranks) is outstanding are queued and
// handled, in arrival order, as soon as the cache is installed. The loop itself never blocks: it
// keeps polling (a hung peer is caught by the watchdog, not by a stuck loop).
//
// A miss no dearer than SD's round (one drafter rank): an outcome that finds a chunk being
// drafted waits for it, and then for the fallback draft. So the lead measures the window from
// the target's verification (from the answer, or from the outcome when nothing was waited for)
// to the next outcome and the time of its draft calls, and drafts only the chunks
// that fit the window (runtime/saguaro/prespec_budget.h, DrafterActorOptions::fit_window).
//
// Pushed pre-speculation (StartSeqs::push, SSD): the lead sends each chunk of a round's cache to
// the target leader as soon as it is drafted (PrespecPush; another rank's share as it arrives),
// and the leader verifies a hit at once instead of waiting for the answer, and marks the outcome
// pushed; the lead checks its own cache hits that outcome too (same entries, so the same
// speculation on both sides) and leaves it out of the answer. Per chunk, not per install: when
// the pre-speculation outlasts the verification, its first (likeliest) chunks still arrive in
// time.
//
// Misses the leader drafts (--miss-at leader, leader_lookup.h): every answer and push carries the
// core's miss_lookup() (how a miss would be answered now: a lookup the leader can run, or not);
// an outcome the leader marks leader_drafted brings the speculation the leader drafted with its
// copy of that lookup, which the core adopts (SsdDrafterCore, "Misses drafted by the target
// leader"); the sequence gets no entry in the answer, as a pushed hit does not. When the choice
// changes in a round that sends neither an answer nor a push, a push with no entries tells it.
//
// A leader that takes pushes may not wait for this lead for many rounds, so from the first such
// StartSeqs to the shutdown the lead also sends it heartbeats (heartbeat.h): a hung or dead lead
// is then noticed within two step deadlines, not at the leader's next wait.
#pragma once

#include <memory>

#include "actors/roles/fault_injection.h"
#include "actors/transport/rank_layout.h"
#include "actors/transport/transport.h"
#include "actors/transport/watchdog.h"
#include "runtime/saguaro/ssd_drafter_core.h"

namespace ssd {

struct DrafterActorOptions {
  double step_s = 120;  // watchdog deadline of one drafting job
  const FaultInjector* faults = nullptr;  // the rank's fault points (fault_injection.h), if any
  // One drafter rank: pre-speculate only the chunks expected to end before the next outcome
  // arrives (runtime/saguaro/prespec_budget.h); false: until the outcome arrives (a chunk at
  // least), as with several drafter ranks (--prespec-fit all).
  bool fit_window = true;
};

// Runs until kDrafterShutdown. `world` is the job's world transport (ranks as in `layout`).
// primary/backup are this rank's drafters, `opts` the SSD core's options (identical on every
// drafter rank: the handshake's config digest checks it). Each batch of sequences says in its
// StartSeqs whether it runs as ssd (pre-speculation, the miss policy of `opts`) or as sd (no
// pre-speculation, the primary drafts every answer): two cores over the same drafters, so one job
// can compare both with the same placement (`ssd bench`).
void run_drafter_actor(Transport& world, const RankLayout& layout, Drafter& primary,
                       Drafter* backup, const SsdDrafterOptions& core_opts,
                       const DrafterActorOptions& opts, Watchdog& dog);

}  // namespace ssd
