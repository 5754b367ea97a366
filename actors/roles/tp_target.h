// The target model across a tensor-parallel group, as the decoding drivers see it.
//
// Every rank of the group holds one shard of the target (runtime/parallel/tp_plan.h) in a
// LocalTarget; a forward is a collective (two all-reduces per layer and the gather of the LM
// head's vocab slices happen inside it), so every rank must run the same calls in the same order.
// The leader (rank 0) owns the requests and decides those calls: TpLeaderTarget implements
// TargetModel by broadcasting each call to the group as a protocol frame (kTargetForward,
// kTargetKv*) and then running it on its own shard; run_tp_worker() is what ranks 1..T-1 do for
// the whole job: receive the next frame, run the same call on their shard, until kTargetShutdown.
// The drivers (generate_ar_batch, generate_sd_batch, verify_round) thus run unchanged on the
// leader, and a T = 1 group is a LocalTarget with no broadcasts at all.
//
// Broadcasts travel over the group's Collective (MPI now, NCCL later): an 8-byte length, then the
// frame. Workers check every frame (magic, version, kind) and that the sequence ids they create
// are the leader's.
#pragma once

#include <exception>

#include <memory>

#include "actors/roles/fault_injection.h"
#include "actors/transport/watchdog.h"
#include "runtime/model/target_model.h"
#include "runtime/parallel/collective.h"

namespace ssd {

class TpLeaderTarget final : public TargetModel {
 public:
  // `shard` is this rank's LocalTarget; `group` the TP group's collective (rank 0 = this rank).
  TpLeaderTarget(TargetModel& shard, Collective& group);
  ~TpLeaderTarget() override;  // tells the workers to stop (once)

  const ModelConfig& config() const override { return shard_.config(); }
  ForwardResult forward(const Batch& batch) override;
  SeqId create_seq() override;
  void release_seq(SeqId seq) override;
  int64_t seq_length(SeqId seq) const override { return shard_.seq_length(seq); }
  void truncate(SeqId seq, int64_t length) override;
  void compact(SeqId seq, int64_t start, std::span<const int32_t> keep) override;
  KvCapacity capacity() const override { return shard_.capacity(); }
  // The shard's picker: the leader's forward returns the gathered logits rows where that picker
  // reads them (on a device when Batch::logits_in_backend asks; the workers always download).
  TokenPicker& picker() override { return shard_.picker(); }

  // Ends the workers' loops (idempotent).
  void shutdown();
  int64_t bytes_broadcast() const { return bytes_; }

 private:
  template <class T> void broadcast(const T& msg);
  TargetModel& shard_;
  Collective& group_;
  bool shut_ = false;
  int64_t bytes_ = 0;
  int uncaught_at_start_ = std::uncaught_exceptions();  // the destructor knows it is unwinding
};

// A TP worker (group rank >= 1): replays the leader's calls on `shard` until kTargetShutdown.
// Each wait for the next call is under no deadline (the leader may be waiting for a drafter);
// each call runs under the watchdog with `step_s`. faults: the rank's fault points (its first
// forward is the prefill's, forward N + 1 verifies round N), if any.
void run_tp_worker(TargetModel& shard, Collective& group, Watchdog& dog, double step_s,
                   const FaultInjector* faults = nullptr);

}  // namespace ssd
