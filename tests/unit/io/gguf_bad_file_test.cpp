// One malformed GGUF file per check of the reader. Each case starts from a small valid file built
// by GgufWriter, breaks exactly one field (by patching its bytes at the position GgufLayout
// reports, or by writing a bad record), and asserts that the error names the file, the field and
// the offending value - the message is the user's only clue about what is wrong with their model.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "runtime/io/gguf_file.h"
#include "tests/support/gguf_writer.h"
#include "tests/unit/io/error_text.h"

namespace ssd {
namespace {

using test::error_text;
using test::GgufLayout;
using test::GgufWriter;
using test::patch_u32;
using test::patch_u64;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A valid file: two metadata entries and two tensors, plus the layout of its fields.
struct Sample {
  std::vector<uint8_t> bytes;
  GgufLayout layout;
};

Sample sample(GgufWriter w = GgufWriter()) {
  w.add_string("general.architecture", "llama").add_u32("llama.block_count", 2);
  w.add_raw_tensor("blk.0.attn_q.weight", DType::Q8_0, {32, 2}, std::vector<uint8_t>(68, 1));
  w.add_raw_tensor("output_norm.weight", DType::F32, {4}, std::vector<uint8_t>(16, 2));
  Sample s;
  s.bytes = w.bytes(&s.layout);
  return s;
}

std::string parse_error(std::vector<uint8_t> bytes) {
  return error_text([&] { GgufFile::parse(MappedFile::from_bytes("bad.gguf", std::move(bytes))); });
}

// The raw value bytes of an ARRAY kv: element type, count, then `elems`.
std::vector<uint8_t> array_value(uint32_t elem_type, uint64_t count, std::vector<uint8_t> elems) {
  std::vector<uint8_t> b(12, 0);
  patch_u32(b, 0, elem_type);
  patch_u64(b, 4, count);
  b.insert(b.end(), elems.begin(), elems.end());
  return b;
}

TEST(GgufBadFile, SampleIsValid) {
  const GgufFile f = GgufFile::parse(MappedFile::from_bytes("ok.gguf", sample().bytes));
  EXPECT_EQ(f.tensors().size(), 2u);
}

TEST(GgufBadFile, EmptyFile) {
  EXPECT_THAT(parse_error({}), AllOf(HasSubstr("bad.gguf"), HasSubstr("empty")));
}

TEST(GgufBadFile, BadMagic) {
  auto s = sample();
  s.bytes[0] = 'X';
  EXPECT_THAT(parse_error(s.bytes), AllOf(HasSubstr("magic"), HasSubstr("XGUF")));
  EXPECT_THAT(parse_error({'G', 'G'}), HasSubstr("too small"));
}

TEST(GgufBadFile, VersionOneIsRefused) {
  auto s = sample();
  patch_u32(s.bytes, s.layout.version_at, 1);
  EXPECT_THAT(parse_error(s.bytes), HasSubstr("version 1 is not supported"));
}

TEST(GgufBadFile, UnknownVersion) {
  auto s = sample();
  patch_u32(s.bytes, s.layout.version_at, 7);
  EXPECT_THAT(parse_error(s.bytes), HasSubstr("unsupported GGUF version 7"));
}

TEST(GgufBadFile, BigEndianFileIsDetected) {
  auto s = sample();
  patch_u32(s.bytes, s.layout.version_at, 0x03000000u);
  EXPECT_THAT(parse_error(s.bytes), AllOf(HasSubstr("big-endian"), HasSubstr("0x3000000")));
}

TEST(GgufBadFile, HugeTensorCountFailsFast) {
  auto s = sample();
  patch_u64(s.bytes, s.layout.tensor_count_at, 1ull << 60);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string msg = parse_error(s.bytes);
  EXPECT_THAT(msg, AllOf(HasSubstr("tensor_count"), HasSubstr("1152921504606846976")));
  // Checked before any loop or reserve(): far below a second even on a loaded machine.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
}

TEST(GgufBadFile, HugeKvCount) {
  auto s = sample();
  patch_u64(s.bytes, s.layout.kv_count_at, 1ull << 62);
  EXPECT_THAT(parse_error(s.bytes), AllOf(HasSubstr("kv_count"), HasSubstr("4611686018427387904")));
}

TEST(GgufBadFile, KvCountLargerThanPresent) {
  GgufWriter w;
  w.add_u32("a", 1).add_u32("b", 2).add_u32("c", 3);
  GgufLayout lay;
  auto bytes = w.bytes(&lay);
  patch_u64(bytes, lay.kv_count_at, 4);  // the fourth entry would start in the zero padding
  EXPECT_THAT(parse_error(bytes), AllOf(HasSubstr("metadata entry #3"), HasSubstr("empty key")));
  patch_u64(bytes, lay.kv_count_at, 40);  // no room for 40 entries at all
  EXPECT_THAT(parse_error(bytes), HasSubstr("kv_count 40 cannot fit"));
  // With tensors following, the extra entry is read from the tensor table, which then breaks.
  auto s = sample();
  patch_u64(s.bytes, s.layout.kv_count_at, 3);
  EXPECT_THAT(parse_error(s.bytes), AllOf(HasSubstr("tensor #0"), HasSubstr("name length")));
}

TEST(GgufBadFile, KeyLengthBeyondFile) {
  auto s = sample();
  patch_u64(s.bytes, s.layout.kvs[1].key_len_at, 1ull << 40);
  EXPECT_THAT(parse_error(s.bytes),
              AllOf(HasSubstr("metadata entry #1"), HasSubstr("key length 1099511627776")));
}

TEST(GgufBadFile, EmptyKey) {
  GgufWriter w;
  w.add_u8("", 1);
  EXPECT_THAT(parse_error(w.bytes()), HasSubstr("empty key"));
}

TEST(GgufBadFile, DuplicateKey) {
  GgufWriter w;
  w.add_u32("llama.block_count", 1).add_u32("llama.block_count", 2);
  EXPECT_THAT(parse_error(w.bytes()),
              AllOf(HasSubstr("'llama.block_count'"), HasSubstr("duplicate key")));
}

TEST(GgufBadFile, UnknownValueType) {
  auto s = sample();
  patch_u32(s.bytes, s.layout.kvs[1].type_at, 13);
  EXPECT_THAT(parse_error(s.bytes),
              AllOf(HasSubstr("'llama.block_count'"), HasSubstr("unknown value type 13")));
}

TEST(GgufBadFile, BoolByteOtherThanZeroOrOne) {
  GgufWriter w;
  w.add_raw_kv("flag", 7, {2});
  EXPECT_THAT(parse_error(w.bytes()), AllOf(HasSubstr("'flag'"), HasSubstr("BOOL value byte is 2")));
}

TEST(GgufBadFile, StringValueBeyondFile) {
  auto s = sample();
  patch_u64(s.bytes, s.layout.kvs[0].value_at, 5000);
  EXPECT_THAT(parse_error(s.bytes),
              AllOf(HasSubstr("'general.architecture'"), HasSubstr("string length 5000")));
}

TEST(GgufBadFile, ArrayLengthBeyondFile) {
  GgufWriter w;
  w.add_raw_kv("arr", 9, array_value(6 /*F32*/, 1ull << 61, {0, 0, 0, 0}));
  EXPECT_THAT(parse_error(w.bytes()),
              AllOf(HasSubstr("'arr'"), HasSubstr("array length 2305843009213693952")));
}

TEST(GgufBadFile, ArrayOfStringsWithBadLength) {
  GgufWriter w;
  std::vector<uint8_t> elem(8, 0);
  patch_u64(elem, 0, 99);  // string of 99 bytes, none present
  w.add_raw_kv("tokens", 9, array_value(8 /*STRING*/, 1, elem));
  EXPECT_THAT(parse_error(w.bytes()), AllOf(HasSubstr("'tokens'"), HasSubstr("array string")));
}

TEST(GgufBadFile, NestedArrayIsRejectedCleanly) {
  GgufWriter w;
  w.add_raw_kv("nest", 9, array_value(9, 1, array_value(0 /*U8*/, 1, {5})));
  EXPECT_THAT(parse_error(w.bytes()), AllOf(HasSubstr("'nest'"), HasSubstr("nested arrays")));
}

TEST(GgufBadFile, UnknownArrayElementType) {
  GgufWriter w;
  w.add_raw_kv("arr", 9, array_value(42, 1, {0}));
  EXPECT_THAT(parse_error(w.bytes()), HasSubstr("unknown array element type 42"));
}

TEST(GgufBadFile, U64ArrayElementAboveInt64) {
  GgufWriter w;
  std::vector<uint8_t> elem(8, 0xff);
  w.add_raw_kv("ids", 9, array_value(10 /*U64*/, 1, elem));
  EXPECT_THAT(parse_error(w.bytes()), AllOf(HasSubstr("'ids'"), HasSubstr("does not fit")));
}

TEST(GgufBadFile, TruncatedInsideMetadata) {
  GgufWriter w;  // no tensors, so the up-front count check leaves the truncation to the cursor
  w.add_string("general.architecture", "llama").add_u32("llama.block_count", 2);
  GgufLayout lay;
  auto bytes = w.bytes(&lay);
  bytes.resize(lay.kvs[1].value_at + 2);  // half of the U32 value
  EXPECT_THAT(parse_error(bytes), AllOf(HasSubstr("'llama.block_count'"), HasSubstr("truncated"),
                                        HasSubstr("U32 value needs 4 bytes")));
  // A truncated tensor table is caught by the count check before anything is read.
  auto s = sample();
  s.bytes.resize(s.layout.tensors[0].type_at);
  EXPECT_THAT(parse_error(s.bytes), HasSubstr("tensor_count 2 cannot fit"));
}

TEST(GgufBadFile, AlignmentNotAPowerOfTwo) {
  GgufWriter w;
  w.add_u32("general.alignment", 24);
  EXPECT_THAT(parse_error(w.bytes()),
              AllOf(HasSubstr("general.alignment"), HasSubstr("24 is not a power of two")));
  GgufWriter z;
  z.add_u32("general.alignment", 0);
  EXPECT_THAT(parse_error(z.bytes()), HasSubstr("0 is not a power of two"));
}

TEST(GgufBadFile, AlignmentOfWrongType) {
  GgufWriter w;
  w.add_string("general.alignment", "32");
  EXPECT_THAT(parse_error(w.bytes()), AllOf(HasSubstr("general.alignment"), HasSubstr("STRING")));
}

TEST(GgufBadFile, TensorNameBeyondFile) {
  auto s = sample();
  patch_u64(s.bytes, s.layout.tensors[1].name_len_at, ~0ull);
  EXPECT_THAT(parse_error(s.bytes),
              AllOf(HasSubstr("tensor #1"), HasSubstr("tensor name length 18446744073709551615")));
}

TEST(GgufBadFile, DuplicateTensorName) {
  GgufWriter w;
  w.add_raw_tensor("a", DType::F32, {1}, {0, 0, 0, 0});
  w.add_raw_tensor("a", DType::F32, {1}, {0, 0, 0, 0});
  EXPECT_THAT(parse_error(w.bytes()), AllOf(HasSubstr("tensor 'a'"), HasSubstr("duplicate tensor")));
}

TEST(GgufBadFile, NDimsOutOfRange) {
  auto s = sample();
  patch_u32(s.bytes, s.layout.tensors[0].n_dims_at, 5);
  EXPECT_THAT(parse_error(s.bytes),
              AllOf(HasSubstr("tensor 'blk.0.attn_q.weight'"), HasSubstr("n_dims 5")));
  patch_u32(s.bytes, s.layout.tensors[0].n_dims_at, 0);
  EXPECT_THAT(parse_error(s.bytes), HasSubstr("n_dims 0"));
}

TEST(GgufBadFile, ZeroDimension) {
  auto s = sample();
  patch_u64(s.bytes, s.layout.tensors[0].dims_at + 8, 0);
  EXPECT_THAT(parse_error(s.bytes),
              AllOf(HasSubstr("tensor 'blk.0.attn_q.weight'"), HasSubstr("dimension 1 is 0")));
}

TEST(GgufBadFile, ElementCountOverflow) {
  GgufWriter w;
  w.add_unchecked_tensor("big", 0, {1ull << 32, 1ull << 32, 2}, {});
  EXPECT_THAT(parse_error(w.bytes()), AllOf(HasSubstr("tensor 'big'"), HasSubstr("2^64")));
}

TEST(GgufBadFile, ByteSizeOverflow) {
  GgufWriter w;  // 2^62 F32 elements: the count fits, 4 bytes each does not
  w.add_unchecked_tensor("big", 0, {1ull << 31, 1ull << 31}, {});
  EXPECT_THAT(parse_error(w.bytes()), AllOf(HasSubstr("tensor 'big'"), HasSubstr("overflows")));
}

TEST(GgufBadFile, UnsupportedTensorTypeNamesTensorAndId) {
  auto s = sample();
  patch_u32(s.bytes, s.layout.tensors[0].type_at, 6);
  EXPECT_THAT(parse_error(s.bytes), AllOf(HasSubstr("tensor 'blk.0.attn_q.weight'"),
                                          HasSubstr("unsupported tensor type id 6 (Q5_0)")));
  patch_u32(s.bytes, s.layout.tensors[0].type_at, 4000);
  EXPECT_THAT(parse_error(s.bytes), HasSubstr("type id 4000 (unknown)"));
}

TEST(GgufBadFile, InnermostDimensionNotWholeBlocks) {
  auto s = sample();
  patch_u64(s.bytes, s.layout.tensors[0].dims_at, 48);
  EXPECT_THAT(parse_error(s.bytes),
              AllOf(HasSubstr("tensor 'blk.0.attn_q.weight'"),
                    HasSubstr("innermost dimension 48 is not a multiple of the Q8_0 block size 32")));
}

TEST(GgufBadFile, MisalignedOffset) {
  auto s = sample();
  patch_u64(s.bytes, s.layout.tensors[1].offset_at, 100);
  EXPECT_THAT(parse_error(s.bytes),
              AllOf(HasSubstr("tensor 'output_norm.weight'"),
                    HasSubstr("offset 100 is not a multiple of general.alignment 32")));
}

TEST(GgufBadFile, DataBeyondEndOfFile) {
  auto s = sample();
  patch_u64(s.bytes, s.layout.tensors[0].offset_at, 12352);
  const std::string want = fmt::format("tensor 'blk.0.attn_q.weight': data offset 12352 + size 68 "
                                       "exceeds file size {}", s.bytes.size());
  EXPECT_THAT(parse_error(s.bytes), HasSubstr(want));
}

TEST(GgufBadFile, OffsetPlusSizeOverflows) {
  auto s = sample();
  patch_u64(s.bytes, s.layout.tensors[1].offset_at, ~0ull - 31);  // aligned, wraps when added
  EXPECT_THAT(parse_error(s.bytes),
              AllOf(HasSubstr("tensor 'output_norm.weight'"), HasSubstr("exceeds file size")));
}

TEST(GgufBadFile, TruncatedDataSection) {
  auto s = sample();
  s.bytes.resize(s.layout.tensors[1].data_at + 8);  // half of the last tensor
  EXPECT_THAT(parse_error(s.bytes),
              AllOf(HasSubstr("tensor 'output_norm.weight'"), HasSubstr("size 16 exceeds file size")));
  ASSERT_LT(s.layout.tensors[1].offset_at + 8, s.layout.data_start - 1);  // there is padding
  s.bytes.resize(s.layout.data_start - 1);  // ends inside the padding before the data
  EXPECT_THAT(parse_error(s.bytes), HasSubstr("past the end of the file"));
}

TEST(GgufBadFile, UnprintableNamesAreEscaped) {
  GgufWriter w;
  w.add_u8(std::string("k\n\x01"), 1).add_u8(std::string("k\n\x01"), 1);
  EXPECT_THAT(parse_error(w.bytes()), HasSubstr("'k\\x0a\\x01'"));
}

TEST(GgufBadFile, ErrorsFromOpenNameThePath) {
  test::TempDir tmp;
  auto s = sample();
  patch_u32(s.bytes, s.layout.version_at, 1);
  const std::string path = tmp.file("v1.gguf");
  test::write_file(path, s.bytes);
  EXPECT_THAT(error_text([&] { GgufFile::open(path); }), HasSubstr(path + ": header: "));
  EXPECT_THAT(error_text([&] { GgufFile::open(tmp.file("missing.gguf")); }),
              AllOf(HasSubstr("missing.gguf"), HasSubstr("no such file")));
}

}  // namespace
}  // namespace ssd
