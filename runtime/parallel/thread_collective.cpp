// Threads as a TP group: double-buffered per-rank slots and one abortable barrier per call (the
// design is in thread_collective.h).
#include "runtime/parallel/thread_collective.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "runtime/core/error.h"

namespace ssd {

namespace {

enum class Op { AllReduce, AllGather, Broadcast };

const char* op_name(Op op) {
  switch (op) {
    case Op::AllReduce: return "allreduce_sum";
    case Op::AllGather: return "allgatherv";
    case Op::Broadcast: return "broadcast";
  }
  return "?";
}

// One rank's contribution to one call.
struct Slot {
  Op op = Op::AllReduce;
  int64_t size = 0;  // allreduce: count; allgatherv: this rank's count; broadcast: bytes
  int root = 0;      // broadcast only
  std::vector<float> data;
};

}  // namespace

struct ThreadGroup::State {
  explicit State(int n) : size(n), slots(static_cast<size_t>(n)) {}

  // A barrier that can be aborted: waiters then throw instead of waiting for a dead rank.
  // Waiters spin (yielding) for a short while before they sleep: ranks usually arrive within
  // microseconds of each other, while a sleep and wake-up costs tens of microseconds, and a
  // decoded token passes 4 barriers per layer (exact layout) plus one for the logits.
  void wait() {
    uint64_t gen = 0;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (aborted) throw Error(why);
      gen = generation.load(std::memory_order_relaxed);
      if (++arrived == size) {
        arrived = 0;
        generation.store(gen + 1, std::memory_order_release);
        if (sleepers > 0) cv.notify_all();
        return;
      }
    }
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    while (!aborted.load(std::memory_order_relaxed) &&
           std::chrono::steady_clock::now() < spin_until) {
      if (generation.load(std::memory_order_acquire) != gen) return;
      std::this_thread::yield();
    }
    std::unique_lock<std::mutex> lk(mu);
    ++sleepers;
    cv.wait(lk, [&] { return generation.load(std::memory_order_relaxed) != gen || aborted; });
    --sleepers;
    if (generation.load(std::memory_order_relaxed) == gen) throw Error(why);
  }

  void abort(const std::string& reason) {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (!aborted) why = "tensor-parallel thread group aborted: " + reason;
      aborted = true;
    }
    cv.notify_all();
  }

  const int size;
  std::vector<std::array<Slot, 2>> slots;  // [rank][call parity]
  std::mutex mu;  // guards arrived, sleepers, why; writes of aborted and generation
  std::condition_variable cv;
  int arrived = 0, sleepers = 0;
  std::atomic<uint64_t> generation{0};  // barriers completed (read by spinning waiters)
  std::atomic<bool> aborted{false};
  std::string why;
};

namespace {

class ThreadMember final : public Collective {
 public:
  ThreadMember(ThreadGroup::State& g, int rank) : g_(g), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return g_.size; }

  void allreduce_sum(float* data, int64_t count) override {
    SSD_CHECK(count >= 0, "allreduce_sum: negative count {}", count);
    Slot& mine = publish(Op::AllReduce, count);
    mine.data.assign(data, data + count);
    const int p = meet(mine);
    // Rank order, element by element: ((d0 + d1) + d2) + ... on every rank.
    std::copy_n(g_.slots[0][p].data.data(), count, data);
    for (int r = 1; r < g_.size; ++r) {
      const float* src = g_.slots[r][p].data.data();
      for (int64_t i = 0; i < count; ++i) data[i] += src[i];
    }
  }

  void allgatherv(const float* in, const int64_t* counts, float* out) override {
    SSD_CHECK(counts[rank_] >= 0, "allgatherv: negative count {}", counts[rank_]);
    Slot& mine = publish(Op::AllGather, counts[rank_]);
    mine.data.assign(in, in + counts[rank_]);
    const int p = meet(mine);
    for (int r = 0; r < g_.size; ++r) {
      const Slot& s = g_.slots[r][p];
      SSD_CHECK(s.size == counts[r],
                "allgatherv: rank {} expected {} values from rank {}, which sent {}", rank_,
                counts[r], r, s.size);
      out = std::copy_n(s.data.data(), s.size, out);
    }
  }

  void broadcast(void* data, int64_t bytes, int root) override {
    SSD_CHECK(root >= 0 && root < g_.size, "broadcast: root {} is outside the group 0..{}", root,
              g_.size - 1);
    SSD_CHECK(bytes >= 0, "broadcast: negative size {}", bytes);
    Slot& mine = publish(Op::Broadcast, bytes);
    mine.root = root;
    if (rank_ == root) {
      mine.data.resize((bytes + sizeof(float) - 1) / sizeof(float));
      std::memcpy(mine.data.data(), data, static_cast<size_t>(bytes));
    }
    const int p = meet(mine);
    if (rank_ != root) std::memcpy(data, g_.slots[root][p].data.data(), static_cast<size_t>(bytes));
  }

 private:
  Slot& publish(Op op, int64_t size) {
    Slot& s = g_.slots[rank_][calls_ & 1];
    s.op = op;
    s.size = size;
    s.root = 0;
    return s;
  }

  // The barrier, then the check that every rank made the same call. Returns the slot parity.
  int meet(const Slot& mine) {
    const int p = static_cast<int>(calls_++ & 1);
    g_.wait();
    for (int r = 0; r < g_.size; ++r) {
      const Slot& s = g_.slots[r][p];
      const bool same = s.op == mine.op && s.root == mine.root &&
                        (mine.op == Op::AllGather || s.size == mine.size);
      SSD_CHECK(same,
                "collective mismatch in call {}: rank {} called {}(size {}, root {}) but rank {} "
                "called {}(size {}, root {})", calls_ - 1, rank_, op_name(mine.op), mine.size,
                mine.root, r, op_name(s.op), s.size, s.root);
    }
    return p;
  }

  ThreadGroup::State& g_;
  const int rank_;
  uint64_t calls_ = 0;
};

}  // namespace

ThreadGroup::ThreadGroup(int size) {
  SSD_CHECK(size >= 1 && size <= 1024, "thread group of {} ranks: must be 1..1024", size);
  state_ = std::make_unique<State>(size);
  for (int r = 0; r < size; ++r) members_.push_back(std::make_unique<ThreadMember>(*state_, r));
}

ThreadGroup::~ThreadGroup() = default;

int ThreadGroup::size() const { return state_->size; }

Collective& ThreadGroup::member(int rank) {
  SSD_CHECK(rank >= 0 && rank < size(), "thread group: rank {} is outside 0..{}", rank, size() - 1);
  return *members_[rank];
}

void ThreadGroup::abort(const std::string& why) { state_->abort(why); }

void run_thread_group(int size, const std::function<void(Collective&)>& fn) {
  ThreadGroup group(size);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
  std::atomic<int> first_failed{-1};
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(group.member(r));
      } catch (...) {
        errors[r] = std::current_exception();
        int none = -1;
        first_failed.compare_exchange_strong(none, r);
        std::string what = "unknown exception";
        try {
          throw;
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        group.abort(fmt::format("rank {} failed: {}", r, what));
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first_failed.load() >= 0) std::rethrow_exception(errors[first_failed.load()]);
}

}  // namespace ssd
