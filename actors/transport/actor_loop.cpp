// The actor event loop (see actor_loop.h).
#include "actors/transport/actor_loop.h"

#include <boost/asio/post.hpp>

#include <exception>

#include "runtime/core/error.h"

namespace ssd {

ActorLoop::ActorLoop(Transport& transport, ActorLoopOptions options)
    : transport_(transport), options_(options), poll_timer_(io_) {
  SSD_CHECK(options_.poll_min.count() >= 0 && options_.poll_max >= options_.poll_min,
            "actor loop: poll interval {} us .. {} us is not a valid range",
            options_.poll_min.count(), options_.poll_max.count());
  SSD_CHECK(options_.max_batch >= 1, "actor loop: max_batch must be >= 1, got {}",
            options_.max_batch);
}

ActorLoop::~ActorLoop() {
  compute_.stop();  // drop jobs not started yet
  compute_.join();  // the running one finishes; its completion is never delivered
}

void ActorLoop::on(MsgKind kind, Handler handler) {
  handlers_[static_cast<uint16_t>(kind)] = std::move(handler);
}

void ActorLoop::on_other(Handler handler) { other_ = std::move(handler); }

void ActorLoop::post(std::function<void()> fn) { boost::asio::post(io_, std::move(fn)); }

void ActorLoop::submit(std::function<void()> job, std::function<void()> done) {
  ++jobs_in_flight_;
  boost::asio::post(compute_, [this, job = std::move(job), done = std::move(done)]() mutable {
    std::exception_ptr error;
    try {
      job();
    } catch (...) {
      error = std::current_exception();
    }
    boost::asio::post(io_, [this, error, done = std::move(done)] {
      --jobs_in_flight_;
      ++stats_.jobs;
      if (error) std::rethrow_exception(error);
      if (done) done();
    });
  });
}

void ActorLoop::run() {
  stop_requested_ = false;
  io_.restart();
  backoff_ = std::chrono::microseconds(0);
  schedule_poll(backoff_);
  io_.run();
}

void ActorLoop::stop() {
  stop_requested_ = true;
  io_.stop();
}

void ActorLoop::schedule_poll(std::chrono::microseconds after) {
  poll_timer_.expires_after(after);
  poll_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) poll();
  });
}

void ActorLoop::poll() {
  ++stats_.polls;
  int handled = 0;
  while (handled < options_.max_batch && !stop_requested_) {
    std::optional<Envelope> env = transport_.try_recv();
    if (!env) break;
    ++handled;
    dispatch(*env);
  }
  if (stop_requested_) return;
  if (handled > 0) {
    backoff_ = std::chrono::microseconds(0);
  } else {
    ++stats_.empty_polls;
    backoff_ = backoff_.count() == 0 ? options_.poll_min
                                     : std::min(backoff_ * 2, options_.poll_max);
  }
  schedule_poll(backoff_);
}

void ActorLoop::dispatch(const Envelope& env) {
  ++stats_.messages;
  auto it = handlers_.find(static_cast<uint16_t>(env.kind));
  if (it != handlers_.end()) return it->second(env);
  if (other_) return other_(env);
  fail(fmt::format("rank {} got {} from rank {} and has no handler for it", transport_.rank(),
                   kind_name(env.kind), env.peer));
}

}  // namespace ssd
