// The pre-speculation switch (runtime/saguaro/prespec_switch.h): blocks of rounds alternate on and
// off during the warm-up, then the faster regime runs with the other explored every n-th block,
// the choice follows the rates when they change, and a fixed switch stays on.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/core/error.h"
#include "runtime/saguaro/prespec_switch.h"

namespace ssd {
namespace {

// Runs `blocks` blocks, each round emitting 2 tokens in 2 / rate(regime) seconds; returns the
// regime of every block.
template <class Rate>
std::vector<bool> run_blocks(PrespecSwitch& sw, const PrespecSwitchOptions& o, int blocks,
                             Rate rate) {
  std::vector<bool> regimes;
  for (int b = 0; b < blocks; ++b) {
    regimes.push_back(sw.on());
    for (int r = 0; r < o.block; ++r) {
      EXPECT_EQ(sw.on(), regimes.back()) << "the regime changed inside block " << b;
      sw.observe_round(2, 2.0 / rate(sw.on()));
    }
  }
  return regimes;
}

TEST(PrespecSwitch, WarmsUpThenKeepsTheFasterRegimeAndExplores) {
  const PrespecSwitchOptions o{.block = 4, .explore_every = 3};
  PrespecSwitch sw(o);
  // Off is faster: 100 tokens/s against 60.
  const std::vector<bool> got =
      run_blocks(sw, o, 13, [](bool on) { return on ? 60.0 : 100.0; });
  const std::vector<bool> want = {true,  false, true,  false,   // warm-up
                                  false, false, true,           // off, off, explore on
                                  false, false, true, false, false, true};
  EXPECT_EQ(got, want);
  EXPECT_NEAR(sw.rate(false), 100.0, 1e-9);
  EXPECT_NEAR(sw.rate(true), 60.0, 1e-9);
  EXPECT_EQ(sw.blocks(), 13);
  EXPECT_EQ(sw.blocks_on(), 5);
}

TEST(PrespecSwitch, FollowsTheRatesWhenTheyChange) {
  const PrespecSwitchOptions o{.block = 2, .explore_every = 4};
  PrespecSwitch sw(o);
  run_blocks(sw, o, 8, [](bool on) { return on ? 50.0 : 80.0; });
  EXPECT_FALSE(sw.on()) << "off is faster";
  // The load drops: pre-speculation now pays (on 120 against off 80). The median of the latest
  // kKeep "on" blocks moves once the exploration blocks have brought in two at the new rate.
  const std::vector<bool> later =
      run_blocks(sw, o, 16, [](bool on) { return on ? 120.0 : 80.0; });
  int on_tail = 0;
  for (size_t i = later.size() - 6; i < later.size(); ++i) on_tail += later[i] ? 1 : 0;
  EXPECT_EQ(on_tail, 4) << "after the change, on runs but in the exploration blocks";
  EXPECT_GT(sw.rate(true), sw.rate(false));
}

TEST(PrespecSwitch, FixedSwitchStaysOn) {
  const PrespecSwitchOptions o{.adaptive = false, .block = 2};
  PrespecSwitch sw(o);
  const std::vector<bool> got = run_blocks(sw, o, 6, [](bool on) { return on ? 1.0 : 100.0; });
  for (bool on : got) EXPECT_TRUE(on);
  EXPECT_EQ(sw.blocks(), 0);
}

TEST(PrespecSwitch, RefusesImpossibleOptions) {
  EXPECT_THROW(PrespecSwitch(PrespecSwitchOptions{.block = 0}), Error);
  EXPECT_THROW(PrespecSwitch(PrespecSwitchOptions{.explore_every = 1}), Error);
}

}  // namespace
}  // namespace ssd
