// MPI point-to-point transport (see mpi_transport.h).
#include "actors/transport/mpi_transport.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdio>

#include "actors/transport/mpi_arrivals.h"
#include "actors/transport/mpi_check.h"

namespace ssd {

MpiTransport::MpiTransport(const MpiComm& comm)
    : comm_(MpiComm::dup(comm.get())),
      rank_(comm_.rank()),
      size_(comm_.size()),
      in_book_(size_),
      out_book_(size_),
      blocked_(static_cast<size_t>(size_), 0) {}

MpiTransport::~MpiTransport() {
  if (!MpiSession::initialized()) return;
  if (!flush(std::chrono::seconds(5))) {
    // A peer stopped receiving. MPI may still read these buffers, so they are left allocated
    // (leaked) rather than freed under it; the job is ending anyway.
    std::lock_guard lock(mutex_);
    std::fprintf(stderr, "ssd: rank %d: %zu message(s) still unsent when the transport closed\n",
                 rank_, sends_.size());
    for (PendingSend& s : sends_) {
      MPI_Request_free(&s.request);
      new std::vector<std::byte>(std::move(s.frame));
    }
    sends_.clear();
  }
  // Frames matched but never returned: let their receives finish (1 s at most) before the
  // buffers go; one that does not finish is left allocated, as above.
  std::lock_guard lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (PendingRecv& r : recvs_) {
    while (!r.done) {
      int done = 0;
      if (MPI_Test(&r.request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
      r.done = done != 0;
      if (!r.done && std::chrono::steady_clock::now() >= deadline) break;
    }
    if (!r.done) new std::vector<std::byte>(std::move(r.frame));
  }
}

void MpiTransport::send_frame(int peer, std::vector<std::byte> frame) {
  check_peer(*this, peer);
  const WireHeader h = check_frame(frame, rank_);
  SSD_CHECK(frame.size() <= static_cast<size_t>(INT_MAX),
            "{} frame of {} bytes to rank {} exceeds one MPI message (2 GiB)",
            kind_name(static_cast<MsgKind>(h.kind)), frame.size(), peer);
  std::lock_guard lock(mutex_);
  reap_sends_locked();
  stamp_seq(frame, out_book_.next(peer));
  PendingSend& s = sends_.emplace_back();
  s.frame = std::move(frame);
  SSD_MPI_CHECK(MPI_Isend(s.frame.data(), static_cast<int>(s.frame.size()), MPI_BYTE, peer,
                          static_cast<int>(h.kind), comm_.get(), &s.request));
}

void MpiTransport::reap_sends_locked() {
  for (auto it = sends_.begin(); it != sends_.end();) {
    int done = 0;
    SSD_MPI_CHECK(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE));
    it = done ? sends_.erase(it) : std::next(it);
  }
}

std::optional<Envelope> MpiTransport::try_recv() {
  std::lock_guard lock(mutex_);
  reap_sends_locked();
  post_arrived_receives(comm_.get(), recvs_);
  // The first matched frame whose receive is complete and that no earlier frame of its peer
  // precedes (per-peer order is match order).
  std::fill(blocked_.begin(), blocked_.end(), 0);  // an earlier frame of the peer in flight
  for (auto it = recvs_.begin(); it != recvs_.end(); ++it) {
    if (blocked_[it->peer]) continue;
    if (!it->done) {
      int done = 0;
      SSD_MPI_CHECK(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE));
      it->done = done != 0;
    }
    if (!it->done) {
      blocked_[it->peer] = 1;
      continue;
    }
    Envelope env{it->peer, it->kind, std::move(it->frame)};
    recvs_.erase(it);
    const WireHeader h = check_frame(env.bytes, env.peer);
    SSD_CHECK(h.kind == static_cast<uint16_t>(env.kind),
              "corrupted frame from rank {}: MPI tag says {}, header says {}", env.peer,
              kind_name(env.kind), kind_name(static_cast<MsgKind>(h.kind)));
    in_book_.accept(rank_, env.peer, h);
    return env;
  }
  return std::nullopt;
}

size_t MpiTransport::pending_sends() {
  std::lock_guard lock(mutex_);
  reap_sends_locked();
  return sends_.size();
}

}  // namespace ssd
