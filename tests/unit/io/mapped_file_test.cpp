// MappedFile: open errors say what is wrong with the path; empty files open (the parsers reject
// them with their own message); contents and moves keep the bytes where they were.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "runtime/io/mapped_file.h"
#include "tests/support/gguf_writer.h"  // write_file
#include "tests/unit/io/error_text.h"

namespace ssd {
namespace {

using test::error_text;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(MappedFile, MapsTheWholeFile) {
  test::TempDir tmp;
  const std::vector<uint8_t> bytes = {1, 2, 3, 250, 0, 7};
  test::write_file(tmp.file("f.bin"), bytes);
  const MappedFile f = MappedFile::open(tmp.file("f.bin"));
  EXPECT_EQ(f.path(), tmp.file("f.bin"));
  ASSERT_EQ(f.size(), bytes.size());
  EXPECT_EQ(std::memcmp(f.data(), bytes.data(), bytes.size()), 0);
}

TEST(MappedFile, EmptyFileOpensWithSizeZero) {
  test::TempDir tmp;
  test::write_file(tmp.file("empty"), {});
  const MappedFile f = MappedFile::open(tmp.file("empty"));
  EXPECT_EQ(f.size(), 0u);
}

TEST(MappedFile, MissingFileIsNamed) {
  test::TempDir tmp;
  EXPECT_THAT(error_text([&] { MappedFile::open(tmp.file("nope.gguf")); }),
              AllOf(HasSubstr(tmp.file("nope.gguf")), HasSubstr("no such file")));
  EXPECT_THAT(error_text([&] { MappedFile::open(""); }), HasSubstr("empty path"));
}

TEST(MappedFile, DirectoryIsRejected) {
  test::TempDir tmp;
  EXPECT_THAT(error_text([&] { MappedFile::open(tmp.path()); }),
              AllOf(HasSubstr(tmp.path()), HasSubstr("is a directory")));
}

TEST(MappedFile, UnreadableFileSaysPermission) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: file permissions are not enforced";
  test::TempDir tmp;
  test::write_file(tmp.file("secret"), std::vector<uint8_t>{1});
  ASSERT_EQ(::chmod(tmp.file("secret").c_str(), 0), 0);
  EXPECT_THAT(error_text([&] { MappedFile::open(tmp.file("secret")); }),
              AllOf(HasSubstr("secret"), HasSubstr("permission denied")));
}

TEST(MappedFile, NotARegularFile) {
  EXPECT_THAT(error_text([] { MappedFile::open("/dev/null"); }),
              AllOf(HasSubstr("/dev/null"), HasSubstr("not a regular file")));
}

TEST(MappedFile, MoveKeepsTheMapping) {
  test::TempDir tmp;
  test::write_file(tmp.file("f"), std::vector<uint8_t>(100, 9));
  MappedFile a = MappedFile::open(tmp.file("f"));
  const uint8_t* p = a.data();
  MappedFile b = std::move(a);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.size(), 100u);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from state is defined
  MappedFile c = MappedFile::from_bytes("mem", {4, 5});
  c = std::move(b);  // c now owns the mapping (and frees its old bytes)
  EXPECT_EQ(c.data(), p);
  MappedFile d = MappedFile::from_bytes("mem", {4, 5});
  const uint8_t* q = d.data();
  MappedFile e = std::move(d);
  EXPECT_EQ(e.data(), q);  // in-memory bytes do not move either
  EXPECT_EQ(e.data()[1], 5);
  EXPECT_EQ(e.path(), "mem");
}

}  // namespace
}  // namespace ssd
