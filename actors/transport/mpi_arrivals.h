// Matching the frames that have arrived on a communicator, as both transports that carry frames
// over MPI do (MpiTransport, and NcclTransport for its control frames): MPI_Improbe takes each
// arrived message off MPI's matching queue and MPI_Imrecv posts its receive, so the frames of one
// peer are matched, and so delivered, in the order they were sent; nothing blocks.
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
  for (;;) {
    int flag = 0;
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status status;
    SSD_MPI_CHECK(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &msg, &status));
    if (!flag) return;
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
