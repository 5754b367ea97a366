// The start-up agreement's verdict (actors/transport/startup_agreement.h), judged without MPI:
// agreeing prints pass, every differing flag is named with rank 0's value and each differing
// rank's, and a print of another layout is refused. The mpirun side is
// tests/mpi/ssd_startup_agreement_check.sh.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "actors/transport/startup_agreement.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

std::vector<StartupField> fields(const std::string& tp, const std::string& transport) {
  return {{"--tp", tp}, {"--transport", transport}, {"--backend", "cpu"}};
}

TEST(StartupAgreement, AgreeingRanksPass) {
  const auto f = fields("2", "mpi");
  const std::vector<StartupPrint> all(4, make_startup_print(f));
  EXPECT_EQ(judge_startup_prints(f, all), "");
}

TEST(StartupAgreement, NamesEveryDifferingFlagAndRank) {
  const auto f = fields("2", "mpi");
  std::vector<StartupPrint> all(4, make_startup_print(f));
  all[1] = make_startup_print(fields("1", "mpi"));
  all[3] = make_startup_print(fields("1", "nccl"));
  const std::string v = judge_startup_prints(f, all);
  EXPECT_NE(v.find("--tp is '2' on rank 0 but '1' on rank 1, '1' on rank 3"), std::string::npos)
      << v;
  EXPECT_NE(v.find("--transport is 'mpi' on rank 0 but 'nccl' on rank 3"), std::string::npos)
      << v;
  EXPECT_EQ(v.find("--backend"), std::string::npos) << v;  // the flag they agree on is not named
}

TEST(StartupAgreement, LongValuesDifferingPastThePrintAreCaught) {
  const std::string base(100, 'x');
  const std::vector<StartupField> a = {{"--devices", base + "0"}};
  const std::vector<StartupField> b = {{"--devices", base + "1"}};
  const std::vector<StartupPrint> all = {make_startup_print(a), make_startup_print(b)};
  const std::string v = judge_startup_prints(a, all);
  EXPECT_NE(v.find("--devices is '"), std::string::npos) << v;
  EXPECT_NE(v.find("...' on rank 1"), std::string::npos) << v;  // shown cut short
}

TEST(StartupAgreement, APrintOfAnotherLayoutIsRefused) {
  const auto f = fields("2", "mpi");
  std::vector<StartupPrint> all(2, make_startup_print(f));
  all[1].magic = 0x12345678;
  EXPECT_NE(judge_startup_prints(f, all).find("rank 1 sent a start-up print of another layout"),
            std::string::npos);
  all[1] = make_startup_print({{"--tp", "2"}});
  EXPECT_NE(judge_startup_prints(f, all).find("1 fields"), std::string::npos);
}

TEST(StartupAgreement, TooManyFieldsIsAnError) {
  std::vector<StartupField> many(StartupPrint::kMaxFields + 1, StartupField{"--x", "1"});
  EXPECT_THROW(make_startup_print(many), Error);
}

}  // namespace
}  // namespace ssd
