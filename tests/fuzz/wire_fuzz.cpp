// Fuzz target for the wire: every byte a peer can send before and after the handshake.
//
// One input is one received frame. It goes through what a rank does with a frame:
//   (a) check_frame() (frame.h), and for the kind the header names, decode<T>() of that message
//       (the table below lists every MsgKind of protocol.h; a kind with no handler aborts, so a
//       new message cannot be missed), plus bulk_as<> of the bulk;
//   (b) for Hello / HelloReply, the handshake's version-free decode, and rank 0's verdict
//       (judge_hellos) on the decoded Hello next to its own.
// Every ssd::Error is an expected answer to bad bytes. Anything else escapes: a crash or
// sanitizer report, another exception (std::bad_alloc included), or an abort.
//
// Two builds (tests/CMakeLists.txt): libFuzzer with clang and -DSSD_FUZZ=ON (ssd_fuzz_wire), and,
// in every build, replay_main.cpp's corpus replay + bounded mutation loop (ssd_fuzz_wire_replay,
// ctest fuzz.wire_corpus_and_60s). How to run a campaign: docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <tuple>
#include <vector>

#include "actors/transport/frame.h"
#include "actors/transport/handshake.h"
#include "actors/transport/protocol.h"
#include "runtime/core/error.h"

namespace {

using ssd::Envelope;
using ssd::MsgKind;

// Every message struct of protocol.h (kRawBytes has none: its frames carry no head).
using AllMessages =
    std::tuple<ssd::Hello, ssd::HelloReply, ssd::TargetForward, ssd::TargetKvCreate,
               ssd::TargetKvRelease, ssd::TargetKvTruncate, ssd::TargetKvCompact,
               ssd::TargetShutdown, ssd::StartSeqs, ssd::Features, ssd::Outcome,
               ssd::SpeculationMsg, ssd::PrespecShare, ssd::FinishSeqs, ssd::DrafterShutdown,
               ssd::DrafterReady, ssd::PrespecWork, ssd::DrafterStatsAsk, ssd::DrafterStatsMsg,
               ssd::PrespecCut, ssd::JoinSeqs, ssd::PrespecPush, ssd::ErrorMsg, ssd::Heartbeat, ssd::Ping,
               ssd::Pong>;

// Decodes env as the message of its kind; false when no struct has that kind.
bool decode_by_kind(const Envelope& env) {
  bool found = false;
  std::apply(
      [&](auto... tag) {
        ((env.kind == decltype(tag)::kKind
              ? (found = true, (void)ssd::decode<decltype(tag)>(env))
              : (void)0),
         ...);
      },
      AllMessages{});
  return found;
}

// Once per process: every enumerator of MsgKind but kRawBytes has a struct in AllMessages.
void check_table_is_complete() {
  static const bool checked = [] {
    for (uint32_t v = 0; v <= UINT16_MAX; ++v) {
      if (!ssd::is_known_kind(static_cast<uint16_t>(v)) || v == uint16_t(MsgKind::kRawBytes))
        continue;
      bool has = false;
      std::apply([&](auto... tag) { ((has = has || uint32_t(decltype(tag)::kKind) == v), ...); },
                 AllMessages{});
      if (!has) {
        std::fprintf(stderr, "wire_fuzz: MsgKind %u has no entry in AllMessages\n", v);
        std::abort();
      }
    }
    return true;
  }();
  (void)checked;
}

// Rank 0 of a 4-rank job (TP 2, two drafter ranks), as the handshake's root.
ssd::Hello root_hello() {
  ssd::Hello h;
  h.world = 4;
  h.rank = 0;
  h.role = ssd::Role::kTarget;
  h.tp = 2;
  h.n_drafters = 2;
  h.config_digest = 0x1111;
  h.model_digest = 0x2222;
  return h;
}

// (b): the handshake's view of a Hello / HelloReply frame.
void handshake_path(const Envelope& env) {
  if (env.kind == MsgKind::kHelloReply) {
    (void)ssd::detail::decode_head<ssd::HelloReply>(env, /*check_version=*/false);
    return;
  }
  if (env.kind != MsgKind::kHello) return;
  const ssd::Hello got = ssd::detail::decode_head<ssd::Hello>(env, /*check_version=*/false);
  const ssd::Hello root = root_hello();
  (void)ssd::judge_hellos(root, {root, got});
  (void)ssd::judge_hellos(root, {root, got, got});  // the same Hello twice: two drafter leads
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_table_is_complete();
  try {
    const auto* bytes = reinterpret_cast<const std::byte*>(data);
    const ssd::WireHeader h = ssd::check_frame(std::span<const std::byte>(bytes, size), 1);
    Envelope env;
    env.peer = 1;
    env.kind = static_cast<MsgKind>(h.kind);
    env.bytes.assign(bytes, bytes + size);
    // What a handler reads besides the head: the bulk, as the element types the protocol uses.
    volatile size_t sink = env.head().size() + env.bulk().size();
    try {
      sink = sink + env.bulk_as<int32_t>().size() + env.bulk_as<float>().size();
    } catch (const ssd::Error&) {
    }
    try {
      handshake_path(env);
    } catch (const ssd::Error&) {
    }
    (void)decode_by_kind(env);
    (void)sink;
  } catch (const ssd::Error&) {
    // bad bytes named by a clear error: the expected outcome
  }
  return 0;
}
