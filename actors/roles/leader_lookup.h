// The target leader's own lookup drafters (--miss-at leader): copies of the drafter rank's lookup
// drafters, fed the same tokens, so that a miss the drafter would answer with a lookup is drafted
// on the leader at once instead of after a round trip to the drafter rank.
//
// Why it pays: with a lookup drafter (n-gram, suffix) a draft costs microseconds, so the whole of
// a miss's cost in SSD is the exchange outcome -> answer, the same wait SD has every round. The
// leader already holds every token of every context (the prompt, and each token it emitted), so
// it can run the lookup itself. Which lookup answers a miss is the drafter's decision, made in one
// place (SsdDrafterCore::miss_lookup, from its miss policy) and told to the leader with every
// answer and push (SpeculationMsg::miss_lookup); this class only drafts what it is told to.
//
// Holds `primary`, a copy of the drafter rank's primary when that is a lookup drafter (else
// null), and `backup`, a copy of the backup speculator (--backup). Both get every sequence's start,
// emitted tokens, finish and memory scope exactly as the drafter rank's do (a suffix drafter's
// memory of earlier requests then matches too). Drafts are exact: lookup drafts are deterministic,
// their q one-hot, so verification of the leader's draft is as lossless as of the drafter's.
//
// After a lost drafter rank (drafter_loss.h) the same copies draft every later speculation: the
// leader's own choice then (own_choice(): the primary's copy when there is one, else the
// backup's), so the run goes on as SD with a lookup drafter in the target's process. Under
// --miss-at drafter the leader holds no copies while the drafter lives; at the loss it builds
// them (LeaderLookups::at_loss) and starts them on every running sequence's prompt and emitted
// tokens, which is all a lookup needs (a suffix drafter's memory of earlier requests then starts
// empty).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "actors/transport/protocol.h"
#include "runtime/spec/drafter.h"

namespace ssd {

class LeaderLookup {
 public:
  // Either may be null; a non-null one must draft cheaply (Drafter::drafts_cheaply).
  LeaderLookup(std::unique_ptr<Drafter> primary, std::unique_ptr<Drafter> backup);

  void set_memory_scope(uint64_t scope);
  void start(int32_t seq, std::span<const int32_t> prompt, std::span<const int32_t> emitted);
  void commit(int32_t seq, std::span<const int32_t> tokens);
  void finish(int32_t seq);
  // Whether a miss the drafter answers with `which` can be drafted here.
  bool can_draft(MissLookup which) const { return drafter(which) != nullptr; }
  // The copy the leader drafts with once the drafter ranks are lost: the primary's when there is
  // one, else the backup's; kNone without either.
  MissLookup own_choice() const;
  // What kind of lookup `which` is, for people: "n-gram", "suffix" ("" when absent).
  std::string kind(MissLookup which) const;
  // Sequence `seq`'s next speculation of up to k tokens (k >= 1) with the drafter `which` names,
  // its first token at output index `position` of Philox stream `stream` (as the drafter rank
  // would draft it); nothing when `which` is kNone or that copy is absent.
  std::optional<SeqSpeculation> draft(MissLookup which, int32_t seq, int32_t k,
                                      const SamplerConfig& sampler, uint64_t stream,
                                      uint32_t position);

 private:
  Drafter* drafter(MissLookup which) const;
  std::unique_ptr<Drafter> primary_, backup_;
};

// What kind of lookup drafter `d` is, for people: "n-gram" (NgramDrafter), else its name's kind
// ("suffix").
std::string lookup_kind(const Drafter& d);

// The leader's lookup copies as the job plans them (LeaderJob::leader_lookups(), the one place
// that decides which lookups they copy): `from_start` drafts misses while the drafter lives
// (--miss-at leader; null under --miss-at drafter); `at_loss` builds the same copies when a
// drafter rank is lost and there are none yet (empty, or returning null: no lookup can be built,
// and the leader finishes with plain decoding).
struct LeaderLookups {
  std::unique_ptr<LeaderLookup> from_start;
  std::function<std::unique_ptr<LeaderLookup>()> at_loss;
};

}  // namespace ssd
