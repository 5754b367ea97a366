// The engine side of the server's continuous batching: a batch that sequences join and leave at
// round boundaries. The scheduler (scheduler.h) owns the requests; between two rounds it admits
// new ones (admit: prefill, first token) and drops the ones whose client left (release); a round
// (round: one target forward over every running sequence, SD/SSD: their drafts verified in it)
// emits each running sequence's next tokens through Slot::on_token. Nothing in a round depends on
// which other sequences share it: every sequence draws from its own Philox stream at its own
// output index and the forward is batch-invariant, so a greedy request's tokens equal the ones
// `ssd generate` prints for it, whatever else runs beside it.
//
// Implementations: LocalEngine (local_engine.h: --mode ar, and sd with the drafter in this
// process) and RemoteEngine (remote_engine.h: sd / ssd with drafter ranks).
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "runtime/generate/generation.h"
#include "runtime/model/batch.h"

namespace ssd {

// One request inside the engine. The scheduler fills id, req and on_token; the engine the rest.
struct Slot {
  int64_t id = 0;          // unique over the server's life; the drafter's sequence id
  GenerationRequest req;   // prompt, budget, sampler, Philox stream, end-of-generation ids
  GenerationResult gen;    // tokens emitted so far
  // Called with every emitted token (on the engine's thread); false ends the request (a stop
  // string, a client that left).
  std::function<bool(int32_t)> on_token;

  // Engine state.
  SeqId kv = -1;          // the target's sequence (-1: none held)
  int32_t root = 0;       // last emitted token, not in the target's cache yet
  int32_t root_pos = 0;   // its position == the sequence's cached length
  bool running = false;   // still decoding (false once it ended, or before admit)
  bool drafter_live = false;  // the drafter holds state for it
};

// Spec-decode counters of one sequence-round, reported to the metrics.
struct RoundCounts {
  int64_t draft_tokens = 0;  // nodes of the verified draft (0: an AR step)
  int64_t accepted = 0;      // of them, accepted
};

class DecodeEngine {
 public:
  virtual ~DecodeEngine() = default;
  // Prefills every slot and emits its first token (from the prefill's logits). A slot whose
  // request ends there has running == false afterwards (and is released).
  virtual void admit(std::span<Slot* const> slots) = 0;
  // One round for the running slots among `slots`. Slots that end in it are released.
  virtual void round(std::span<Slot* const> slots) = 0;
  // Gives back what the slot holds (target KV pages, drafter state); idempotent.
  virtual void release(Slot& slot) = 0;
  // Positions a sequence may hold beyond prompt + max_tokens (K for verification).
  virtual int64_t extra_positions() const = 0;
  // Draft depth K (0 for AR): the length of the per-position acceptance counters.
  virtual int32_t k() const = 0;
  // Whether the engine can go on after a round threw ssd::Error (the requests of the round then
  // fail): true in one process, where a failed forward leaves every cache as it was; false when
  // other ranks are involved, whose state the error may have left behind.
  virtual bool recoverable() const = 0;
};

// Emits `tok` for the slot (emit_token: the callback, end-of-generation ids, the budget) and
// returns whether the request goes on.
bool emit_slot_token(Slot& slot, int32_t tok);

}  // namespace ssd
