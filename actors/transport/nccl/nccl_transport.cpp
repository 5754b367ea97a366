// MPI control plane + NCCL lanes (see nccl_transport.h).
#include "actors/transport/nccl/nccl_transport.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>

#include "actors/transport/mpi_arrivals.h"
#include "actors/transport/mpi_check.h"
#include "actors/transport/nccl/nccl_bootstrap.h"
#include "actors/transport/nccl/nccl_check.h"
#include "actors/transport/nccl/nccl_frames.h"

namespace ssd {

// One direction with one peer: its communicator (this rank and the peer), staging buffers and
// the event of the chunk in flight.
struct NcclTransport::Lane {
  NcclComm comm;
  int peer = -1;          // in the group
  bool sending = false;   // this rank sends on it (else it receives)
  void* device = nullptr;     // [chunk_bytes] device staging, allocated at construction
  std::byte* host = nullptr;  // [chunk_bytes] pinned host staging
  cudaEvent_t event = nullptr;
  bool in_flight = false;
  size_t chunk_bytes = 0;
  std::chrono::steady_clock::time_point started;

  ~Lane() {
    if (device) cudaFree(device);
    if (host) cudaFreeHost(host);
    if (event) cudaEventDestroy(event);
  }
  // At construction only: a cudaMalloc on the loop thread while NCCL kernels of other
  // communicators run can deadlock (NCCL's documentation warns of it), so nothing allocates
  // once the lanes carry traffic.
  void allocate_staging(size_t bytes) {
    SSD_ASSERT(!device);
    chunk_bytes = bytes;
    SSD_CUDA_CHECK(cudaMalloc(&device, bytes));
    SSD_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host), bytes));
    SSD_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  }
  // Polls the chunk in flight: true when it completed; ends the job on error or timeout.
  bool chunk_done(std::chrono::milliseconds timeout, const std::string& what) {
    const WaitStatus st = comm.op_status(event);
    if (st.state == WaitState::kDone) {
      in_flight = false;
      return true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (st.state == WaitState::kError || now - started >= timeout) {
      WaitSubject s = comm.subject();
      s.waiting_for = what;
      comm.fail_job(wait_failure_message(s, st,
                                         std::chrono::duration<double>(now - started).count()));
    }
    return false;
  }
};

namespace {

std::string frame_what(bool send, const std::vector<std::byte>& frame, int peer_world,
                       const ByteChunk& c) {
  WireHeader h;
  std::memcpy(&h, frame.data(), sizeof h);
  return fmt::format("the {} of {} frame #{} ({} payload bytes) {} rank {}, bytes [{}, {})",
                     send ? "send" : "receive", kind_name(static_cast<MsgKind>(h.kind)), h.seq,
                     h.payload_bytes, send ? "to" : "from", peer_world, c.offset,
                     c.offset + c.bytes);
}

}  // namespace

NcclTransport::NcclTransport(const MpiComm& comm, NcclTransportOptions options)
    : comm_(MpiComm::dup(comm.get())),
      opt_(options),
      rank_(comm_.rank()),
      size_(comm_.size()),
      out_lanes_(static_cast<size_t>(size_)),
      in_lanes_(static_cast<size_t>(size_)),
      out_queue_(static_cast<size_t>(size_)),
      in_queue_(static_cast<size_t>(size_)),
      in_book_(size_),
      out_book_(size_),
      blocked_(static_cast<size_t>(size_), 0) {
  SSD_CHECK(opt_.chunk_bytes > 0 && opt_.nccl_min_bytes > sizeof(WireHeader),
            "NCCL transport: chunk of {} bytes, NCCL threshold of {} bytes",
            opt_.chunk_bytes, opt_.nccl_min_bytes);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  if (size_ == 1) return;
  SSD_CUDA_CHECK(cudaGetDevice(&device_));  // placement made this rank's device current
  // World ranks of the group, for messages.
  std::vector<int> world(static_cast<size_t>(size_));
  SSD_MPI_CHECK(MPI_Allgather(&world_rank_, 1, MPI_INT, world.data(), 1, MPI_INT, comm_.get()));
  // Id of lane i -> j at lane_id_index(i, j): only the size * (size - 1) lanes that exist (each
  // unique id holds a bootstrap listener open on group rank 0 until a communicator uses it).
  const size_t n = static_cast<size_t>(size_) * static_cast<size_t>(size_ - 1);
  const std::vector<ncclUniqueId> ids = broadcast_unique_ids(comm_, 0, n);
  SSD_NCCL_CHECK(ncclGroupStart());
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    auto out = std::make_unique<Lane>();
    out->peer = p;
    out->sending = true;
    out->comm = NcclComm::start(ids[lane_id_index(rank_, p, size_)], 2, 0,
                                WaitSubject{world_rank_, world[p],
                                            fmt::format("lane {}->{}", world_rank_, world[p]),
                                            {}});
    auto in = std::make_unique<Lane>();
    in->peer = p;
    in->comm = NcclComm::start(ids[lane_id_index(p, rank_, size_)], 2, 1,
                               WaitSubject{world_rank_, world[p],
                                           fmt::format("lane {}->{}", world[p], world_rank_),
                                           {}});
    out_lanes_[p] = std::move(out);
    in_lanes_[p] = std::move(in);
  }
  SSD_NCCL_CHECK(ncclGroupEnd());
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    out_lanes_[p]->comm.wait_ready(opt_.timeout);
    in_lanes_[p]->comm.wait_ready(opt_.timeout);
  }
  // Warm-up: one byte each way on every lane, in one group, so every connection is set up now.
  void* probe = nullptr;
  SSD_CUDA_CHECK(cudaMalloc(&probe, 2));
  SSD_NCCL_CHECK(ncclGroupStart());
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    SSD_NCCL_CHECK(ncclSend(probe, 1, ncclUint8, 1, out_lanes_[p]->comm.get(),
                            out_lanes_[p]->comm.stream()));
    SSD_NCCL_CHECK(ncclRecv(static_cast<char*>(probe) + 1, 1, ncclUint8, 0,
                            in_lanes_[p]->comm.get(), in_lanes_[p]->comm.stream()));
  }
  SSD_NCCL_CHECK(ncclGroupEnd());
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    for (Lane* l : {out_lanes_[p].get(), in_lanes_[p].get()}) {
      l->comm.wait_enqueued("the lane's warm-up byte to be enqueued", opt_.timeout);
      l->comm.wait_stream("the lane's warm-up byte", opt_.timeout);
    }
  }
  SSD_CUDA_CHECK(cudaFree(probe));
  // Staging for every lane now, before any traffic (see Lane::allocate_staging).
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    out_lanes_[p]->allocate_staging(opt_.chunk_bytes);
    in_lanes_[p]->allocate_staging(opt_.chunk_bytes);
  }
}

NcclTransport::~NcclTransport() {
  if (!MpiSession::initialized()) return;
  (void)cudaSetDevice(device_);  // the lanes' device, whichever thread closes the transport
  if (!flush(std::chrono::seconds(5))) {
    // As MpiTransport: buffers MPI or NCCL may still read are leaked, not freed under them.
    std::lock_guard lock(mutex_);
    std::fprintf(stderr, "ssd: rank %d: %zu message(s) still unsent when the NCCL transport "
                 "closed\n", world_rank_, sends_.size());
    for (OutFrame& s : sends_) {
      if (!s.mpi_done) MPI_Request_free(&s.request);
      new std::vector<std::byte>(std::move(s.frame));
    }
    sends_.clear();
    for (auto& l : out_lanes_)
      if (l) l->comm.abort();
    for (auto& l : in_lanes_)
      if (l) l->comm.abort();
  }
  std::lock_guard lock(mutex_);
  for (InFrame& r : recvs_) {
    if (!r.mpi_done) {
      MPI_Cancel(&r.request);
      new std::vector<std::byte>(std::move(r.frame));
    }
  }
  for (auto& l : in_lanes_)
    if (l && l->in_flight) l->comm.abort();  // a payload nobody will send any more
}

void NcclTransport::send_frame(int peer, std::vector<std::byte> frame) {
  check_peer(*this, peer);
  check_frame(frame, rank_);
  SSD_CHECK(peer != rank_, "NCCL transport: rank {} cannot send to itself", rank_);
  std::lock_guard lock(mutex_);
  stamp_seq(frame, out_book_.next(peer));
  OutFrame& s = sends_.emplace_back();
  s.peer = peer;
  s.frame = std::move(frame);
  s.over_nccl = payload_over_nccl(s.frame.size(), opt_.nccl_min_bytes);
  const size_t mpi_bytes = s.over_nccl ? sizeof(WireHeader) : s.frame.size();
  SSD_CHECK(mpi_bytes <= static_cast<size_t>(INT_MAX),
            "frame of {} bytes to rank {} exceeds one MPI message (raise the NCCL threshold?)",
            mpi_bytes, peer);
  WireHeader h;
  std::memcpy(&h, s.frame.data(), sizeof h);
  SSD_MPI_CHECK(MPI_Isend(s.frame.data(), static_cast<int>(mpi_bytes), MPI_BYTE, peer,
                          static_cast<int>(h.kind), comm_.get(), &s.request));
  if (s.over_nccl) out_queue_[peer].push_back(&s);
  progress_locked();
}

void NcclTransport::progress_out_lane_locked(int peer) {
  Lane& lane = *out_lanes_[peer];
  std::deque<OutFrame*>& q = out_queue_[peer];
  while (!q.empty()) {
    OutFrame& f = *q.front();
    const size_t payload = f.frame.size() - sizeof(WireHeader);
    const std::vector<ByteChunk> chunks = split_chunks(payload, lane.chunk_bytes);
    if (lane.in_flight) {
      if (!lane.chunk_done(opt_.timeout, frame_what(true, f.frame, lane.comm.subject().peer,
                                                    chunks[f.chunks_done])))
        return;
      ++f.chunks_done;
    }
    if (f.chunks_done == chunks.size()) {
      q.pop_front();
      continue;
    }
    const ByteChunk c = chunks[f.chunks_done];
    const std::string what = frame_what(true, f.frame, lane.comm.subject().peer, c);
    std::memcpy(lane.host, f.frame.data() + sizeof(WireHeader) + c.offset, c.bytes);
    cudaStream_t s = lane.comm.stream();
    SSD_CUDA_CHECK(cudaMemcpyAsync(lane.device, lane.host, c.bytes, cudaMemcpyHostToDevice,
                                        s));
    SSD_NCCL_CHECK(ncclSend(lane.device, c.bytes, ncclUint8, 1, lane.comm.get(), s));
    lane.comm.wait_enqueued(what + " to be enqueued", opt_.timeout);
    SSD_CUDA_CHECK(cudaEventRecord(lane.event, s));
    lane.in_flight = true;
    lane.started = std::chrono::steady_clock::now();
    return;
  }
}

void NcclTransport::progress_in_lane_locked(int peer) {
  Lane& lane = *in_lanes_[peer];
  std::deque<InFrame*>& q = in_queue_[peer];
  while (!q.empty()) {
    InFrame& f = *q.front();
    const size_t payload = f.frame.size() - sizeof(WireHeader);
    const std::vector<ByteChunk> chunks = split_chunks(payload, lane.chunk_bytes);
    if (lane.in_flight) {
      const ByteChunk c = chunks[f.chunks_done];
      if (!lane.chunk_done(opt_.timeout, frame_what(false, f.frame, lane.comm.subject().peer, c)))
        return;
      std::memcpy(f.frame.data() + sizeof(WireHeader) + c.offset, lane.host, c.bytes);
      ++f.chunks_done;
    }
    if (f.chunks_done == chunks.size()) {
      f.over_nccl = false;
      f.done = true;
      q.pop_front();
      continue;
    }
    const ByteChunk c = chunks[f.chunks_done];
    const std::string what = frame_what(false, f.frame, lane.comm.subject().peer, c);
    cudaStream_t s = lane.comm.stream();
    SSD_NCCL_CHECK(ncclRecv(lane.device, c.bytes, ncclUint8, 0, lane.comm.get(), s));
    lane.comm.wait_enqueued(what + " to be enqueued", opt_.timeout);
    SSD_CUDA_CHECK(cudaMemcpyAsync(lane.host, lane.device, c.bytes, cudaMemcpyDeviceToHost,
                                        s));
    SSD_CUDA_CHECK(cudaEventRecord(lane.event, s));
    lane.in_flight = true;
    lane.started = std::chrono::steady_clock::now();
    return;
  }
}

void NcclTransport::progress_locked() {
  // Every entry point (send_frame, try_recv, pending_sends, flush) comes here first, from
  // whichever thread calls: the lanes' CUDA calls must go to this rank's device.
  SSD_CUDA_CHECK(cudaSetDevice(device_));
  // MPI sends: a frame is finished when its MPI part and its NCCL payload (if any) are done.
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (!it->mpi_done) {
      int done = 0;
      SSD_MPI_CHECK(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE));
      it->mpi_done = done != 0;
    }
    const bool nccl_done = !it->over_nccl ||
                           std::find(out_queue_[it->peer].begin(), out_queue_[it->peer].end(),
                                     &*it) == out_queue_[it->peer].end();
    it = it->mpi_done && nccl_done ? sends_.erase(it) : std::next(it);
  }
  for (int p = 0; p < size_; ++p)
    if (p != rank_) progress_out_lane_locked(p);
  post_arrived_receives(comm_.get(), recvs_);
  // Arrived headers whose payload follows join their lane's queue, in match (= send) order.
  for (InFrame& r : recvs_) {
    if (!r.mpi_done) {
      int done = 0;
      SSD_MPI_CHECK(MPI_Test(&r.request, &done, MPI_STATUS_IGNORE));
      r.mpi_done = done != 0;
      if (!r.mpi_done) continue;
      const ControlMessage c = classify_control_message(r.frame, r.peer);
      SSD_CHECK(c.header.kind == static_cast<uint16_t>(r.kind),
                "corrupted frame from rank {}: MPI tag says {}, header says {}", r.peer,
                kind_name(r.kind), kind_name(static_cast<MsgKind>(c.header.kind)));
      r.over_nccl = c.payload_follows;
      r.done = !r.over_nccl;
      if (r.over_nccl) {
        SSD_CHECK(c.header.payload_bytes <= kMaxFrameBytes - sizeof(WireHeader),
                  "NCCL transport: frame header from rank {} announces {} payload bytes, more "
                  "than a frame may hold ({} bytes)",
                  r.peer, c.header.payload_bytes, kMaxFrameBytes);
        r.frame.resize(sizeof(WireHeader) + c.header.payload_bytes);
      }
    }
    if (r.over_nccl && !r.queued) {
      r.queued = true;
      in_queue_[r.peer].push_back(&r);
    }
  }
  for (int p = 0; p < size_; ++p)
    if (p != rank_) progress_in_lane_locked(p);
}

std::optional<Envelope> NcclTransport::try_recv() {
  std::lock_guard lock(mutex_);
  progress_locked();
  std::fill(blocked_.begin(), blocked_.end(), 0);
  for (auto it = recvs_.begin(); it != recvs_.end(); ++it) {
    if (blocked_[it->peer]) continue;
    if (!it->done) {
      blocked_[it->peer] = 1;
      continue;
    }
    Envelope env{it->peer, it->kind, std::move(it->frame)};
    recvs_.erase(it);
    const WireHeader h = check_frame(env.bytes, env.peer);
    in_book_.accept(rank_, env.peer, h);
    return env;
  }
  return std::nullopt;
}

size_t NcclTransport::pending_sends() {
  std::lock_guard lock(mutex_);
  progress_locked();
  return sends_.size();
}

}  // namespace ssd
