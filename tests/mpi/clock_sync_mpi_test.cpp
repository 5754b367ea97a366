// Clock offsets and the end-of-run gather (actors/transport/clock_sync.h) across real ranks on
// one node: every process reads the same CLOCK_MONOTONIC, so the true offset is 0 and each
// estimate must lie within its own stated uncertainty (half its round trip; causality puts the
// peer's stamp between the leader's two); the gather brings every rank's text to rank 0 in rank
// order, empty texts and long ones included.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "actors/transport/clock_sync.h"
#include "actors/transport/mpi_world.h"

namespace ssd {
namespace {

TEST(ClockSync, OffsetsOnOneNodeLieWithinTheirUncertainty) {
  MpiComm world = MpiComm::dup(MPI_COMM_WORLD);
  const std::vector<ClockOffset> offsets = estimate_clock_offsets(world, 16);
  if (world.rank() != 0) {
    EXPECT_TRUE(offsets.empty());
    return;
  }
  ASSERT_EQ(offsets.size(), static_cast<size_t>(world.size()));
  EXPECT_EQ(offsets[0].offset_us, 0.0);
  for (size_t r = 1; r < offsets.size(); ++r) {
    const ClockOffset& o = offsets[r];
    EXPECT_TRUE(std::isfinite(o.rtt_us)) << "rank " << r;
    EXPECT_GE(o.rtt_us, 0.0);
    EXPECT_DOUBLE_EQ(o.uncertainty_us, o.rtt_us / 2);
    // The bound: |estimate - 0| <= uncertainty (+ 0.01 us of float rounding in the stamps).
    EXPECT_LE(std::abs(o.offset_us), o.uncertainty_us + 0.01) << "rank " << r;
  }
}

TEST(ClockSync, GatherBringsEveryRanksTextToRankZeroInOrder) {
  MpiComm world = MpiComm::dup(MPI_COMM_WORLD);
  const int r = world.rank();
  const std::string mine = r == 1 ? std::string() : std::string(1000 * (r + 1), char('a' + r));
  const std::vector<std::string> all = gather_text(world, mine);
  if (r != 0) {
    EXPECT_TRUE(all.empty());
    return;
  }
  ASSERT_EQ(all.size(), static_cast<size_t>(world.size()));
  for (int i = 0; i < world.size(); ++i) {
    const std::string want = i == 1 ? std::string() : std::string(1000 * (i + 1), char('a' + i));
    EXPECT_EQ(all[static_cast<size_t>(i)], want) << "rank " << i;
  }
}

}  // namespace
}  // namespace ssd
