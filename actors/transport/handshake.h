// The start-up handshake: before any work, every rank sends rank 0 a Hello (protocol version,
// layout, role, digests of its configuration and model); rank 0 compares them all with its own
// and answers every rank with one HelloReply. A mismatch refuses the job on every rank with the
// same message, naming the ranks and both values:
//   "protocol version mismatch: rank 0 speaks version 1, rank 2 speaks version 2"
// Compared: magic, protocol version, world size, TP degree and drafter count, rank and role
// (against the layout), config digest (all ranks), model digest (all target ranks agree with
// rank 0, all drafter ranks with the drafter lead: the two roles load different models).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actors/transport/protocol.h"
#include "actors/transport/rank_layout.h"
#include "actors/transport/transport.h"

namespace ssd {

// 64-bit FNV-1a of a string: the config digest is digest64(resolved config as text).
uint64_t digest64(std::string_view text);

// This rank's Hello for `layout`.
Hello make_hello(const RankLayout& layout, uint64_t config_digest, uint64_t model_digest);

// Rank 0's verdict on every rank's Hello (all[0] is rank 0's own, `root`): every disagreement,
// joined with "; ", or "" when the job is accepted. Pure, so the wire fuzz target can judge
// hostile Hellos without a transport.
std::string judge_hellos(const Hello& root, const std::vector<Hello>& all);

// Thrown on the rank that received a peer's Error (or a corrupted frame) instead of a Hello or
// HelloReply: only this rank knows, so it must end the job rather than wait in MPI_Finalize.
struct HandshakePeerFailed : Error {
  using Error::Error;
};

// Runs the handshake over `world` (a transport over every rank of the job; transport rank =
// layout rank). Returns when the job is accepted; throws ssd::Error (the same message on every
// rank) when it is refused, TransportTimeout when a rank does not answer within `timeout`, and
// HandshakePeerFailed when a peer sent an Error (or a corrupted frame) instead of its Hello.
void handshake(Transport& world, const Hello& mine, std::chrono::milliseconds timeout);

}  // namespace ssd
