// Feature rows from a peer (StartSeqs, Outcome, PrespecWork) are checked before the drafter reads
// any: a negative count that keeps the sum right ({2, -1} with one row of bulk), a count whose
// size overflows, and rows of another width than the drafter's are errors naming what is wrong,
// and no row is handed to the drafter. The SSD core holds the same line for outcomes it is given.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "actors/roles/drafter_wire.h"
#include "runtime/core/error.h"
#include "runtime/drafters/ngram_drafter.h"

namespace ssd {
namespace {

// An n-gram drafter that reads target feature rows of kDim floats, counting the floats it got.
class FeatureReader final : public Drafter {
 public:
  static constexpr int64_t kDim = 2;
  std::string name() const override { return "feature-reader"; }
  std::vector<int32_t> target_feature_layers() const override { return {1}; }
  int64_t target_feature_dim() const override { return kDim; }
  void start(int32_t seq, std::span<const int32_t> prompt) override { inner_.start(seq, prompt); }
  void commit(int32_t seq, std::span<const int32_t> t) override { inner_.commit(seq, t); }
  void finish(int32_t seq) override { inner_.finish(seq); }
  void set_features(int32_t, int64_t, std::span<const float> f) override {
    for (float v : f) sum += v;  // reads every float it is given
    floats += static_cast<int64_t>(f.size());
  }
  std::vector<DraftTree> draft(std::span<const DraftRequest> reqs) override {
    return inner_.draft(reqs);
  }
  int64_t floats = 0;
  double sum = 0;

 private:
  NgramDrafter inner_{NgramOptions{}};
};

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

StartSeqs two_sequences(std::vector<int64_t> rows, int64_t dim) {
  StartSeqs m;
  m.seqs = {0, 1};
  m.prompts = {{5, 6, 7}, {8, 9}};
  m.emitted = {{3}, {4}};
  m.streams = {0, 1};
  m.feature_rows = std::move(rows);
  m.feature_dim = dim;
  return m;
}

TEST(DrafterWire, WellFormedRowsReachTheDrafter) {
  FeatureReader d;
  SsdDrafterCore core(d, nullptr, SsdDrafterOptions{});
  const std::vector<float> bulk = {1, 2, 3, 4, 5, 6};  // rows: 2 for seq 0, 1 for seq 1
  start_sequences(core, two_sequences({2, 1}, 2), bulk);
  EXPECT_EQ(d.floats, 6);
  EXPECT_EQ(d.sum, 21);
}

TEST(DrafterWire, NegativeRowCountIsRefused) {
  FeatureReader d;
  SsdDrafterCore core(d, nullptr, SsdDrafterOptions{});
  const std::vector<float> bulk = {1, 2};  // one row; {2, -1} sums to 1
  const std::string err = error_of([&] { start_sequences(core, two_sequences({2, -1}, 2), bulk); });
  EXPECT_NE(err.find("sequence 1 of the message has -1 feature rows"), std::string::npos) << err;
  EXPECT_EQ(d.floats, 0) << "rows reached the drafter";
}

TEST(DrafterWire, OverflowingRowCountIsRefused) {
  FeatureReader d;
  SsdDrafterCore core(d, nullptr, SsdDrafterOptions{});
  // 2^62 rows of 4 floats: 2^64 floats wraps to 0, the size of an empty bulk.
  const std::string err = error_of(
      [&] { start_sequences(core, two_sequences({int64_t{1} << 62, 0}, 4), {}); });
  EXPECT_NE(err, "(no error)");
  EXPECT_EQ(d.floats, 0);
}

TEST(DrafterWire, RowWidthOtherThanTheDraftersIsRefused) {
  FeatureReader d;
  SsdDrafterCore core(d, nullptr, SsdDrafterOptions{});
  const std::vector<float> bulk = {1, 2, 3};  // one row of 3 floats; the drafter reads 2
  const std::string err = error_of([&] { start_sequences(core, two_sequences({1, 0}, 3), bulk); });
  EXPECT_NE(err.find("rows of 3 floats announced; the drafter reads rows of 2"), std::string::npos)
      << err;
  EXPECT_EQ(d.floats, 0);
}

TEST(DrafterWire, OutcomeRowsAreCheckedLikeStartRows) {
  Outcome m;
  m.round = 1;
  m.feature_dim = 2;
  m.seqs = {SeqOutcome{0, 0, {3}, 4, 2}, SeqOutcome{1, 0, {4}, 3, -1}};
  const std::vector<float> bulk = {1, 2};
  const std::string err = error_of([&] { round_outcomes(m, bulk, FeatureReader::kDim); });
  EXPECT_NE(err.find("-1 feature rows"), std::string::npos) << err;
}

TEST(DrafterWire, CoreRefusesAnOutcomeWithNegativeRows) {
  FeatureReader d;
  SsdDrafterCore core(d, nullptr, SsdDrafterOptions{});
  start_sequences(core, two_sequences({0, 0}, 2), {});
  const std::vector<Speculation> first = core.first_speculations(std::vector<int32_t>{0});
  ASSERT_EQ(first.size(), 1u);
  const float rows[2] = {1, 2};
  RoundOutcome o;
  o.seq = 0;
  o.accepted = 0;
  o.emitted = {11};
  o.features = rows;
  o.features_from = 4;
  o.feature_rows = -1;
  o.feature_dim = 2;
  const std::string err = error_of([&] { core.on_outcome(std::span<const RoundOutcome>(&o, 1)); });
  EXPECT_NE(err.find("outcome of sequence 0 has -1 feature rows"), std::string::npos) << err;
  o.feature_rows = 1;
  o.feature_dim = 5;
  const std::string wide =
      error_of([&] { core.on_outcome(std::span<const RoundOutcome>(&o, 1)); });
  EXPECT_NE(wide.find("rows of 5 floats; the drafter reads rows of 2"), std::string::npos) << wide;
  EXPECT_EQ(d.floats, 0);
}

}  // namespace
}  // namespace ssd
