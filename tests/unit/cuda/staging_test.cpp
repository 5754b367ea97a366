// Staging in Record mode (the input arena of a replayable region, runtime/backend/cuda/staging.h): slots
// in call order, sized by the capacity and not by the contents, so a replay's kernels read the
// addresses its capture baked in. Record mode makes no CUDA call for host pointers beyond the
// device-pointer probe (false without a driver), so this runs on machines without a GPU; the
// arena's "device" half is host memory here.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "runtime/backend/cuda/staging.h"
#include "runtime/core/error.h"

namespace ssd::cuda {
namespace {

struct Arena {
  explicit Arena(size_t bytes) : host(bytes, 0xAB), dev(bytes, 0) {}
  ArenaView view() { return ArenaView{host.data(), dev.data(), host.size()}; }
  size_t offset_of(const void* p) const {
    return static_cast<size_t>(static_cast<const uint8_t*>(p) - dev.data());
  }
  std::vector<uint8_t> host, dev;
};

// One "forward": a 3-int input, a visible list of `n_vis` entries with capacity 8, a null list
// with capacity 4, a float input. Returns the device-side offsets it got.
std::vector<size_t> record(Staging& st, Arena& a, int n_vis) {
  std::vector<size_t> offs;
  const std::vector<int32_t> three = {1, 2, 3};
  std::vector<int64_t> vis(static_cast<size_t>(n_vis), 7);
  const std::vector<float> g = {0.5f, 1.5f};
  st.begin();
  offs.push_back(a.offset_of(st.in(three.data(), three.size())));
  offs.push_back(a.offset_of(st.in(vis.empty() ? nullptr : vis.data(), vis.size(), 8)));
  offs.push_back(a.offset_of(st.in(static_cast<const int64_t*>(nullptr), 0, 4)));
  st.finish();
  st.begin();
  offs.push_back(a.offset_of(st.in(g.data(), g.size())));
  st.finish();
  return offs;
}

TEST(Staging, RecordSlotsDependOnCapacitiesNotContents) {
  Staging st(nullptr, false);
  Arena a(4096);
  st.set_mode(Staging::Mode::Record, a.view());
  const std::vector<size_t> first = record(st, a, 5);
  const size_t used = st.arena_used();
  EXPECT_EQ(first, (std::vector<size_t>{0, 256, 512, 768}));
  EXPECT_EQ(used, 1024u);
  // The bytes went to the host half at those offsets (the upload copies host -> dev later).
  EXPECT_EQ(reinterpret_cast<const int32_t*>(a.host.data())[2], 3);
  EXPECT_EQ(reinterpret_cast<const int64_t*>(a.host.data() + 256)[4], 7);
  EXPECT_EQ(reinterpret_cast<const float*>(a.host.data() + 768)[1], 1.5f);
  for (int n_vis : {0, 1, 8}) {  // an empty or full visible list: the same slots
    st.set_mode(Staging::Mode::Record, a.view());
    EXPECT_EQ(record(st, a, n_vis), first) << n_vis;
    EXPECT_EQ(st.arena_used(), used);
  }
}

TEST(Staging, RecordRefusesHostOutputsAndOverflow) {
  Staging st(nullptr, false);
  Arena small(300);
  st.set_mode(Staging::Mode::Record, small.view());
  std::vector<float> out(4);
  st.begin();
  EXPECT_THROW(st.out(out.data(), out.size()), Error);
  st.begin();
  const std::vector<float> big(100);  // 400 bytes: past the 300-byte arena
  EXPECT_THROW(st.in(big.data(), big.size()), Error);
}

}  // namespace
}  // namespace ssd::cuda
