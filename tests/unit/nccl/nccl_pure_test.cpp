// The NCCL layer's logic that needs no GPU: unique-id bootstrap buffers (round trip, and each
// corruption named), the frame split between MPI and NCCL and its chunk plan (both sides derive
// the same chunks), the failure messages, and the deadline/abort path of every NCCL wait driven
// by a fake status function. The rank-order sum behind the exact all-reduce is checked against a
// float64 sum. The cases that need a GPU are in nccl_gpu_test.cpp and skip visibly here.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "actors/transport/frame.h"
#include "actors/transport/nccl/nccl_bootstrap.h"
#include "actors/transport/nccl/nccl_collective.h"
#include "actors/transport/nccl/nccl_frames.h"
#include "actors/transport/nccl/nccl_transport.h"
#include "actors/transport/nccl/nccl_wait.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

std::vector<ncclUniqueId> fake_ids(size_t n) {
  std::vector<ncclUniqueId> ids(n);
  for (size_t i = 0; i < n; ++i)
    for (size_t b = 0; b < sizeof(ncclUniqueId); ++b)
      ids[i].internal[b] = static_cast<char>((i * 131 + b * 7) & 0xff);
  return ids;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(NcclBootstrap, UniqueIdsRoundTrip) {
  const std::vector<ncclUniqueId> ids = fake_ids(20);
  const std::vector<std::byte> buf = pack_unique_ids(ids);
  EXPECT_EQ(buf.size(), kNcclIdHeaderBytes + 20 * NCCL_UNIQUE_ID_BYTES);
  const std::vector<ncclUniqueId> back = unpack_unique_ids(buf, 20);
  ASSERT_EQ(back.size(), 20u);
  for (size_t i = 0; i < 20; ++i)
    EXPECT_EQ(std::memcmp(&back[i], &ids[i], sizeof(ncclUniqueId)), 0) << i;
  EXPECT_TRUE(unpack_unique_ids(pack_unique_ids({}), 0).empty());
}

TEST(NcclBootstrap, CorruptBuffersAreNamed) {
  std::vector<std::byte> buf = pack_unique_ids(fake_ids(2));
  EXPECT_NE(error_of([&] { unpack_unique_ids(buf, 3); }).find("holds 2 unique id(s), expected 3"),
            std::string::npos);
  std::vector<std::byte> cut(buf.begin(), buf.end() - 1);
  EXPECT_NE(error_of([&] { unpack_unique_ids(cut, 2); }).find("expected 264 bytes"),
            std::string::npos);
  EXPECT_NE(error_of([&] { unpack_unique_ids(std::span(buf).first(4), 2); }).find("shorter"),
            std::string::npos);
  std::vector<std::byte> bad = buf;
  bad[0] = std::byte{0};
  EXPECT_NE(error_of([&] { unpack_unique_ids(bad, 2); }).find("magic"), std::string::npos);
  bad = buf;
  bad[4] = std::byte{9};
  EXPECT_NE(error_of([&] { unpack_unique_ids(bad, 2); }).find("version 9"), std::string::npos);
}

TEST(NcclTransportLanes, OneUniqueIdPerLaneNoneForTheDiagonal) {
  // Every ordered pair (i, j), i != j, gets its own index in 0 .. size * (size - 1), with no
  // gaps, for the job sizes a run uses (2 ranks, 4+1, 8+1).
  for (int size : {2, 3, 5, 9}) {
    std::vector<int> seen(static_cast<size_t>(size * (size - 1)), 0);
    for (int i = 0; i < size; ++i)
      for (int j = 0; j < size; ++j)
        if (i != j) ++seen.at(lane_id_index(i, j, size));
    for (size_t k = 0; k < seen.size(); ++k) EXPECT_EQ(seen[k], 1) << "size " << size << " id " << k;
  }
  EXPECT_EQ(lane_id_index(0, 1, 2), 0u);
  EXPECT_EQ(lane_id_index(1, 0, 2), 1u);
  EXPECT_EQ(lane_id_index(4, 3, 5), 4u * 4u + 3u);
}

TEST(NcclFrames, SmallFramesGoWholeOverMpi) {
  EXPECT_FALSE(payload_over_nccl(100, 64 << 10));
  EXPECT_TRUE(payload_over_nccl(64 << 10, 64 << 10));
  EXPECT_FALSE(payload_over_nccl(sizeof(WireHeader), 1));  // no payload: nothing for NCCL
}

TEST(NcclFrames, ChunksCoverThePayloadOnce) {
  EXPECT_TRUE(split_chunks(0, 10).empty());
  EXPECT_EQ(split_chunks(10, 10), (std::vector<ByteChunk>{{0, 10}}));
  EXPECT_EQ(split_chunks(25, 10), (std::vector<ByteChunk>{{0, 10}, {10, 10}, {20, 5}}));
  for (size_t total : {1u, 4095u, 4096u, 4097u, 1000003u}) {
    size_t at = 0;
    for (const ByteChunk& c : split_chunks(total, 4096)) {
      EXPECT_EQ(c.offset, at);
      EXPECT_GT(c.bytes, 0u);
      EXPECT_LE(c.bytes, 4096u);
      at += c.bytes;
    }
    EXPECT_EQ(at, total);
  }
  EXPECT_THROW(split_chunks(10, 0), Error);
}

TEST(NcclFrames, ControlMessagesAreClassified) {
  const std::vector<float> bulk(1000, 1.5f);
  const std::vector<std::byte> frame = build_frame(MsgKind::kRawBytes, {}, as_bytes_of(bulk));
  const ControlMessage whole = classify_control_message(frame, 3);
  EXPECT_FALSE(whole.payload_follows);
  EXPECT_EQ(whole.header.payload_bytes, 4000u);
  // The header alone: its payload follows over NCCL (the header is the size prefix).
  const ControlMessage head = classify_control_message(std::span(frame).first(32), 3);
  EXPECT_TRUE(head.payload_follows);
  EXPECT_EQ(head.header.payload_bytes, 4000u);
  // Neither: a truncated frame, a foreign message.
  EXPECT_NE(error_of([&] { classify_control_message(std::span(frame).first(100), 3); })
                .find("truncated RawBytes frame from rank 3"),
            std::string::npos);
  std::vector<std::byte> foreign = frame;
  foreign[0] = std::byte{0x42};
  EXPECT_NE(error_of([&] { classify_control_message(foreign, 3); }).find("bad magic"),
            std::string::npos);
  EXPECT_NE(error_of([&] { classify_control_message(std::span(frame).first(8), 3); })
                .find("shorter than a frame header"),
            std::string::npos);
}

TEST(NcclWait, MessagesNameRankPeerAndWait) {
  const WaitSubject s{0, 4, "lane 0->4", "the send of Outcome frame #7"};
  const std::string err = wait_failure_message(s, {WaitState::kError, "remote process exited"},
                                               1.25);
  EXPECT_EQ(err, "rank 0: NCCL error on lane 0->4 with rank 4 while waiting for the send of "
                 "Outcome frame #7 after 1.250 s: remote process exited");
  const WaitSubject g{2, -1, "target TP group", "allgatherv of 4096 floats"};
  const std::string tmo = wait_failure_message(g, {}, 30);
  EXPECT_NE(tmo.find("rank 2: NCCL timed out on target TP group (all ranks of the group) after "
                     "30.000 s waiting for allgatherv of 4096 floats"),
            std::string::npos)
      << tmo;
}

TEST(NcclWait, ReturnsWhenDone) {
  int polls = 0;
  std::string failed;
  wait_until_done(
      [&] { return ++polls < 5 ? WaitStatus{} : WaitStatus{WaitState::kDone, {}}; },
      std::chrono::milliseconds(5000), {}, [&](const std::string& m) { failed = m; });
  EXPECT_EQ(polls, 5);
  EXPECT_EQ(failed, "");
}

TEST(NcclWait, ErrorCallsFailAtOnce) {
  int polls = 0;
  std::string failed;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(wait_until_done(
                   [&] {
                     ++polls;
                     return WaitStatus{WaitState::kError, "unhandled cuda error"};
                   },
                   std::chrono::milliseconds(60000), {1, 0, "lane 1->0", "x"},
                   [&](const std::string& m) { failed = m; }),
               Error);
  EXPECT_EQ(polls, 1);
  EXPECT_NE(failed.find("unhandled cuda error"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(NcclWait, TimeoutCallsFailAfterTheDeadline) {
  // A peer that never posts: the status stays pending. Deadline 150 ms; the wait must end no
  // earlier, and well before 5 s (the sleep between polls is capped at max_sleep = 100 us, so
  // the overshoot is scheduling noise on a loaded 2-core machine, not the poll interval).
  std::string failed;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(wait_until_done([] { return WaitStatus{}; }, std::chrono::milliseconds(150),
                               {3, 4, "lane 3->4", "the receive of Speculation frame #2"},
                               [&](const std::string& m) { failed = m; }),
               Error);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(150));
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_NE(failed.find("rank 3: NCCL timed out on lane 3->4 with rank 4"), std::string::npos)
      << failed;
}

// An idle wait (a TP worker waiting for the leader's next call) has no deadline: it outlasts any
// step deadline and returns when the work comes. 300 polls take far longer than 0 ms would allow.
TEST(NcclWait, IdleWaitHasNoDeadline) {
  int polls = 0;
  std::string failed;
  wait_until_done(
      [&] { return WaitStatus{++polls < 300 ? WaitState::kPending : WaitState::kDone, ""}; },
      kNoDeadline, {1, -1, "target TP group", "the leader's next call"},
      [&](const std::string& m) { failed = m; }, std::chrono::microseconds(1000));
  EXPECT_EQ(polls, 300);
  EXPECT_EQ(failed, "");
}

TEST(NcclWait, IdleWaitStillEndsOnAnError) {
  std::string failed;
  EXPECT_THROW(wait_until_done([] { return WaitStatus{WaitState::kError, "remote process exited"}; },
                               kNoDeadline, {1, -1, "target TP group", "the leader's next call"},
                               [&](const std::string& m) { failed = m; }),
               Error);
  EXPECT_NE(failed.find("remote process exited"), std::string::npos) << failed;
}

TEST(NcclCollectiveMath, RankOrderSumIsTheDocumentedOrder) {
  // Float addition is not associative: with 1e8 (spacing 8) and two 5s,
  // (1e8 + 5) + 5 = 100000016 but 1e8 + (5 + 5) = 100000008. Rank order must give the first,
  // bit for bit; the second column is exact in any order.
  const std::vector<float> g = {1e8f, 2.f, 5.f, 3.f, 5.f, 4.f};  // [3 ranks, 2]
  std::vector<float> out(2);
  sum_in_rank_order(g.data(), 3, 2, out.data());
  EXPECT_EQ(out[0], (1e8f + 5.f) + 5.f);
  EXPECT_NE(out[0], 1e8f + (5.f + 5.f));  // the other order differs, so this test can fail
  EXPECT_EQ(out[1], 9.f);
}

// The host path's chunks of a gather: every rank's entries covered once, in order, no piece
// longer than the staging, and the same rounds whoever computes them (they depend on the counts
// and the step only).
TEST(NcclCollectiveMath, StagedRoundsCoverEveryRanksEntriesOnce) {
  const int64_t counts[] = {10, 0, 3, 7};
  const std::vector<StagedRound> rounds = staged_rounds(counts, 4, 4);
  ASSERT_EQ(rounds.size(), 3u);  // the longest block, 10 entries, in 4 + 4 + 2
  std::vector<int64_t> covered(4, 0);
  for (size_t k = 0; k < rounds.size(); ++k) {
    EXPECT_EQ(rounds[k].at, static_cast<int64_t>(k) * 4);
    ASSERT_EQ(rounds[k].n.size(), 4u);
    for (int r = 0; r < 4; ++r) {
      EXPECT_LE(rounds[k].n[r], 4);
      if (rounds[k].n[r] > 0) {
        EXPECT_EQ(covered[r], rounds[k].at) << "rank " << r;  // in order
      }
      covered[r] += rounds[k].n[r];
    }
  }
  EXPECT_EQ(covered, (std::vector<int64_t>{10, 0, 3, 7}));
  EXPECT_EQ(rounds[2].n, (std::vector<int64_t>{2, 0, 0, 0}));
  const int64_t none[] = {0, 0};
  EXPECT_TRUE(staged_rounds(none, 2, 8).empty());
  const int64_t one[] = {5};
  EXPECT_EQ(staged_rounds(one, 1, 1).size(), 5u);  // one float per round
}

}  // namespace
}  // namespace ssd
