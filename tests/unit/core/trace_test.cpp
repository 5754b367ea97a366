// The timeline recorder and its Chrome trace-event writer (runtime/core/trace.h):
//   - off (never started, or stopped) nothing is recorded, spans included;
//   - spans on one thread nest: an inner span lies within the outer one, and each thread's
//     events carry the track it set; args round/seqs/bytes come through;
//   - encode/decode (the end-of-run gather) is lossless;
//   - the writer moves each rank onto rank 0's clock by its offset, starts the timeline at 0,
//     names every rank and track with metadata events, and writes flows with id (and bp = e on
//     the receiving end).
#include "runtime/core/trace.h"

#include <gtest/gtest.h>

#include <thread>

namespace ssd::trace {
namespace {

TEST(Trace, RecordsNothingWhenOff) {
  stop();
  { Span s("off", "test", 1, 2); }
  instant("off", "test", 1, 1);
  flow('s', 7, "Off", 8);
  EXPECT_EQ(active(), nullptr);
  start(3);
  EXPECT_TRUE(stop().empty());
}

TEST(Trace, SpansNestPerThreadWithTheirTrackAndArgs) {
  start(2);
  std::thread other([] {
    set_track("worker");
    Span s("work", "test", 5, 1);
  });
  set_track("main loop");
  {
    Span outer("outer", "test", 4, 3);
    { Span inner("inner", "test", 4, 1); }
    instant("hit", "cache", 4, 2);
  }
  other.join();
  set_track("main");
  const std::vector<Event> ev = stop();
  ASSERT_EQ(ev.size(), 4u);
  const Event* outer = nullptr;
  const Event* inner = nullptr;
  for (const Event& e : ev) {
    EXPECT_EQ(e.pid, 2);
    if (e.name == "outer") outer = &e;
    if (e.name == "inner") inner = &e;
    if (e.name == "work") {
      EXPECT_EQ(e.track, "worker");
    }
    if (e.name == "hit") {
      EXPECT_EQ(e.ph, 'i');
      EXPECT_EQ(e.seqs, 2);
    }
  }
  ASSERT_TRUE(outer && inner);
  EXPECT_EQ(outer->track, "main loop");
  EXPECT_EQ(outer->round, 4);
  EXPECT_EQ(outer->seqs, 3);
  EXPECT_GE(inner->ts_us, outer->ts_us);
  EXPECT_LE(inner->ts_us + inner->dur_us, outer->ts_us + outer->dur_us);
}

TEST(Trace, EncodeDecodeIsLossless) {
  Event e;
  e.ph = 'f';
  e.name = "Outcome";
  e.cat = "link";
  e.track = "drafter loop";
  e.pid = 1;
  e.ts_us = 123.25;
  e.dur_us = 0.5;
  e.id = (uint64_t{1} << 40) | 9;
  e.round = 3;
  e.seqs = -1;
  e.bytes = 4096;
  const std::vector<Event> back = decode(encode({e, e}));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].ph, 'f');
  EXPECT_EQ(back[1].name, "Outcome");
  EXPECT_EQ(back[1].track, "drafter loop");
  EXPECT_EQ(back[1].id, e.id);
  EXPECT_DOUBLE_EQ(back[1].ts_us, 123.25);
  EXPECT_EQ(back[1].bytes, 4096);
  EXPECT_THROW(decode("[[\"X\"]]"), std::exception);  // a short record is refused
}

TEST(Trace, WriterMovesRanksOntoOneClockAndNamesTracks) {
  Event a;  // rank 0 at 1000 us of its clock
  a.name = "verify";
  a.track = "target";
  a.pid = 0;
  a.ts_us = 1000;
  a.dur_us = 50;
  Event s = a;
  s.ph = 's';
  s.name = "Outcome";
  s.id = 42;
  s.ts_us = 1050;
  s.dur_us = 0;
  Event f = s;  // rank 1 reads its clock 500 us ahead of rank 0's
  f.ph = 'f';
  f.pid = 1;
  f.track = "drafter loop";
  f.ts_us = 1560;
  const nlohmann::json j =
      chrome_trace({f, s, a}, {{1, 500.0}}, {{1, "rank 1 (drafter)"}}, {{"note", "x"}});
  EXPECT_EQ(j.at("metadata").at("note"), "x");
  std::map<std::string, nlohmann::json> by;
  int names = 0;
  for (const nlohmann::json& e : j.at("traceEvents")) {
    if (e.at("ph") == "M") {
      if (e.at("name") == "process_name" && e.at("pid") == 1) {
        EXPECT_EQ(e.at("args").at("name"), "rank 1 (drafter)");
      }
      names += e.at("name") == "thread_name" ? 1 : 0;
      continue;
    }
    by[e.at("ph").get<std::string>()] = e;
  }
  EXPECT_EQ(names, 2);  // one track on each rank
  EXPECT_DOUBLE_EQ(by["X"].at("ts").get<double>(), 0.0);  // the earliest event starts the timeline
  EXPECT_DOUBLE_EQ(by["X"].at("dur").get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(by["s"].at("ts").get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(by["f"].at("ts").get<double>(), 60.0);  // 1560 - 500 - 1000
  EXPECT_EQ(by["f"].at("id"), 42);
  EXPECT_EQ(by["f"].at("bp"), "e");
  EXPECT_NE(by["f"].at("tid"), nlohmann::json());
}

}  // namespace
}  // namespace ssd::trace
