// A rank as an actor: a mailbox fed by the Transport, handlers per message kind, and one compute
// thread, all driven by a Boost.Asio io_context on the thread that calls run() (the rank's main
// thread). The loop stays free to answer peers while compute is in flight: a handler that needs
// heavy work submit()s it; the job runs on the compute thread and its completion comes back to
// the loop as one more event. (A drafter receives an outcome and answers from its cache while its
// pre-speculation job runs; a target leader receives a speculation while it verifies.)
//
// Polling: the transport has no wake-up descriptor (MPI has none), so a timer polls try_recv().
// After a poll that found nothing the next one waits poll_min, doubling up to poll_max; a poll
// that found messages handles up to max_batch of them and polls again at once. An idle rank thus
// costs one try_recv() per poll_max (~1 us of CPU per 200 us) and leaves the core to the compute
// thread of the same rank; a message waits at most poll_max beyond its arrival. Posted functions
// and compute completions wake the loop at once (they go through the io_context, not the poll).
//
// Errors: an exception from a handler, a posted function or a compute job comes out of run() on
// the loop thread (a job's exception is carried across the thread boundary, never lost). A
// message of a kind with no handler is an error naming the kind and the sender.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>

#include "actors/transport/transport.h"

namespace ssd {

struct ActorLoopOptions {
  std::chrono::microseconds poll_min{10};   // first wait after an empty poll
  std::chrono::microseconds poll_max{200};  // longest wait between polls of an idle loop
  int max_batch = 64;                       // messages handled per poll before other events run
};

class ActorLoop {
 public:
  using Handler = std::function<void(const Envelope&)>;

  explicit ActorLoop(Transport& transport, ActorLoopOptions options = {});
  ~ActorLoop();  // waits for a running job to finish; queued jobs that have not started are dropped
  ActorLoop(const ActorLoop&) = delete;
  ActorLoop& operator=(const ActorLoop&) = delete;

  // Handler for one kind (replaces an earlier one). Call before run() or from the loop thread.
  void on(MsgKind kind, Handler handler);
  // Handler for kinds that have no handler (default: throw ssd::Error naming kind and sender).
  void on_other(Handler handler);

  // Runs fn on the loop thread. Any thread may call it.
  void post(std::function<void()> fn);
  // Runs job on the compute thread (one job at a time, in submission order), then done on the
  // loop thread. If job throws, done is not called and the exception comes out of run().
  void submit(std::function<void()> job, std::function<void()> done = {});
  template <class R> void submit(std::function<R()> job, std::function<void(R)> done);
  // Jobs submitted whose completion has not run yet (loop thread only).
  int jobs_in_flight() const { return jobs_in_flight_; }

  // Polls and dispatches until stop(); rethrows the first error of a handler or job.
  void run();
  // Makes run() return after the event in progress. Any thread may call it.
  void stop();

  Transport& transport() { return transport_; }
  boost::asio::io_context& io_context() { return io_; }

  struct Stats {
    uint64_t messages = 0;     // dispatched to a handler
    uint64_t polls = 0;        // try_recv rounds
    uint64_t empty_polls = 0;  // rounds that found nothing
    uint64_t jobs = 0;         // compute jobs completed
  };
  Stats stats() const { return stats_; }  // loop thread only

 private:
  void poll();
  void schedule_poll(std::chrono::microseconds after);
  void dispatch(const Envelope& env);

  Transport& transport_;
  ActorLoopOptions options_;
  boost::asio::io_context io_;
  boost::asio::steady_timer poll_timer_;
  std::chrono::microseconds backoff_{0};
  std::unordered_map<uint16_t, Handler> handlers_;
  Handler other_;
  std::atomic<bool> stop_requested_{false};
  std::atomic<int> jobs_in_flight_{0};
  Stats stats_;
  boost::asio::thread_pool compute_{1};  // last: destroyed (joined) first
};

template <class R>
void ActorLoop::submit(std::function<R()> job, std::function<void(R)> done) {
  auto result = std::make_shared<std::optional<R>>();
  submit([job = std::move(job), result] { result->emplace(job()); },
         [done = std::move(done), result] {
           if (done) done(std::move(**result));
         });
}

}  // namespace ssd
