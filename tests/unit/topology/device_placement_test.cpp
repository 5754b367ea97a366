// Rank-to-GPU placement without a GPU: device lists parsed (bad entries named), the default (local
// rank) and the explicit list, and the start-up rules on hand-made jobs: the 4+1 layout of the SSD
// paper's layout on one 8-GPU node is valid, a device past the node's count, two targets on one
// device, a drafter sharing a target's device, and --share-devices allowing the last two.
#include <gtest/gtest.h>

#include <cstdlib>

#include "runtime/core/error.h"
#include "topology/device_placement.h"

namespace ssd {
namespace {

std::vector<RankDevice> job(const std::vector<int>& devices, int node_devices, int tp) {
  std::vector<RankDevice> out;
  for (size_t r = 0; r < devices.size(); ++r)
    out.push_back({static_cast<int>(r), "gpu-node-1", static_cast<int>(r) < tp ? "target"
                                                                               : "drafter",
                   devices[r], node_devices});
  return out;
}

TEST(DevicePlacement, ParsesLists) {
  EXPECT_EQ(parse_device_list("0,1,2,3,4"), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(parse_device_list("7"), (std::vector<int>{7}));
  for (const char* bad : {"", "0,,1", "0,x", "-1", "1,2,"}) {
    try {
      parse_device_list(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is not a device index"), std::string::npos);
    }
  }
}

TEST(DevicePlacement, ChoosesListEntryOrLocalRank) {
  EXPECT_EQ(choose_device(std::nullopt, 3, 5, 2), 2);
  EXPECT_EQ(choose_device(std::vector<int>{4, 3, 2, 1, 0}, 1, 5, 1), 3);
  EXPECT_THROW(choose_device(std::vector<int>{0, 1}, 0, 5, 0), Error);
}

TEST(DevicePlacement, ReadsTheLaunchersLocalRank) {
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
  EXPECT_EQ(launcher_local_rank(), 3);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "junk", 1);
  setenv("SLURM_LOCALID", "2", 1);
  EXPECT_EQ(launcher_local_rank(), 2);  // a malformed variable is skipped, the next one read
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  unsetenv("SLURM_LOCALID");
}

TEST(DevicePlacement, FourTargetsAndADrafterOnFiveGpusIsValid) {
  EXPECT_EQ(check_device_placement(job({0, 1, 2, 3, 4}, 8, 4), false), "");
}

TEST(DevicePlacement, DeviceBeyondTheNodeIsNamed) {
  const std::string m = check_device_placement(job({0, 1, 2, 3, 4}, 4, 4), false);
  EXPECT_NE(m.find("rank 4 (drafter) on gpu-node-1 is given device 4, but that node has 4 "
                   "GPU(s)"),
            std::string::npos)
      << m;
  EXPECT_NE(check_device_placement(job({0}, 0, 1), true).find("sees no GPU"), std::string::npos);
}

TEST(DevicePlacement, SharingNeedsTheFlag) {
  const std::string two_targets = check_device_placement(job({0, 0, 1, 2, 3}, 8, 4), false);
  EXPECT_NE(two_targets.find("rank 0 (target), rank 1 (target) share device 0"),
            std::string::npos)
      << two_targets;
  const std::string drafter = check_device_placement(job({0, 1, 2, 3, 3}, 8, 4), false);
  EXPECT_NE(drafter.find("rank 3 (target), rank 4 (drafter) share device 3"), std::string::npos)
      << drafter;
  EXPECT_EQ(check_device_placement(job({0, 0, 1, 2, 3}, 8, 4), true), "");
  EXPECT_EQ(check_device_placement(job({0, 1, 2, 3, 3}, 8, 4), true), "");
  // The same device index on two nodes is two devices.
  std::vector<RankDevice> two_nodes = job({0, 0}, 1, 1);
  two_nodes[1].host = "gpu-node-2";
  EXPECT_EQ(check_device_placement(two_nodes, false), "");
}

TEST(DevicePlacement, DescribesSharedDevicesForTheTransportChoice) {
  EXPECT_EQ(describe_shared_devices(job({0, 1, 2, 3, 4}, 8, 4)), "");
  // Five ranks on the one GPU of a node: the layout of a first run on one GPU.
  EXPECT_EQ(describe_shared_devices(job({0, 0, 0, 0, 0}, 1, 4)),
            "ranks 0 (target), 1 (target), 2 (target), 3 (target), 4 (drafter) share GPU 0 on "
            "gpu-node-1");
  // Two shared devices, named one after the other; a device past the count is left out.
  EXPECT_EQ(describe_shared_devices(job({0, 1, 0, 1, 9}, 2, 4)),
            "ranks 0 (target), 2 (target) share GPU 0 on gpu-node-1; ranks 1 (target), 3 "
            "(target) share GPU 1 on gpu-node-1");
  // The same index on two nodes is two GPUs.
  std::vector<RankDevice> two_nodes = job({0, 0}, 1, 1);
  two_nodes[1].host = "gpu-node-2";
  EXPECT_EQ(describe_shared_devices(two_nodes), "");
}

}  // namespace
}  // namespace ssd
