// The distillation dataset file (runtime/train/distill_dataset.h): what the writer stores reads
// back (tokens and prompt lengths exactly, features within f16 rounding), the documented size
// formula holds, the writer is atomic (nothing under the final name until finish()), and a
// malformed file (bad magic, wrong version, truncated anywhere, corrupted index) is refused at
// open with an error naming the file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "runtime/core/error.h"
#include "runtime/train/distill_dataset.h"
#include "tests/support/temp_dir.h"

namespace ssd {
namespace {

using test::TempDir;

// f16 keeps 11 significant bits: rounding to nearest is off by at most 2^-11 of the value for
// normal numbers, and by at most 2^-25 (half the smallest subnormal step) below 2^-14.
bool within_f16(float got, float want) {
  return std::abs(got - want) <= std::ldexp(std::abs(want), -11) + std::ldexp(1.0f, -25);
}

struct Seq {
  std::vector<int32_t> tokens;
  int32_t prompt_len;
  std::vector<float> features;
};

// Sequences of awkward lengths (1, odd, prompt-only, response-only) with features spanning
// several orders of magnitude and both signs, like real hidden states (which reach |x| ~ 100).
std::vector<Seq> make_seqs(int64_t f, int32_t vocab) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> tok(0, vocab - 1);
  std::normal_distribution<float> val(0.0f, 1.0f);
  std::vector<Seq> out;
  const std::vector<std::pair<int32_t, int32_t>> shapes = {{1, 1}, {7, 3}, {13, 13}, {5, 0},
                                                           {40, 17}};
  for (auto [len, plen] : shapes) {
    Seq s{{}, plen, {}};
    for (int32_t i = 0; i < len; ++i) s.tokens.push_back(tok(rng));
    for (int64_t i = 0; i < len * f; ++i)
      s.features.push_back(val(rng) * std::pow(10.0f, static_cast<float>(i % 7) - 4.0f));
    out.push_back(std::move(s));
  }
  return out;
}

std::string write_file(const std::string& path, const std::vector<Seq>& seqs,
                       const std::vector<int32_t>& layers, int64_t dim, int64_t vocab) {
  DistillWriter w(path, layers, dim, vocab, "0123456789abcdef");
  for (const Seq& s : seqs) w.add(s.tokens, s.prompt_len, s.features);
  w.finish();
  return path;
}

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// The message of the ssd::Error `fn` throws ("" when it does not throw).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DistillDataset, RoundTripsTokensPromptLengthsAndFeatures) {
  TempDir tmp;
  const std::vector<int32_t> layers = {1, 4, 6};
  const int64_t dim = 24, vocab = 301, f = 3 * dim;
  const auto seqs = make_seqs(f, vocab);
  const std::string path = write_file(tmp.file("d.bin"), seqs, layers, dim, vocab);

  const DistillDataset d = DistillDataset::open(path);
  ASSERT_EQ(d.size(), seqs.size());
  EXPECT_EQ(d.target_layers(), layers);
  EXPECT_EQ(d.dim(), dim);
  EXPECT_EQ(d.feature_dim(), f);
  EXPECT_EQ(d.vocab(), vocab);
  EXPECT_EQ(d.model_digest(), "0123456789abcdef");
  int64_t total = 0, response = 0;
  std::vector<int64_t> counts(vocab, 0);
  for (size_t i = 0; i < seqs.size(); ++i) {
    const DistillSequence s = d.read(i);
    EXPECT_EQ(s.tokens, seqs[i].tokens) << "sequence " << i;
    EXPECT_EQ(s.prompt_len, seqs[i].prompt_len);
    EXPECT_EQ(d.length(i), static_cast<int32_t>(seqs[i].tokens.size()));
    EXPECT_EQ(d.prompt_len(i), seqs[i].prompt_len);
    ASSERT_EQ(s.features.size(), seqs[i].features.size());
    for (size_t k = 0; k < s.features.size(); ++k)
      ASSERT_TRUE(within_f16(s.features[k], seqs[i].features[k]))
          << "sequence " << i << " value " << k << ": " << s.features[k] << " vs "
          << seqs[i].features[k];
    total += static_cast<int64_t>(seqs[i].tokens.size());
    response += static_cast<int64_t>(seqs[i].tokens.size()) - seqs[i].prompt_len;
    for (size_t t = static_cast<size_t>(seqs[i].prompt_len); t < seqs[i].tokens.size(); ++t)
      ++counts[seqs[i].tokens[t]];
  }
  EXPECT_EQ(d.total_tokens(), total);
  EXPECT_EQ(d.response_tokens(), response);
  EXPECT_EQ(d.response_token_counts(), counts);
  EXPECT_THROW(d.read(seqs.size()), Error);
}

TEST(DistillDataset, FileSizeFollowsTheDocumentedFormula) {
  TempDir tmp;
  const std::vector<int32_t> layers = {0, 2};
  const int64_t dim = 10, vocab = 50, f = 2 * dim;
  const auto seqs = make_seqs(f, vocab);
  const std::string path = write_file(tmp.file("d.bin"), seqs, layers, dim, vocab);
  auto up = [](uint64_t x, uint64_t a) { return (x + a - 1) / a * a; };
  uint64_t want = up(64 + 4 * layers.size() + 4 + 16, 64);  // header, 16-character digest
  for (const Seq& s : seqs) want = up(want, 64) + s.tokens.size() * (4 + 2 * f);
  want = up(want, 8) + 24 * seqs.size() + 8;  // index + trailer
  EXPECT_EQ(std::filesystem::file_size(path), want);
}

TEST(DistillDataset, WriterIsAtomicAndCleansUpWhenAbandoned) {
  TempDir tmp;
  const std::string path = tmp.file("d.bin");
  {
    DistillWriter w(path, {0}, 4, 10, "x");
    const std::vector<int32_t> toks = {1, 2, 3};
    w.add(toks, 1, std::vector<float>(12, 0.5f));
    EXPECT_FALSE(std::filesystem::exists(path)) << "visible under the final name before finish()";
    EXPECT_TRUE(std::filesystem::exists(path + ".partial"));
  }  // abandoned: no finish()
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));

  // An empty dataset is a valid file.
  { DistillWriter w(path, {0}, 4, 10, "x"); w.finish(); }
  const DistillDataset d = DistillDataset::open(path);
  EXPECT_EQ(d.size(), 0u);
  EXPECT_EQ(d.total_tokens(), 0);
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

TEST(DistillDataset, WriterRejectsMalformedSequences) {
  TempDir tmp;
  DistillWriter w(tmp.file("d.bin"), {0, 1}, 4, 10, "x");
  const std::vector<int32_t> toks = {1, 2, 3};
  EXPECT_NE(error_of([&] { w.add(toks, 1, std::vector<float>(23)); }).find("feature"),
            std::string::npos);                                           // needs 3 x 8 values
  EXPECT_NE(error_of([&] { w.add(std::vector<int32_t>{1, 10}, 1, std::vector<float>(16)); })
                .find("vocabulary"),
            std::string::npos);
  EXPECT_NE(error_of([&] { w.add(toks, 4, std::vector<float>(24)); }).find("prompt length"),
            std::string::npos);
  EXPECT_THROW(w.add({}, 0, {}), Error);
  std::vector<float> too_big(24, 1.0f);
  too_big[13] = 70000.0f;  // past f16's largest finite value, 65504
  EXPECT_NE(error_of([&] { w.add(toks, 1, too_big); }).find("outside the f16 range"),
            std::string::npos);
  too_big[13] = std::nanf("");
  EXPECT_NE(error_of([&] { w.add(toks, 1, too_big); }).find("not finite"), std::string::npos);
  // Nothing of the refused sequences was written: a good one still makes a valid file.
  w.add(toks, 1, std::vector<float>(24, 0.25f));
  w.finish();
  const DistillDataset d = DistillDataset::open(tmp.file("d.bin"));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d.read(0).tokens, toks);
  EXPECT_THROW(DistillWriter(tmp.file("e.bin"), {}, 4, 10, "x"), Error);
  EXPECT_THROW(DistillWriter(tmp.path() + "/no/such/dir/f.bin", {0}, 4, 10, "x"), Error);
}

TEST(DistillDataset, RefusesMalformedFiles) {
  TempDir tmp;
  const int64_t dim = 8, vocab = 40;
  const auto seqs = make_seqs(2 * dim, vocab);
  const std::string good = write_file(tmp.file("good.bin"), seqs, {0, 1}, dim, vocab);
  const std::vector<uint8_t> bytes = slurp(good);
  const std::string bad = tmp.file("bad.bin");

  auto open_error = [&](const std::vector<uint8_t>& b) {
    spit(bad, b);
    return error_of([&] { DistillDataset::open(bad); });
  };
  std::vector<uint8_t> b = bytes;
  b[0] = 'X';
  EXPECT_NE(open_error(b).find("bad magic"), std::string::npos);
  b = bytes;
  b[8] = 2;  // version 2
  EXPECT_NE(open_error(b).find("version 2"), std::string::npos);
  EXPECT_NE(open_error({}).find("not a distill dataset"), std::string::npos);

  // Truncated anywhere (inside the header, a record, the index, the trailer): refused, naming
  // the file.
  for (size_t cut : {size_t{10}, size_t{100}, bytes.size() / 2, bytes.size() - 30,
                     bytes.size() - 1}) {
    const std::string e = open_error(std::vector<uint8_t>(bytes.begin(), bytes.begin() + cut));
    EXPECT_NE(e.find(bad), std::string::npos) << "cut at " << cut << ": '" << e << "'";
  }
  // Extra bytes after the trailer.
  b = bytes;
  b.push_back(0);
  EXPECT_NE(open_error(b), "");

  // An index entry pointing past the records, and one with prompt_len > L.
  uint64_t index_offset;
  std::memcpy(&index_offset, bytes.data() + 40, 8);
  b = bytes;
  const uint64_t far = index_offset;  // the first record cannot start at the index itself
  std::memcpy(b.data() + index_offset + 24 * 4, &far, 8);
  EXPECT_NE(open_error(b).find("outside the records"), std::string::npos);
  b = bytes;
  const int32_t big = 1000;
  std::memcpy(b.data() + index_offset + 12, &big, 4);
  EXPECT_NE(open_error(b).find("prompt length"), std::string::npos);

  // A token id outside the vocabulary is caught when the sequence is read.
  b = bytes;
  uint64_t first;
  std::memcpy(&first, bytes.data() + index_offset, 8);
  const int32_t huge = 1 << 20;
  std::memcpy(b.data() + first, &huge, 4);
  spit(bad, b);
  const DistillDataset d = DistillDataset::open(bad);
  EXPECT_NE(error_of([&] { d.read(0); }).find("outside the vocabulary"), std::string::npos);
  EXPECT_THROW(DistillDataset::open(tmp.file("missing.bin")), Error);
}

}  // namespace
}  // namespace ssd
