#include "actors/roles/tp_target.h"

#include <fmt/format.h>

#include <exception>

#include "actors/transport/frame.h"
#include "runtime/core/error.h"
#include "runtime/core/trace.h"

namespace ssd {
namespace {

TargetForward to_wire(const Batch& b) {
  TargetForward f;
  f.tokens = b.tokens;
  f.positions = b.positions;
  f.seqs.assign(b.seqs.begin(), b.seqs.end());
  f.mask = b.mask;
  f.logits_rows = b.logits_rows;
  f.hidden_layers = b.hidden_layers;
  return f;
}

Batch from_wire(TargetForward f) {
  Batch b;
  b.tokens = std::move(f.tokens);
  b.positions = std::move(f.positions);
  b.seqs.assign(f.seqs.begin(), f.seqs.end());
  b.mask = std::move(f.mask);
  b.logits_rows = std::move(f.logits_rows);
  b.hidden_layers = std::move(f.hidden_layers);
  return b;
}

// Receives the leader's next frame (length, then bytes) over the group. The wait for the length
// is idle (no deadline: the leader's next call may come after any time); the frame follows at
// once, so its wait keeps the group's deadline.
Envelope receive_frame(Collective& group) {
  uint64_t n = 0;
  group.broadcast_idle(&n, sizeof n, 0);
  SSD_CHECK(n >= sizeof(WireHeader) && n <= kMaxFrameBytes,
            "TP rank {}: the leader announced a frame of {} bytes (a frame holds {} to {} bytes)",
            group.rank(), n, sizeof(WireHeader), kMaxFrameBytes);
  Envelope env;
  env.peer = 0;
  env.bytes.resize(n);
  group.broadcast(env.bytes.data(), static_cast<int64_t>(n), 0);
  const WireHeader h = check_frame(env.bytes, 0);
  env.kind = static_cast<MsgKind>(h.kind);
  return env;
}

}  // namespace

TpLeaderTarget::TpLeaderTarget(TargetModel& shard, Collective& group)
    : shard_(shard), group_(group) {
  SSD_CHECK(group.rank() == 0, "the TP leader must be rank 0 of its group, not {}", group.rank());
}

TpLeaderTarget::~TpLeaderTarget() {
  // Unwinding from an error: the workers may be inside the collective of the call that failed,
  // so a shutdown broadcast would block forever before the error is reported. The error path
  // ends the job (and the workers with it).
  if (std::uncaught_exceptions() > uncaught_at_start_) return;
  try {
    shutdown();
  } catch (...) {
    // a destructor must not throw; a failing group ends the job through the watchdog
  }
}

template <class T>
void TpLeaderTarget::broadcast(const T& msg) {
  if (group_.size() == 1) return;
  SSD_CHECK(!shut_, "the TP group was shut down; no more target calls");
  std::vector<std::byte> frame = encode_frame(msg);
  uint64_t n = frame.size();
  group_.broadcast(&n, sizeof n, 0);
  group_.broadcast(frame.data(), static_cast<int64_t>(n), 0);
  bytes_ += static_cast<int64_t>(n + sizeof n) * (group_.size() - 1);
}

ForwardResult TpLeaderTarget::forward(const Batch& batch) {
  broadcast(to_wire(batch));
  return shard_.forward(batch);
}

SeqId TpLeaderTarget::create_seq() {
  const SeqId id = shard_.create_seq();
  broadcast(TargetKvCreate{id});
  return id;
}

void TpLeaderTarget::release_seq(SeqId seq) {
  broadcast(TargetKvRelease{seq});
  shard_.release_seq(seq);
}

void TpLeaderTarget::truncate(SeqId seq, int64_t length) {
  broadcast(TargetKvTruncate{seq, length});
  shard_.truncate(seq, length);
}

void TpLeaderTarget::compact(SeqId seq, int64_t start, std::span<const int32_t> keep) {
  broadcast(TargetKvCompact{seq, start, std::vector<int32_t>(keep.begin(), keep.end())});
  shard_.compact(seq, start, keep);
}

void TpLeaderTarget::shutdown() {
  if (shut_ || group_.size() == 1) return;
  broadcast(TargetShutdown{});
  shut_ = true;
}

void run_tp_worker(TargetModel& shard, Collective& group, Watchdog& dog, double step_s,
                   const FaultInjector* faults) {
  SSD_CHECK(group.rank() > 0, "run_tp_worker on the TP leader");
  trace::set_track("target TP shard");
  int64_t forwards = 0;
  for (int64_t call = 0;; ++call) {
    const Envelope env = receive_frame(group);
    Watchdog::Scope scope(dog, fmt::format("running target call {} ({})", call,
                                           kind_name(env.kind)),
                          step_s);
    switch (env.kind) {
      case MsgKind::kTargetForward: {
        if (faults && forwards == 0)
          faults->at(FaultPhase::kPrefill, 0, "running its first forward (the prefill)");
        if (faults && forwards > 0)
          faults->at(FaultPhase::kRound, forwards - 1,
                     fmt::format("running forward {} (verifying round {})", forwards,
                                 forwards - 1));
        ++forwards;
        trace::Span span("target forward (shard)", "target");
        shard.forward(from_wire(decode<TargetForward>(env)));
        break;
      }
      case MsgKind::kTargetKvCreate: {
        const auto m = decode<TargetKvCreate>(env);
        const SeqId id = shard.create_seq();
        SSD_CHECK(id == m.expect_seq,
                  "TP rank {}: created KV sequence {} where the leader has {} (the ranks' caches "
                  "diverged)",
                  group.rank(), id, m.expect_seq);
        break;
      }
      case MsgKind::kTargetKvRelease:
        shard.release_seq(decode<TargetKvRelease>(env).seq);
        break;
      case MsgKind::kTargetKvTruncate: {
        const auto m = decode<TargetKvTruncate>(env);
        shard.truncate(m.seq, m.len);
        break;
      }
      case MsgKind::kTargetKvCompact: {
        const auto m = decode<TargetKvCompact>(env);
        shard.compact(m.seq, m.start, m.keep);
        break;
      }
      case MsgKind::kTargetShutdown:
        decode<TargetShutdown>(env);
        return;
      default:
        fail(fmt::format("TP rank {}: unexpected {} from the leader", group.rank(),
                         kind_name(env.kind)));
    }
  }
}

}  // namespace ssd
