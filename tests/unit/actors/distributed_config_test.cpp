// The distributed flags turned into SSD drafter options once at start-up (distributed_args.h):
// --prespec-chunk auto|N (auto resolved by the drafter rank's backend), the fan-out lists, the
// miss policy; malformed values are refused with the flag named.
#include <gtest/gtest.h>

#include <string>

#include "actors/roles/cluster.h"
#include "actors/roles/distributed_config.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

std::string error_of(const DistributedConfig& a, int32_t k) {
  try {
    to_ssd_options(a, k, SamplerConfig{});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

DistributedConfig with_chunk(std::string chunk) {
  DistributedConfig a;
  a.prespec_chunk = std::move(chunk);
  return a;
}

TEST(DistributedConfig, PrespecChunkIsAutoOrACount) {
  EXPECT_EQ(to_ssd_options(DistributedConfig{}, 3, {}).prespec_chunk, kPrespecChunkAuto);  // default
  EXPECT_EQ(to_ssd_options(with_chunk("0"), 3, {}).prespec_chunk, 0);
  EXPECT_EQ(to_ssd_options(with_chunk("5"), 3, {}).prespec_chunk, 5);
  for (std::string bad : {"-1", "x", "2x", "", "1.5"})
    EXPECT_NE(error_of(with_chunk(bad), 3).find("--prespec-chunk"), std::string::npos) << bad;
}

TEST(DistributedConfig, AutoChunkDependsOnTheDrafterBackend) {
  EXPECT_EQ(resolve_prespec_chunk(kPrespecChunkAuto, "cpu"), 2);
  EXPECT_EQ(resolve_prespec_chunk(kPrespecChunkAuto, "cuda"), 0);
  EXPECT_EQ(resolve_prespec_chunk(0, "cpu"), 0);
  EXPECT_EQ(resolve_prespec_chunk(7, "cuda"), 7);
}

TEST(DistributedConfig, FanOutListsAndMissPolicy) {
  DistributedConfig a;
  a.fan_out = "3,2,1";
  const SsdDrafterOptions o = to_ssd_options(a, 2, {});
  EXPECT_EQ(o.fan_out.mode, FanOutMode::kLists);
  EXPECT_EQ(o.fan_out.after_hit, (std::vector<int32_t>{3, 2, 1}));
  EXPECT_EQ(o.fan_out.after_miss, o.fan_out.after_hit);
  EXPECT_NE(error_of(a, 3).find("needs 4"), std::string::npos);  // K + 1 entries
  a.fan_out = "3,x,1";
  EXPECT_NE(error_of(a, 2).find("--fan-out"), std::string::npos);
  a = {};
  a.miss_policy = "backup";
  EXPECT_EQ(to_ssd_options(a, 2, {}).miss.b_star, 0);
  a.critical_batch = 4;
  EXPECT_NE(error_of(a, 2).find("--critical-batch needs --miss-policy auto"), std::string::npos);
}

}  // namespace
}  // namespace ssd

namespace ssd {
namespace {

// The pre-speculation switch measures only where a target rank shares CPUs with a drafter rank.
TEST(RankPlaces, TargetsShareCoresWithDrafters) {
  const RankLayout two = RankLayout::make(2, 0, 1);  // rank 0 target, rank 1 drafter
  auto places = [](std::vector<int> a, std::vector<int> b, std::string host_b = "h") {
    return nlohmann::json::array({nlohmann::json{{"rank", 0}, {"host", "h"}, {"cpus", a}},
                                  nlohmann::json{{"rank", 1}, {"host", host_b}, {"cpus", b}}});
  };
  EXPECT_FALSE(targets_share_cores_with_drafters(places({0}, {1}), two));
  EXPECT_TRUE(targets_share_cores_with_drafters(places({0, 1}, {1}), two));
  EXPECT_FALSE(targets_share_cores_with_drafters(places({0}, {0}, "other"), two))
      << "another host";
  EXPECT_TRUE(targets_share_cores_with_drafters(places({0}, {}), two)) << "unknown CPUs";
  EXPECT_TRUE(targets_share_cores_with_drafters(nlohmann::json::array(), two)) << "no places";
}

}  // namespace
}  // namespace ssd
