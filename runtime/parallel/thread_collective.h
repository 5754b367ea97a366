// A tensor-parallel group whose ranks are threads of one process: the Collective the tests use,
// and the way to run TP inside a single process (one thread per rank, each with its own
// Transformer, KV cache and backend).
//
// Mechanics: each rank owns two slot buffers and uses them alternately, one per collective call.
// A call copies the rank's contribution into its slot, meets the other ranks at one barrier, then
// reads every rank's slot in rank order (allreduce_sum adds them 0 + 1 + ... + T-1, so every rank
// computes bit-identical sums). One barrier per call is enough: a rank can only overwrite a slot
// again two calls later, after the next barrier, which the readers of this call have reached.
// The reduction is redundant (every rank adds all T contributions) rather than split and shared:
// the vectors here are activations of a few tokens, and this keeps one barrier per call.
//
// Failure: if any rank throws, the group is aborted and every rank blocked in (or later entering)
// a collective throws ssd::Error naming the failed rank, so no thread waits forever. Each call
// also checks that every rank made the same call with the same sizes (a mismatch is a bug in the
// caller; it is reported, not silently mixed).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/parallel/collective.h"

namespace ssd {

class ThreadGroup {
 public:
  explicit ThreadGroup(int size);
  ~ThreadGroup();
  ThreadGroup(const ThreadGroup&) = delete;
  ThreadGroup& operator=(const ThreadGroup&) = delete;

  int size() const;
  // The Collective rank `rank`'s thread calls; one thread per rank.
  Collective& member(int rank);
  // Ends every collective in progress or to come with ssd::Error(why). The first reason stays.
  void abort(const std::string& why);

  struct State;  // shared by the members (defined in the .cpp)

 private:
  std::unique_ptr<State> state_;
  std::vector<std::unique_ptr<Collective>> members_;
};

// Runs fn(comm) on `size` new threads, thread r as rank r of a fresh ThreadGroup, and returns when
// every thread has ended. If a rank throws, the group is aborted (so the other ranks do not wait
// in a collective forever) and the first rank's exception is rethrown here.
void run_thread_group(int size, const std::function<void(Collective&)>& fn);

}  // namespace ssd
