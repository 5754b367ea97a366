// TextStream on the tiny model's byte-level vocabulary: the text a client receives never holds a
// stop string or any part of one, ends just before the first stop string, and end-of-generation
// tokens give no text.
#include <gtest/gtest.h>

#include "actors/roles/model_session.h"
#include "actors/serve/text_stream.h"
#include "runtime/model/model_file.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"

namespace ssd {
namespace {

class TextStreamTest : public testing::Test {
 protected:
  void SetUp() override {
    const std::string path =
        test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::F32), tmp_.file("t.gguf"));
    file_ = std::make_unique<ModelFile>(ModelFile::open(path));
    tok_ = std::make_unique<Tokenizer>(load_tokenizer(*file_));
  }
  // Feeds `text` token by token; returns what was sent after each push, and the finish.
  std::vector<std::string> feed(TextStream& s, const std::string& text) {
    std::vector<std::string> out;
    for (int32_t id : tok_->encode(text, false, false)) out.push_back(s.push(id));
    out.push_back(s.finish());
    return out;
  }
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += x;
    return s;
  }
  test::TempDir tmp_;
  std::unique_ptr<ModelFile> file_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(TextStreamTest, WithoutStopsEverythingPasses) {
  TextStream s(*tok_, {}, {});
  EXPECT_EQ(join(feed(s, "hello world")), "hello world");
  EXPECT_FALSE(s.stopped());
}

TEST_F(TextStreamTest, StopStringCutsAndIsNeverSent) {
  TextStream s(*tok_, {"STOP", "xyz"}, {});
  const std::vector<std::string> parts = feed(s, "abc STOP def");
  EXPECT_EQ(join(parts), "abc ");
  EXPECT_TRUE(s.stopped());
  for (const auto& p : parts) EXPECT_EQ(p.find('S'), std::string::npos) << p;
}

TEST_F(TextStreamTest, PartialMatchIsHeldThenReleased) {
  TextStream s(*tok_, {"STOP"}, {});
  std::string sent;
  for (int32_t id : tok_->encode("aST", false, false)) sent += s.push(id);
  EXPECT_EQ(sent, "a");  // "ST" could begin STOP
  for (int32_t id : tok_->encode("x", false, false)) sent += s.push(id);
  EXPECT_EQ(sent, "aSTx");  // it did not
  EXPECT_FALSE(s.stopped());
  for (int32_t id : tok_->encode("STO", false, false)) sent += s.push(id);
  sent += s.finish();  // the end releases a held partial match
  EXPECT_EQ(sent, "aSTxSTO");
}

TEST_F(TextStreamTest, EarliestOfSeveralStopsWins) {
  TextStream s(*tok_, {"cd", "bcde"}, {});
  EXPECT_EQ(join(feed(s, "abcdef")), "ab");
}

TEST_F(TextStreamTest, SilentTokensGiveNoText) {
  const std::vector<int32_t> ids = tok_->encode("ab", false, false);
  ASSERT_EQ(ids.size(), 2u);
  TextStream s(*tok_, {}, {ids[1]});
  EXPECT_EQ(s.push(ids[0]) + s.push(ids[1]) + s.finish(), "a");
}

}  // namespace
}  // namespace ssd
