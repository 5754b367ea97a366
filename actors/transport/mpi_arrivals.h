// Matching the frames that have arrived on a communicator, as both transports that carry frames
// over MPI do (MpiTransport, and NcclTransport for its control frames): MPI_Improbe takes each
// arrived message off MPI's matching queue and MPI_Imrecv posts its receive, so the frames of one
// peer are matched, and so delivered, in the order they were sent; nothing blocks.
//
// A miss is probed twice. Open MPI's probe (ob1 over shared memory) looks in its matching queue
// first and runs the progress that moves arrived messages into that queue only after finding
// nothing there: a frame that arrived while this rank made no MPI call (a target leader
// verifying) is missed by the first probe and found by the second. A caller polling once (the
// leader's look for a pushed pre-speculation after its verification) would otherwise see such a
// frame one poll late, a round late. Tested by MpiTransport.FrameThatArrivedDuringComputeIsFound-
// ByOneTryRecv (tests/mpi/transport_mpi_test.cpp).
#pragma once

#include <mpi.h>

#include <cstddef>

#include "actors/transport/mpi_check.h"
#include "actors/transport/protocol.h"

namespace ssd {

// Appends one element to `recvs` (a deque or list of a struct with int peer, MsgKind kind,
// std::vector<std::byte> frame and MPI_Request request) for every message that has arrived on
// `comm`, its receive posted; returns once none is left.
template <class Queue>
void post_arrived_receives(MPI_Comm comm, Queue& recvs) {
  for (int misses = 0; misses < 2;) {
    int flag = 0;
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status status;
    SSD_MPI_CHECK(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &msg, &status));
    if (!flag) {
      ++misses;  // the probe progressed after missing: once more finds what that brought in
      continue;
    }
    misses = 0;
    int count = 0;
    SSD_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
    auto& r = recvs.emplace_back();
    r.peer = status.MPI_SOURCE;
    r.kind = static_cast<MsgKind>(status.MPI_TAG);
    r.frame.resize(static_cast<size_t>(count));
    SSD_MPI_CHECK(MPI_Imrecv(r.frame.data(), count, MPI_BYTE, &msg, &r.request));
  }
}

}  // namespace ssd
