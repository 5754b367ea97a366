// The start-up handshake over loopback endpoints (one thread per rank): an agreeing job starts;
// a mismatched protocol version, configuration or model is refused on EVERY rank with the same
// message naming both values; a rank that never says hello makes rank 0 time out.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "actors/transport/handshake.h"
#include "actors/transport/loopback_transport.h"

namespace ssd {
namespace {

using namespace std::chrono_literals;

// Runs the handshake on `world` ranks (TP = tp); edit(rank, hello) may alter a rank's Hello.
// Returns each rank's error message ("" when it was accepted).
std::vector<std::string> run_job(int world, int tp,
                                 const std::function<void(int, Hello&)>& edit = {}) {
  LoopbackHub hub(world);
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r)
    ranks.emplace_back([&, r] {
      const RankLayout layout = RankLayout::make(world, r, tp);
      Hello mine = make_hello(layout, digest64("--k 4 --tp 2"),
                              layout.is_target() ? 0x1111 : 0x2222);
      if (edit) edit(r, mine);
      try {
        handshake(hub.endpoint(r), mine, 5s);
      } catch (const Error& e) {
        errors[r] = e.what();
      }
    });
  for (std::thread& t : ranks) t.join();
  return errors;
}

TEST(Handshake, AgreeingJobStarts) {
  for (const std::string& e : run_job(4, 2)) EXPECT_EQ(e, "");
}

TEST(Handshake, VersionMismatchIsRefusedEverywhere) {
  const auto errors = run_job(3, 1, [](int r, Hello& h) {
    if (r == 2) h.version = kProtocolVersion + 1;
  });
  const std::string expect = fmt::format(
      "job refused at start-up: protocol version mismatch: rank 0 speaks version {}, rank 2 "
      "speaks version {}",
      kProtocolVersion, kProtocolVersion + 1);
  for (const std::string& e : errors) EXPECT_EQ(e, expect);
}

TEST(Handshake, ConfigMismatchNamesBothDigests) {
  const auto errors = run_job(2, 1, [](int r, Hello& h) {
    if (r == 1) h.config_digest = digest64("--k 5 --tp 2");
  });
  const std::string expect = fmt::format(
      "job refused at start-up: configuration mismatch: rank 0 has config digest {:#018x}, rank "
      "1 has {:#018x} (start every rank with the same flags)",
      digest64("--k 4 --tp 2"), digest64("--k 5 --tp 2"));
  for (const std::string& e : errors) EXPECT_EQ(e, expect);
}

TEST(Handshake, DrafterModelsAreComparedAmongDrafters) {
  // Targets and drafters load different models (0x1111 vs 0x2222): accepted. A second drafter
  // with another draft model is refused.
  const auto errors = run_job(4, 2, [](int r, Hello& h) {
    if (r == 3) h.model_digest = 0x3333;
  });
  for (const std::string& e : errors)
    EXPECT_EQ(e, "job refused at start-up: model mismatch: drafter rank 2 has model digest "
                 "0x0000000000002222, rank 3 has 0x0000000000003333");
}

TEST(Handshake, DigestIsFnv1a64) {
  // Published FNV-1a 64 test vectors.
  EXPECT_EQ(digest64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(digest64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(digest64("foobar"), 0x85944171f73967e8ull);
}

TEST(Handshake, SilentRankMakesRankZeroTimeOut) {
  LoopbackHub hub(2);
  const RankLayout layout = RankLayout::make(2, 0, 1);
  try {
    handshake(hub.endpoint(0), make_hello(layout, 1, 2), 100ms);
    FAIL();
  } catch (const TransportTimeout& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 timed out after"), std::string::npos);
  }
}

}  // namespace
}  // namespace ssd
