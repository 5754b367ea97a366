// The arithmetic the CUDA backend finishes a tensor-parallel exchange with (kernels/common/
// exchange_math.h, run by kernels/cuda/exchange.cu after NCCL gathered the bytes), against the
// host exchanges the CPU path runs (gather_columns over a ThreadGroup, the rank-order sum of
// collective.h), and the group agreement the CUDA backend's replay decision uses.
//   - stitching: for each rank count and width split (with an empty rank), out[i, c] read
//     through stitch_source from the rank-major blocks an allgatherv leaves equals
//     gather_columns' result, which equals the value each rank put at (i, c). Exact equality:
//     it moves floats and adds nothing.
//   - rank-order sum: the order is observable with floats: (1e8 + 1) - 1e8 is 0 in float32, while
//     1e8 + (-1e8) + 1 would be 1; rank_order_sum must give the former, as sum_in_rank_order
//     (the NCCL collective's host path) and ThreadGroup's allreduce_sum do.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/common/exchange_math.h"
#include "runtime/parallel/gather_columns.h"
#include "runtime/parallel/group_agree.h"
#include "runtime/parallel/thread_collective.h"

namespace ssd {
namespace {

namespace hd = kernels::hd;

// The value rank-agnostic column c of row i holds (distinct for every (i, c)).
float cell(int64_t i, int64_t c) { return static_cast<float>(1000 * i + c); }

TEST(ExchangeTwin, StitchingEqualsGatherColumns) {
  const std::vector<std::vector<int64_t>> splits = {
      {0, 7}, {0, 3, 7}, {0, 3, 3, 7, 12}, {0, 1, 2, 3, 4, 5}, {0, 0, 4}};
  for (const std::vector<int64_t>& off : splits) {
    const int T = static_cast<int>(off.size()) - 1;
    const int64_t rows = 5, width = off.back();
    SCOPED_TRACE(testing::Message() << "T = " << T << ", width " << width);
    // What the device sees after the allgatherv: rank r's [rows, w_r] block, rank after rank.
    std::vector<float> gathered;
    for (int r = 0; r < T; ++r)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t c = off[r]; c < off[r + 1]; ++c) gathered.push_back(cell(i, c));
    ASSERT_EQ(static_cast<int64_t>(gathered.size()), rows * width);
    std::vector<float> device(rows * width), expected(rows * width);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t c = 0; c < width; ++c) {
        device[i * width + c] = gathered[hd::stitch_source(off.data(), T, rows, i, c)];
        expected[i * width + c] = cell(i, c);
      }
    EXPECT_EQ(device, expected);
    // The host path over a real group of T threads.
    std::vector<std::vector<float>> host(T);
    run_thread_group(T, [&](Collective& comm) {
      const int r = comm.rank();
      std::vector<float> local;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t c = off[r]; c < off[r + 1]; ++c) local.push_back(cell(i, c));
      std::vector<float> scratch, out(rows * width);
      gather_columns(comm, local.data(), rows, off, scratch, out.data());
      host[r] = out;
    });
    for (int r = 0; r < T; ++r) EXPECT_EQ(host[r], device) << "rank " << r;
  }
}

TEST(ExchangeTwin, RankOrderSumAddsRankAfterRank) {
  // [3 ranks, 2 values]: column 0 is order-sensitive, column 1 is not.
  const std::vector<float> g = {1e8f, 2.5f, 1.0f, -1.0f, -1e8f, 0.5f};
  EXPECT_EQ(hd::rank_order_sum(g.data(), 3, 2, 0), 0.0f);  // (1e8 + 1) - 1e8 in float32
  EXPECT_EQ(hd::rank_order_sum(g.data(), 3, 2, 1), 2.0f);
  EXPECT_EQ(hd::rank_order_sum(g.data(), 1, 2, 1), 2.5f);  // one rank: its own values
  // ThreadGroup's allreduce_sum promises the same order: the same bits.
  std::vector<std::vector<float>> got(3);
  run_thread_group(3, [&](Collective& comm) {
    std::vector<float> mine(g.begin() + 2 * comm.rank(), g.begin() + 2 * comm.rank() + 2);
    comm.allreduce_sum(mine.data(), 2);
    got[comm.rank()] = mine;
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(got[r], (std::vector<float>{0.0f, 2.0f})) << r;
}

TEST(ExchangeTwin, GroupAgreesOnTheSmallestProposal) {
  const std::vector<int> proposals = {4, 2, 3, 2};
  std::vector<int> agreed(proposals.size(), -1);
  run_thread_group(static_cast<int>(proposals.size()), [&](Collective& comm) {
    agreed[comm.rank()] = agree_min(comm, proposals[comm.rank()]);
  });
  EXPECT_EQ(agreed, (std::vector<int>(proposals.size(), 2)));
  run_thread_group(1, [&](Collective& comm) { EXPECT_EQ(agree_min(comm, 7), 7); });
}

}  // namespace
}  // namespace ssd
