// The target model as the decoding drivers see it: one forward call and the few KV-cache
// operations the drivers perform on the target's sequences. Every driver (AR, SD, batched SD, a
// verification round) talks to the target through this interface only, never through a
// Transformer or a KvCache directly, so that each call can be forwarded: the tensor-parallel
// leader implements it by running the call on its own shard and mirroring it to its workers,
// which replay the same sequence of calls on theirs (every call is deterministic given the calls
// before it: create_seq hands out the same ids on every rank).
//
// Calls, all with KvCache semantics (runtime/kv/kv_cache.h):
//   forward(batch)               runs the batch and appends its K/V (batch.h); on error the
//                                cache is as before the call and ssd::Error is thrown
//   create_seq / release_seq     a new empty sequence / give its pages back
//   seq_length(seq)              positions cached
//   truncate(seq, n)             drop positions n.. (rejected drafts)
//   compact(seq, start, keep)    positions start + keep[i] move to start + i, the rest dropped
//   capacity()                   how many positions the cache holds, and in pages of what size
//   picker()                     turns the target's logits into tokens (runtime/generate/
//                                token_picker.h): where a forward leaves its logits (host, or
//                                the target's device) decides how to sample and verify them, so
//                                the target, chosen once at start-up, carries its picker
//
// LocalTarget is the single-process implementation over a Transformer and its KvCache.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/kv/kv_cache.h"
#include "runtime/model/batch.h"
#include "runtime/model/model_config.h"

namespace ssd {

class Transformer;
class TokenPicker;

// The target cache's size: `tokens` positions over all sequences, reserved in pages of
// `page_tokens` (a sequence of length L holds ceil(L / page_tokens) pages).
struct KvCapacity {
  int64_t tokens = 0;
  int64_t page_tokens = 1;
  int64_t pages() const { return (tokens + page_tokens - 1) / page_tokens; }
  int64_t pages_for(int64_t length) const { return (length + page_tokens - 1) / page_tokens; }
};

class TargetModel {
 public:
  virtual ~TargetModel() = default;

  virtual const ModelConfig& config() const = 0;
  virtual ForwardResult forward(const Batch& batch) = 0;

  virtual SeqId create_seq() = 0;
  virtual void release_seq(SeqId seq) = 0;
  virtual int64_t seq_length(SeqId seq) const = 0;
  virtual void truncate(SeqId seq, int64_t length) = 0;
  virtual void compact(SeqId seq, int64_t start, std::span<const int32_t> keep) = 0;
  virtual KvCapacity capacity() const = 0;
  // The host picker unless the target has one of its own.
  virtual TokenPicker& picker();
};

// The target on this process: `model` runs every forward on `kv`. Both must outlive it.
class LocalTarget final : public TargetModel {
 public:
  // picker: null for the host picker; otherwise it must outlive this object.
  LocalTarget(Transformer& model, KvCache& kv, TokenPicker* picker = nullptr)
      : model_(model), kv_(kv), picker_(picker) {}

  const ModelConfig& config() const override;
  ForwardResult forward(const Batch& batch) override;
  SeqId create_seq() override { return kv_.create(); }
  void release_seq(SeqId seq) override { kv_.release(seq); }
  int64_t seq_length(SeqId seq) const override { return kv_.length(seq); }
  void truncate(SeqId seq, int64_t length) override { kv_.truncate(seq, length); }
  void compact(SeqId seq, int64_t start, std::span<const int32_t> keep) override {
    kv_.compact(seq, start, keep);
  }
  KvCapacity capacity() const override {
    return KvCapacity{kv_.capacity_tokens(), kv_.config().page_tokens};
  }
  TokenPicker& picker() override;

 private:
  Transformer& model_;
  KvCache& kv_;
  TokenPicker* picker_ = nullptr;
};

// Target sequences released on every exit path (in reverse order of creation). release() gives
// one back early, e.g. when its request finishes before the others of a batch.
class TargetSeqs {
 public:
  explicit TargetSeqs(TargetModel& target) : target_(target) {}
  TargetSeqs(const TargetSeqs&) = delete;
  TargetSeqs& operator=(const TargetSeqs&) = delete;
  // Releases what is still live. A release that fails here is dropped (a destructor must not
  // throw; when unwinding, the error in flight is the one to report).
  ~TargetSeqs();

  SeqId create();
  void release(SeqId seq);

 private:
  TargetModel& target_;
  std::vector<SeqId> live_;
};

}  // namespace ssd
