// The drafter flags reach the drafters: every suffix-drafter flag lands in the options that both
// the primary suffix drafter and SSD's suffix backup are built from (suffix_options), and
// --suffix-spelling in the DrafterOptions make_drafter reads.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "actors/roles/drafter_factory.h"
#include "launch/cli/drafter_flags.h"
#include "launch/cli/flags.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

SuffixDrafterOptions suffix_from(std::vector<std::string> tokens) {
  DrafterFlags f;
  parse(std::span<const std::string>(tokens), f, ParseOptions{});
  return suffix_options(f.options(/*threads=*/1));
}

TEST(DrafterFlags, SuffixDefaultsAreTheDrafters) {
  const SuffixDrafterOptions got = suffix_from({});
  const SuffixDrafterOptions want;
  EXPECT_EQ(got.cache_tokens, want.cache_tokens);
  EXPECT_EQ(got.min_prob, want.min_prob);
  EXPECT_EQ(got.depth_per_match, want.depth_per_match);
  EXPECT_EQ(got.unsure_root_depth, want.unsure_root_depth);
  EXPECT_EQ(got.earlier_sure_match, want.earlier_sure_match);
  EXPECT_EQ(got.earlier_unsure_min_share, want.earlier_unsure_min_share);
  DrafterFlags f;
  EXPECT_TRUE(f.options(1).suffix_spelling) << "the spelling fallback is on by default";
}

TEST(DrafterFlags, EverySuffixFlagReachesTheOptions) {
  const SuffixDrafterOptions o =
      suffix_from({"--suffix-cache-tokens", "1000", "--suffix-min-prob", "0.25",
                   "--suffix-depth-per-match", "2", "--suffix-unsure-root-depth", "0",
                   "--suffix-earlier-sure-match", "3", "--suffix-earlier-min-share", "0.75"});
  EXPECT_EQ(o.cache_tokens, 1000);
  EXPECT_EQ(o.min_prob, 0.25);
  EXPECT_EQ(o.depth_per_match, 2.0);
  EXPECT_EQ(o.unsure_root_depth, 0);
  EXPECT_EQ(o.earlier_sure_match, 3);
  EXPECT_EQ(o.earlier_unsure_min_share, 0.75);
  DrafterFlags f;
  const std::vector<std::string> off = {"--suffix-spelling", "off"};
  parse(std::span<const std::string>(off), f, ParseOptions{});
  EXPECT_FALSE(f.options(1).suffix_spelling);
}

TEST(DrafterFlags, NegativeUnsureRootDepthNamesTheFlag) {
  try {
    suffix_from({"--suffix-unsure-root-depth", "-1"});
    FAIL() << "a negative depth was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("suffix-unsure-root-depth"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ssd
