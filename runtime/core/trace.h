// A timeline recorder and its Chrome trace-event writer (the JSON that Perfetto and
// chrome://tracing open). Small on purpose: one event struct, one process-wide recorder, one
// writer, so another tool (a round simulator, a benchmark) can emit the same format.
//
// Recording is off unless start() was called: every recording call first loads one atomic
// pointer and returns when it is null, so a run without --trace-json pays one relaxed load per
// span (a handful per round). When on, events go to a vector under a mutex (tens per round).
//
// Events (Chrome's "ph" phases):
//   'X' a span: ts and dur, on a track          'i' an instant (cache hit, miss, cut)
//   's' / 'f' the two ends of a flow (a message from one rank to another), joined by `id`
// Each carries pid (the rank), a track name (the thread's role: "target", "drafter loop", ...;
// the writer numbers tracks per rank and names them with thread_name metadata) and the args a
// round is read by: round, seqs (sequences or branches it served) and bytes (flows), -1 = none.
// Times are microseconds of std::chrono::steady_clock on the recording process; the writer adds
// each rank's clock offset (estimated by the caller) to put every rank on the leader's clock.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ssd::trace {

struct Event {
  char ph = 'X';
  std::string name;
  std::string cat;    // "target", "drafter", "link", "cache"
  std::string track;  // the thread's role on its rank
  int32_t pid = 0;    // the rank
  double ts_us = 0;   // start (local clock until merged)
  double dur_us = 0;  // 'X' only
  uint64_t id = 0;    // flows: the message's id, the same at both ends
  int64_t round = -1, seqs = -1, bytes = -1;
};

// Microseconds on the steady clock every recorded time uses.
double now_us();

class Recorder {
 public:
  explicit Recorder(int32_t pid) : pid_(pid) {}
  void add(Event e);
  std::vector<Event> take();  // the events so far (the recorder is emptied)
  int32_t pid() const { return pid_; }

 private:
  int32_t pid_;
  std::mutex mu_;
  std::vector<Event> events_;
};

// The process's recorder, or null when recording is off.
Recorder* active();
void start(int32_t pid);    // turns recording on for this process (replacing any earlier one)
std::vector<Event> stop();  // turns it off and returns what was recorded

// The calling thread's track name for the events it records ("main" until set).
void set_track(const char* name);
const char* track();
// The round the calling thread works on, for spans recorded below the code that knows it.
void set_round(int64_t round);
int64_t round();

void instant(const char* name, const char* cat, int64_t round, int64_t seqs);
// A span that began at t0_us (now_us()) and ends now, on the calling thread's track.
void complete(const char* name, const char* cat, double t0_us, int64_t round, int64_t seqs);
// A flow end: 's' at the sender, 'f' at the receiver, with the message's bytes.
void flow(char ph, uint64_t id, const std::string& name, int64_t bytes);

// A span from construction to destruction on the calling thread's track; nothing when off.
class Span {
 public:
  Span(const char* name, const char* cat, int64_t round = -1, int64_t seqs = -1);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  void set_seqs(int64_t seqs) { seqs_ = seqs; }

 private:
  Recorder* rec_;
  const char* name_;
  const char* cat_;
  int64_t round_, seqs_;
  double t0_ = 0;
};

// One rank's events as JSON (for gathering to rank 0) and back.
std::string encode(const std::vector<Event>& events);
std::vector<Event> decode(const std::string& text);

// Chrome trace-event JSON: {"traceEvents": [...], "displayTimeUnit": "ms", "metadata": {...}}.
// offsets_us[pid] is added to that rank's times (missing: 0); times are then made relative to
// the earliest event. process_name / thread_name metadata events name every rank and track;
// `process_names[pid]` (when given) names a rank, e.g. "rank 1: drafter".
nlohmann::json chrome_trace(std::vector<Event> events, const std::map<int32_t, double>& offsets_us,
                            const std::map<int32_t, std::string>& process_names,
                            const nlohmann::json& metadata);

}  // namespace ssd::trace
