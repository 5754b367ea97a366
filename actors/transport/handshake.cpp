// Start-up handshake (see handshake.h).
#include "actors/transport/handshake.h"

#include <fmt/format.h>

#include <vector>

#include "actors/transport/frame.h"
#include "runtime/core/hash.h"

namespace ssd {

uint64_t digest64(std::string_view text) { return fnv1a(text); }

Hello make_hello(const RankLayout& layout, uint64_t config_digest, uint64_t model_digest) {
  Hello h;
  h.world = layout.world;
  h.rank = layout.rank;
  h.role = layout.role();
  h.tp = layout.tp;
  h.n_drafters = layout.n_drafters();
  h.config_digest = config_digest;
  h.model_digest = model_digest;
  return h;
}

std::string judge_hellos(const Hello& root, const std::vector<Hello>& all) {
  std::vector<std::string> problems;
  const Hello* drafter_lead = nullptr;
  for (const Hello& h : all)
    if (h.role == Role::kDrafter && (!drafter_lead || h.rank < drafter_lead->rank))
      drafter_lead = &h;
  for (const Hello& h : all) {
    if (&h == &all[0]) continue;
    auto differs = [&](const char* what, auto a, auto b) {
      if (a != b) problems.push_back(fmt::format("{} mismatch: rank 0 has {}, rank {} has {}",
                                                 what, a, h.rank, b));
    };
    if (h.magic != root.magic) {
      problems.push_back(fmt::format("rank {} sent magic {:#x}, expected {:#x}", h.rank, h.magic,
                                     root.magic));
      continue;
    }
    if (h.version != root.version) {
      problems.push_back(fmt::format("protocol version mismatch: rank 0 speaks version {}, rank "
                                     "{} speaks version {}",
                                     root.version, h.rank, h.version));
      continue;  // the rest may mean something else in another version
    }
    differs("world size", root.world, h.world);
    differs("TP degree", root.tp, h.tp);
    differs("drafter rank count", root.n_drafters, h.n_drafters);
    const Role expect = h.rank < root.tp ? Role::kTarget : Role::kDrafter;
    if (h.role != expect)
      problems.push_back(fmt::format("rank {} says it is a {} rank, the layout makes it a {}",
                                     h.rank, role_name(h.role), role_name(expect)));
    if (h.config_digest != root.config_digest)
      problems.push_back(fmt::format("configuration mismatch: rank 0 has config digest {:#018x}, "
                                     "rank {} has {:#018x} (start every rank with the same flags)",
                                     root.config_digest, h.rank, h.config_digest));
    // The model is compared with the first rank of the same role (decoding guarantees a role is
    // one of the two; without a drafter lead there is no drafter model to compare with).
    const Hello* ref = h.role == Role::kTarget ? &root : drafter_lead;
    if (ref && &h != ref && h.model_digest != ref->model_digest)
      problems.push_back(fmt::format("model mismatch: {} rank {} has model digest {:#018x}, "
                                     "rank {} has {:#018x}",
                                     role_name(h.role), ref->rank, ref->model_digest, h.rank,
                                     h.model_digest));
  }
  std::string out;
  for (const std::string& p : problems) out += (out.empty() ? "" : "; ") + p;
  return out;
}

namespace {

// A peer's frame during the handshake: a peer that failed before it sent its Hello sends an
// Error instead, which is decoded (a corrupted one is refused naming its sender) and reported.
Envelope receive_hello_frame(Transport& world, std::chrono::milliseconds timeout) {
  Envelope env = world.recv(timeout);
  if (env.kind != MsgKind::kError) return env;
  try {
    const ErrorMsg e = decode<ErrorMsg>(env);
    throw HandshakePeerFailed(
        fmt::format("rank {} failed before the start-up handshake: {}", env.peer, e.what));
  } catch (const HandshakePeerFailed&) {
    throw;
  } catch (const Error& e) {  // a corrupted frame: decode names its sender
    throw HandshakePeerFailed(e.what());
  }
  return env;
}

}  // namespace

void handshake(Transport& world, const Hello& mine, std::chrono::milliseconds timeout) {
  const int n = world.size();
  SSD_CHECK(mine.rank == world.rank() && mine.world == n,
            "handshake: Hello of rank {} of {} sent over transport rank {} of {}", mine.rank,
            mine.world, world.rank(), n);
  if (world.rank() != 0) {
    world.send(0, mine);
    const Envelope env = receive_hello_frame(world, timeout);
    // HelloReply's layout is frozen: read it whatever version the sender speaks.
    const HelloReply reply = detail::decode_head<HelloReply>(env, /*check_version=*/false);
    SSD_CHECK(reply.ok, "job refused at start-up: {}", reply.what);
    return;
  }
  std::vector<Hello> all(static_cast<size_t>(n));
  std::vector<bool> seen(static_cast<size_t>(n), false);
  all[0] = mine;
  seen[0] = true;
  for (int got = 1; got < n; ++got) {
    const Envelope env = receive_hello_frame(world, timeout);
    Hello h = detail::decode_head<Hello>(env, /*check_version=*/false);
    SSD_CHECK(h.rank == env.peer && !seen[env.peer],
              "handshake: rank {} sent a Hello claiming rank {}", env.peer, h.rank);
    seen[env.peer] = true;
    all[env.peer] = h;
  }
  HelloReply reply;
  reply.what = judge_hellos(mine, all);
  reply.ok = reply.what.empty();
  for (int r = 1; r < n; ++r) world.send(r, reply);
  SSD_CHECK(reply.ok, "job refused at start-up: {}", reply.what);
}

}  // namespace ssd

