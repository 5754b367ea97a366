// The collective operations a tensor-parallel group needs, as the model code sees them. The
// transformer holds a Collective* and never knows what carries it: an in-process group of threads
// (tests, and single-process TP studies), MPI on CPU ranks (actors/transport), NCCL on GPUs.
//
// Every rank of a group calls the same operations in the same order (they are collectives).
// Determinism: allreduce_sum adds the ranks' contributions in rank order (0 + 1 + ... + T-1) on
// every rank, so all ranks hold bit-identical results and a run is reproducible; implementations
// must keep that (MPI_SUM's reduction order is not specified, so the MPI version gathers and adds
// in order rather than calling MPI_Allreduce).
#pragma once

#include <cstdint>

namespace ssd {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // data[i] = sum over ranks r (in order 0..size-1) of rank r's data[i].   data: [count]
  virtual void allreduce_sum(float* data, int64_t count) = 0;
  // Rank r contributes in[0, counts[r]); every rank receives the concatenation in rank order.
  // counts: [size()] (identical on every rank); out: [sum of counts].
  virtual void allgatherv(const float* in, const int64_t* counts, float* out) = 0;
  // bytes of `data` from `root` to every rank.
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  // broadcast() for receivers that are idle until the root has work for them (a TP worker waiting
  // for the leader's next call): where waits have deadlines (NCCL), this one has none, since the
  // root may be busy elsewhere for as long as it takes (loading, capturing graphs, waiting for a
  // drafter). The root's side is an ordinary broadcast.
  virtual void broadcast_idle(void* data, int64_t bytes, int root) { broadcast(data, bytes, root); }
};

}  // namespace ssd
