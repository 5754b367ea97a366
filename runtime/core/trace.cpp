#include "runtime/core/trace.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

namespace ssd::trace {
namespace {

std::atomic<Recorder*> g_active{nullptr};
std::mutex g_owner_mu;
std::unique_ptr<Recorder> g_owner;  // keeps the active recorder alive
thread_local const char* t_track = "main";
thread_local int64_t t_round = -1;

nlohmann::json args_of(const Event& e) {
  nlohmann::json a = nlohmann::json::object();
  if (e.round >= 0) a["round"] = e.round;
  if (e.seqs >= 0) a["seqs"] = e.seqs;
  if (e.bytes >= 0) a["bytes"] = e.bytes;
  return a;
}

}  // namespace

double now_us() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

void Recorder::add(Event e) {
  e.pid = pid_;
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
}

std::vector<Event> Recorder::take() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(events_, {});
}

Recorder* active() { return g_active.load(std::memory_order_relaxed); }

void start(int32_t pid) {
  std::lock_guard<std::mutex> lock(g_owner_mu);
  g_owner = std::make_unique<Recorder>(pid);
  g_active.store(g_owner.get());
}

std::vector<Event> stop() {
  std::lock_guard<std::mutex> lock(g_owner_mu);
  g_active.store(nullptr);
  if (!g_owner) return {};
  std::vector<Event> out = g_owner->take();
  // The recorder stays owned (a thread may still hold its pointer) until the next start().
  return out;
}

void set_track(const char* name) { t_track = name; }
const char* track() { return t_track; }
void set_round(int64_t round) { t_round = round; }
int64_t round() { return t_round; }

void instant(const char* name, const char* cat, int64_t round, int64_t seqs) {
  Recorder* r = active();
  if (!r) return;
  Event e;
  e.ph = 'i';
  e.name = name;
  e.cat = cat;
  e.track = t_track;
  e.ts_us = now_us();
  e.round = round;
  e.seqs = seqs;
  r->add(std::move(e));
}

void complete(const char* name, const char* cat, double t0_us, int64_t round, int64_t seqs) {
  Recorder* r = active();
  if (!r) return;
  Event e;
  e.name = name;
  e.cat = cat;
  e.track = t_track;
  e.ts_us = t0_us;
  e.dur_us = now_us() - t0_us;
  e.round = round;
  e.seqs = seqs;
  r->add(std::move(e));
}

void flow(char ph, uint64_t id, const std::string& name, int64_t bytes) {
  Recorder* r = active();
  if (!r) return;
  Event e;
  e.ph = ph;
  e.name = name;
  e.cat = "link";
  e.track = t_track;
  e.ts_us = now_us();
  e.id = id;
  e.bytes = bytes;
  r->add(std::move(e));
}

Span::Span(const char* name, const char* cat, int64_t round, int64_t seqs)
    : rec_(active()), name_(name), cat_(cat), round_(round), seqs_(seqs) {
  if (rec_) t0_ = now_us();
}

Span::~Span() {
  if (!rec_) return;
  Event e;
  e.name = name_;
  e.cat = cat_;
  e.track = t_track;
  e.ts_us = t0_;
  e.dur_us = now_us() - t0_;
  e.round = round_;
  e.seqs = seqs_;
  rec_->add(std::move(e));
}

std::string encode(const std::vector<Event>& events) {
  nlohmann::json a = nlohmann::json::array();
  for (const Event& e : events)
    a.push_back({std::string(1, e.ph), e.name, e.cat, e.track, e.pid, e.ts_us, e.dur_us, e.id,
                 e.round, e.seqs, e.bytes});
  return a.dump();
}

std::vector<Event> decode(const std::string& text) {
  std::vector<Event> out;
  for (const nlohmann::json& j : nlohmann::json::parse(text)) {
    Event e;
    e.ph = j.at(0).get<std::string>().at(0);
    e.name = j.at(1).get<std::string>();
    e.cat = j.at(2).get<std::string>();
    e.track = j.at(3).get<std::string>();
    e.pid = j.at(4).get<int32_t>();
    e.ts_us = j.at(5).get<double>();
    e.dur_us = j.at(6).get<double>();
    e.id = j.at(7).get<uint64_t>();
    e.round = j.at(8).get<int64_t>();
    e.seqs = j.at(9).get<int64_t>();
    e.bytes = j.at(10).get<int64_t>();
    out.push_back(std::move(e));
  }
  return out;
}

nlohmann::json chrome_trace(std::vector<Event> events, const std::map<int32_t, double>& offsets_us,
                            const std::map<int32_t, std::string>& process_names,
                            const nlohmann::json& metadata) {
  for (Event& e : events) {
    auto it = offsets_us.find(e.pid);
    if (it != offsets_us.end()) e.ts_us -= it->second;  // a rank's clock minus its offset
  }
  double t0 = 0;
  if (!events.empty())
    t0 = std::min_element(events.begin(), events.end(), [](const Event& a, const Event& b) {
           return a.ts_us < b.ts_us;
         })->ts_us;
  // Spans by start, longest first at a tie: a parent precedes its children, as viewers expect.
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.ts_us != b.ts_us ? a.ts_us < b.ts_us : a.dur_us > b.dur_us;
  });
  std::map<std::pair<int32_t, std::string>, int32_t> tids;
  std::map<int32_t, int32_t> next_tid;
  nlohmann::json out = nlohmann::json::array();
  auto tid_of = [&](int32_t pid, const std::string& track) {
    auto [it, fresh] = tids.try_emplace({pid, track}, 0);
    if (fresh) {
      it->second = ++next_tid[pid];
      out.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", it->second},
                     {"args", {{"name", track}}}});
      out.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", pid},
                     {"tid", it->second}, {"args", {{"sort_index", it->second}}}});
    }
    return it->second;
  };
  std::map<int32_t, bool> named;
  for (const Event& e : events) {
    if (!named[e.pid]) {
      named[e.pid] = true;
      auto it = process_names.find(e.pid);
      const std::string pname =
          it != process_names.end() ? it->second : "rank " + std::to_string(e.pid);
      out.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", e.pid}, {"tid", 0},
                     {"args", {{"name", pname}}}});
      out.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", e.pid}, {"tid", 0},
                     {"args", {{"sort_index", e.pid}}}});
    }
    nlohmann::json j = {{"ph", std::string(1, e.ph)}, {"name", e.name}, {"cat", e.cat},
                        {"pid", e.pid},  {"tid", tid_of(e.pid, e.track)},
                        {"ts", e.ts_us - t0}, {"args", args_of(e)}};
    if (e.ph == 'X') j["dur"] = e.dur_us;
    if (e.ph == 'i') j["s"] = "t";  // an instant on its thread
    if (e.ph == 's' || e.ph == 'f') j["id"] = e.id;
    if (e.ph == 'f') j["bp"] = "e";  // binds to the enclosing slice (the receive)
    out.push_back(std::move(j));
  }
  nlohmann::json meta = metadata;
  meta["time_origin_us"] = t0;
  return {{"traceEvents", out}, {"displayTimeUnit", "ms"}, {"metadata", meta}};
}

}  // namespace ssd::trace
