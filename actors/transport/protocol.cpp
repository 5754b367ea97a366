// Names of the protocol's kinds and roles, for error messages and logs.
#include "actors/transport/protocol.h"

#include <fmt/format.h>

namespace ssd {
namespace {

const char* known_name(MsgKind kind) {
  switch (kind) {
    case MsgKind::kHello: return "Hello";
    case MsgKind::kHelloReply: return "HelloReply";
    case MsgKind::kTargetForward: return "TargetForward";
    case MsgKind::kTargetKvCreate: return "TargetKvCreate";
    case MsgKind::kTargetKvRelease: return "TargetKvRelease";
    case MsgKind::kTargetKvTruncate: return "TargetKvTruncate";
    case MsgKind::kTargetKvCompact: return "TargetKvCompact";
    case MsgKind::kTargetShutdown: return "TargetShutdown";
    case MsgKind::kStartSeqs: return "StartSeqs";
    case MsgKind::kFeatures: return "Features";
    case MsgKind::kOutcome: return "Outcome";
    case MsgKind::kSpeculation: return "Speculation";
    case MsgKind::kPrespecShare: return "PrespecShare";
    case MsgKind::kFinishSeqs: return "FinishSeqs";
    case MsgKind::kDrafterShutdown: return "DrafterShutdown";
    case MsgKind::kDrafterReady: return "DrafterReady";
    case MsgKind::kPrespecWork: return "PrespecWork";
    case MsgKind::kDrafterStatsAsk: return "DrafterStatsAsk";
    case MsgKind::kDrafterStats: return "DrafterStats";
    case MsgKind::kPrespecCut: return "PrespecCut";
    case MsgKind::kJoinSeqs: return "JoinSeqs";
    case MsgKind::kPrespecPush: return "PrespecPush";
    case MsgKind::kError: return "Error";
    case MsgKind::kHeartbeat: return "Heartbeat";
    case MsgKind::kPing: return "Ping";
    case MsgKind::kPong: return "Pong";
    case MsgKind::kRawBytes: return "RawBytes";
  }
  return nullptr;
}

}  // namespace

std::string kind_name(MsgKind kind) {
  const char* name = known_name(kind);
  return name ? std::string(name) : fmt::format("kind {}", static_cast<uint16_t>(kind));
}

bool is_known_kind(uint16_t value) { return known_name(static_cast<MsgKind>(value)) != nullptr; }

// A leader-drafted speculation travels inside the outcome; what the drafter could not adopt is
// refused here, at decoding, with the field named.
void SeqOutcome::check_loaded() const {
  auto bad = [&](const std::string& what) {
    throw cereal::Exception(fmt::format("SeqOutcome of sequence {}: {}", seq, what));
  };
  if (!leader_drafted) {
    if (!drafted.tokens.empty() || !drafted.q.empty())
      bad("a leader-drafted speculation without leader_drafted set");
    return;
  }
  if (pushed) bad("both pushed and leader_drafted");
  if (drafted.seq != seq)
    bad(fmt::format("the leader-drafted speculation names sequence {}", drafted.seq));
  if (drafted.source != static_cast<uint8_t>(SpecSource::kPrimary) &&
      drafted.source != static_cast<uint8_t>(SpecSource::kBackup))
    bad(fmt::format("the leader-drafted speculation has source {} (primary or backup expected)",
                    drafted.source));
  if (drafted.q.size() != drafted.tokens.size())
    bad(fmt::format("the leader-drafted speculation has {} tokens but {} distributions",
                    drafted.tokens.size(), drafted.q.size()));
  if (next_k == 0) bad("a leader-drafted speculation for a decode step (next_k 0)");
}

std::string_view role_name(Role role) {
  switch (role) {
    case Role::kTarget: return "target";
    case Role::kDrafter: return "drafter";
  }
  return "unknown role";
}

}  // namespace ssd
