#include "actors/serve/scheduler.h"

#include <fmt/format.h>

#include "actors/serve/text_stream.h"
#include "runtime/core/error.h"
#include "runtime/model/target_model.h"

namespace ssd {

std::vector<ServeEvent> RequestHandle::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return !events_.empty(); });
  return std::exchange(events_, {});
}

void RequestHandle::push(ServeEvent e) {
  {
    std::lock_guard lk(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

Scheduler::Scheduler(DecodeEngine& engine, TargetModel& target, const Tokenizer& tok,
                     const SchedulerOptions& opts, ServeMetrics& metrics)
    : engine_(engine), target_(target), tok_(tok), opts_(opts), metrics_(metrics) {
  SSD_CHECK(opts.max_batch >= 1, "--max-batch {} must be at least 1", opts.max_batch);
  SSD_CHECK(opts.max_queue >= 0, "--max-queue {} must not be negative", opts.max_queue);
}

std::shared_ptr<RequestHandle> Scheduler::submit(ServeRequest req, Refusal* why) {
  auto l = std::make_unique<Live>();
  l->handle = std::make_shared<RequestHandle>();
  l->t_arrival = monotonic_seconds();
  l->text = std::make_unique<TextStream>(tok_, req.stops, req.silent_ids);
  l->slot.req = std::move(req.gen);
  std::shared_ptr<RequestHandle> h = l->handle;
  {
    std::lock_guard lk(mu_);
    if (draining_.load() || static_cast<int64_t>(queue_.size()) + running_count_.load() >=
                                opts_.max_batch + opts_.max_queue) {
      if (why) *why = draining_.load() ? Refusal::kDraining : Refusal::kQueueFull;
      metrics_.add_rejected();
      return nullptr;
    }
    l->slot.id = next_id_++;
    queue_.push_back(std::move(l));
    metrics_.set_load(static_cast<int64_t>(queue_.size()), running_count_.load());
  }
  cv_.notify_all();
  return h;
}

void Scheduler::begin_drain() {
  draining_.store(true);
  cv_.notify_all();
}

void Scheduler::publish_load() {
  std::lock_guard lk(mu_);
  running_count_.store(static_cast<int64_t>(running_.size()));
  metrics_.set_load(static_cast<int64_t>(queue_.size()), running_count_.load());
}

// Moves queued requests into the batch while there is room (FIFO: a request whose KV does not
// fit yet waits, and the ones behind it with it). Cancelled ones are dropped.
void Scheduler::admit_from_queue(std::vector<Live*>& joining) {
  const KvCapacity cap = target_.capacity();
  std::vector<std::unique_ptr<Live>> gone;
  {
    std::lock_guard lk(mu_);
    while (!queue_.empty()) {
      Live& l = *queue_.front();
      if (l.handle->cancelled()) {
        gone.push_back(std::move(queue_.front()));
        queue_.pop_front();
        continue;
      }
      if (static_cast<int64_t>(running_.size()) >= opts_.max_batch) break;
      const int64_t pages = cap.pages_for(static_cast<int64_t>(l.slot.req.prompt.size()) +
                                          l.slot.req.max_new_tokens + engine_.extra_positions());
      if (reserved_pages_ + pages > cap.pages()) break;
      l.pages = pages;
      reserved_pages_ += pages;
      joining.push_back(&l);
      running_.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    running_count_.store(static_cast<int64_t>(running_.size()));
  }
  for (auto& l : gone) {
    l->finish = "abort";
    metrics_.add_request(0, 0, 0, monotonic_seconds() - l->t_arrival, "abort");
  }
}

void Scheduler::flush_pending(Live& l) {
  if (l.pending.text.empty() && l.pending.token_ids.empty()) return;
  l.handle->push(std::exchange(l.pending, {}));
}

// The request has ended (or failed): free its sequence, send the final event, count it.
void Scheduler::finish(Live& l, const std::string& error) {
  try {
    engine_.release(l.slot);
  } catch (const std::exception& e) {
    if (error.empty()) throw;  // a release that fails on its own is an engine error
  }
  ServeEvent fin = std::exchange(l.pending, {});
  fin.final = true;
  if (!error.empty()) {
    fin.finish_reason = "error";
    fin.error = error;
  } else {
    if (l.finish.empty()) l.finish = l.slot.gen.stopped_by_eog ? "stop" : "length";
    if (l.finish != "abort") fin.text += l.text->finish();
    fin.finish_reason = l.finish;
  }
  fin.prompt_tokens = static_cast<int64_t>(l.slot.req.prompt.size());
  fin.completion_tokens = static_cast<int64_t>(l.slot.gen.tokens.size());
  const double now = monotonic_seconds();
  metrics_.add_request(fin.prompt_tokens, fin.completion_tokens,
                       l.t_first < 0 ? 0 : l.t_first - l.t_arrival, now - l.t_arrival,
                       fin.finish_reason);
  l.handle->push(std::move(fin));
  reserved_pages_ -= l.pages;
  l.pages = 0;
}

void Scheduler::fail_all(const std::string& what) {
  for (auto& l : running_) finish(*l, what.empty() ? "engine failure" : what);
  running_.clear();
  publish_load();
}

void Scheduler::run() {
  for (;;) {
    {
      std::unique_lock lk(mu_);
      if (running_.empty() && queue_.empty()) {
        if (draining_.load()) break;
        cv_.wait_for(lk, std::chrono::milliseconds(200));
        continue;
      }
    }
    // Requests whose client has gone leave before the round (their sequences freed first).
    {
      std::vector<std::unique_ptr<Live>> still;
      for (auto& l : running_) {
        if (l->handle->cancelled()) {
          l->slot.running = false;
          l->finish = "abort";
          finish(*l);
        } else {
          still.push_back(std::move(l));
        }
      }
      running_ = std::move(still);
    }

    std::vector<Live*> joining;
    admit_from_queue(joining);
    for (Live* l : joining) {
      l->slot.on_token = [this, l](int32_t tok) {
        if (l->t_first < 0) l->t_first = monotonic_seconds();
        l->pending.token_ids.push_back(tok);
        if (l->handle->cancelled()) {
          l->finish = "abort";
          return false;
        }
        l->pending.text += l->text->push(tok);
        if (l->text->stopped()) {
          l->finish = "stop";
          return false;
        }
        return true;
      };
    }
    try {
      std::vector<Slot*> slots;
      for (Live* l : joining) slots.push_back(&l->slot);
      if (!slots.empty()) engine_.admit(slots);
      slots.clear();
      for (auto& l : running_)
        if (l->slot.running) slots.push_back(&l->slot);
      if (!slots.empty()) metrics_.add_batch_round(static_cast<int64_t>(slots.size()));
      engine_.round(slots);
    } catch (const Error& e) {
      fail_all(e.what());
      if (!engine_.recoverable()) throw;
      continue;
    } catch (const std::exception& e) {
      fail_all(e.what());
      throw;
    }
    // Text of the round out, ended requests finished.
    std::vector<std::unique_ptr<Live>> still;
    for (auto& l : running_) {
      if (l->slot.running) {
        flush_pending(*l);
        still.push_back(std::move(l));
      } else {
        finish(*l);
      }
    }
    running_ = std::move(still);
    publish_load();
  }
}

}  // namespace ssd
