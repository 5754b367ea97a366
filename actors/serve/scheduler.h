// Continuous batching for the server. Requests arrive from the HTTP threads (submit) into a FIFO
// queue; the engine loop (run, on the thread that owns the engine and, in a distributed job, the
// MPI calls) admits queued requests into the running batch at every round boundary, up to
// max_batch running at once and as long as their KV positions fit the target's cache beside the
// running ones (prompt + max_tokens + the engine's verification lookahead, in whole pages), then
// runs one round for the batch. A request leaves the batch when it ends (an end-of-generation
// token, a stop string, its max_tokens) or its client has gone (cancel()); its sequence is freed
// before the next round. Beyond max_batch running + max_queue waiting, submit refuses (503).
//
// Drain (SIGTERM): begin_drain() makes submit refuse every new request; run() returns once the
// queue and the batch are empty, i.e. every request in flight has finished.
//
// Each request's events (text deltas, then one final event with the finish reason and the token
// counts) go to its RequestHandle, which the HTTP thread serving it waits on.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actors/serve/decode_engine.h"
#include "actors/serve/metrics.h"
#include "actors/serve/text_stream.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ssd {

struct ServeRequest {
  GenerationRequest gen;           // prompt tokens, max_new_tokens, sampler, stream, stop ids
  std::vector<std::string> stops;  // stop strings (end the text just before them)
  std::vector<int32_t> silent_ids; // tokens that give no text (end-of-generation ids)
};

struct ServeEvent {
  std::string text;                // new text (may be empty)
  std::vector<int32_t> token_ids;  // tokens emitted since the previous event
  bool final = false;
  std::string finish_reason;       // final: stop | length | error
  std::string error;               // final with finish_reason "error": what went wrong
  int64_t prompt_tokens = 0, completion_tokens = 0;  // final only
};

// Shared between the engine loop (producer) and the HTTP thread of the request (consumer).
class RequestHandle {
 public:
  // Waits up to `timeout` for events; returns those that arrived (empty on timeout).
  std::vector<ServeEvent> wait(std::chrono::milliseconds timeout);
  // The client has gone: the engine ends the request at the next round boundary.
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

  void push(ServeEvent e);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ServeEvent> events_;
  std::atomic<bool> cancelled_{false};
};

struct SchedulerOptions {
  int64_t max_batch = 8;  // requests decoded together
  int64_t max_queue = 64; // requests waiting beyond those
};

class Scheduler {
 public:
  // Every reference must outlive the scheduler.
  Scheduler(DecodeEngine& engine, TargetModel& target, const Tokenizer& tok,
            const SchedulerOptions& opts, ServeMetrics& metrics);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  enum class Refusal { kQueueFull, kDraining };
  // Queues the request (already validated: it fits the context on its own). Null + why when
  // refused.
  std::shared_ptr<RequestHandle> submit(ServeRequest req, Refusal* why);

  // The engine loop; returns after begin_drain() once nothing is queued or running. An engine
  // error ends the requests of the batch with an error event; the loop goes on when the engine
  // is recoverable() and the error an ssd::Error, else it is rethrown (a dead rank, a broken
  // link: the job ends with it).
  void run();
  void begin_drain();
  bool draining() const { return draining_.load(); }
  int64_t extra_positions() const { return engine_.extra_positions(); }

 private:
  struct Live {
    Slot slot;
    std::shared_ptr<RequestHandle> handle;
    std::unique_ptr<TextStream> text;
    ServeEvent pending;      // text gathered in this round, sent after it
    double t_arrival = 0, t_first = -1;
    int64_t pages = 0;       // KV pages reserved
    std::string finish;      // why it ended (set when the slot stops)
  };
  void admit_from_queue(std::vector<Live*>& joining);
  void finish(Live& l, const std::string& error = {});
  void flush_pending(Live& l);
  void fail_all(const std::string& what);
  void publish_load();

  DecodeEngine& engine_;
  TargetModel& target_;
  const Tokenizer& tok_;
  SchedulerOptions opts_;
  ServeMetrics& metrics_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Live>> queue_;      // guarded by mu_
  std::atomic<int64_t> running_count_{0};
  std::atomic<bool> draining_{false};
  std::vector<std::unique_ptr<Live>> running_;   // engine thread only
  int64_t reserved_pages_ = 0;                   // engine thread only
  int64_t next_id_ = 1;                          // guarded by mu_
};

}  // namespace ssd
