// Spelling classes: a leading space marker (byte-level BPE's "Ġ", SentencePiece's "▁") and the
// case of ASCII letters do not tell tokens apart; anything else does, and a bare marker or an
// empty token is a class of its own.
#include "runtime/drafters/spelling_classes.h"

#include <gtest/gtest.h>

namespace ssd {
namespace {

TEST(SpellingClasses, SpaceMarkerAndCaseDoNotTellTokensApart) {
  const std::vector<std::string> vocab = {
      "the",            // 0
      "\xC4\xA0The",    // 1: "ĠThe"
      "THE",            // 2
      "\xE2\x96\x81the",  // 3: "▁the"
      "then",           // 4
      "\xC4\xA0",       // 5: "Ġ" alone
      "",               // 6
      "\xC4\xA0\xC4\xA0the",  // 7: two markers: only one is dropped
      "\xC3\x89t\xC3\xA9",    // 8: "Été": only ASCII letters are lowered
      "\xC3\xA9t\xC3\xA9",    // 9: "été"
      "\xC4\xA0",       // 10: another bare marker, its own class too
  };
  EXPECT_EQ(spelling_classes(vocab), (std::vector<int32_t>{0, 0, 0, 0, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_TRUE(spelling_classes({}).empty());
}

}  // namespace
}  // namespace ssd
