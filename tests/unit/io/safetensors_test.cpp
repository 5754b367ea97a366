// Safetensors: round trips through SafetensorsWriter (single file, sharded index, directory
// lookup; shapes reversed to innermost first; bytes identical) and one malformed header per check
// of the reader, each asserting that the message names the file, tensor and field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/io/safetensors_file.h"
#include "runtime/io/safetensors_writer.h"
#include "tests/support/gguf_writer.h"  // write_file
#include "tests/unit/io/error_text.h"

namespace ssd {
namespace {

using json = nlohmann::ordered_json;
using test::error_text;

using ::testing::AllOf;
using ::testing::HasSubstr;

// F32 [3, 4], raw F16 [2], raw BF16 [5] (outermost first).
SafetensorsWriter sample_writer() {
  SafetensorsWriter w;
  std::vector<float> a(12);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * 0.5f - 2.0f;
  w.add_tensor("model.a.weight", {3, 4}, a);
  w.add_raw_tensor("model.h", "F16", {2}, {0x00, 0x3c, 0x00, 0xc0});  // 1.0, -2.0
  w.add_raw_tensor("model.b", "BF16", {5}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  w.add_metadata("format", "pt");
  return w;
}

std::string parse_error(std::vector<uint8_t> bytes) {
  return error_text(
      [&] { SafetensorsModel::parse(MappedFile::from_bytes("bad.safetensors", std::move(bytes))); });
}

// The sample file with its header edited by `edit`.
std::string error_after(const std::function<void(json&)>& edit) {
  const SafetensorsWriter w = sample_writer();
  auto h = w.header();
  edit(h);
  return parse_error(SafetensorsWriter::assemble(h.dump(), w.data()));
}

void expect_sample(const SafetensorsModel& m) {
  ASSERT_EQ(m.tensors().size(), 3u);
  EXPECT_EQ(m.tensors()[0].name, "model.a.weight");  // file order
  const TensorRef* a = m.find_tensor("model.a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->type, DType::F32);
  EXPECT_EQ(a->ne, (std::vector<uint64_t>{4, 3}));  // reversed: innermost first
  EXPECT_EQ(a->rows(), 3u);
  ASSERT_EQ(a->nbytes, 48u);
  for (int i = 0; i < 12; ++i) {
    float v;
    std::memcpy(&v, a->data + 4 * i, 4);
    EXPECT_EQ(v, static_cast<float>(i) * 0.5f - 2.0f) << i;  // F32 is stored verbatim
  }
  const TensorRef* h = m.find_tensor("model.h");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->type, DType::F16);
  ASSERT_EQ(h->nbytes, 4u);
  EXPECT_EQ(h->data[1], 0x3c);
  EXPECT_EQ(h->data[3], 0xc0);
  const TensorRef* b = m.find_tensor("model.b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->type, DType::BF16);
  EXPECT_EQ(b->ne, std::vector<uint64_t>{5});
  ASSERT_EQ(b->nbytes, 10u);
  EXPECT_EQ(std::memcmp(b->data, std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}.data(), 10), 0);
  EXPECT_EQ(m.find_tensor("absent"), nullptr);
  EXPECT_EQ(m.metadata().at("format"), "pt");
}

TEST(SafetensorsRoundTrip, SingleFile) {
  test::TempDir tmp;
  const std::string path = sample_writer().write(tmp.file("x.safetensors"));
  const SafetensorsModel m = SafetensorsModel::open(path);
  expect_sample(m);
  EXPECT_EQ(m.directory(), tmp.path());
  EXPECT_EQ(m.tensors()[0].file, path);
}

TEST(SafetensorsRoundTrip, DirectoryWithSingleFile) {
  test::TempDir tmp;
  sample_writer().write(tmp.file("model.safetensors"));
  const SafetensorsModel m = SafetensorsModel::open(tmp.path());
  expect_sample(m);
  EXPECT_EQ(m.directory(), tmp.path());
}

TEST(SafetensorsRoundTrip, ShardedViaIndexAndDirectory) {
  test::TempDir tmp;
  const std::string index = sample_writer().write_sharded(tmp.path(), 3);
  for (const std::string& p : {index, tmp.path()}) {
    const SafetensorsModel m = SafetensorsModel::open(p);
    expect_sample(m);
    EXPECT_EQ(m.directory(), tmp.path());
    EXPECT_THAT(m.find_tensor("model.b")->file, HasSubstr("model-00003-of-00003.safetensors"));
  }
}

TEST(SafetensorsRoundTrip, HalfFloatValuesAreEncoded) {
  // 1.5 and -0.25 are exact in F16 and BF16, so the encoded bits are known.
  SafetensorsWriter w;
  const std::vector<float> v = {1.5f, -0.25f};
  w.add_tensor("h", {2}, v, DType::F16).add_tensor("b", {1, 2}, v, DType::BF16);
  const auto m = SafetensorsModel::parse(MappedFile::from_bytes("mem.safetensors", w.bytes()));
  const TensorRef* h = m.find_tensor("h");
  const TensorRef* b = m.find_tensor("b");
  ASSERT_TRUE(h && b);
  EXPECT_EQ(std::vector<uint8_t>(h->data, h->data + 4), (std::vector<uint8_t>{0x00, 0x3e, 0x00, 0xb4}));
  EXPECT_EQ(std::vector<uint8_t>(b->data, b->data + 4), (std::vector<uint8_t>{0xc0, 0x3f, 0x80, 0xbe}));
  EXPECT_EQ(b->ne, (std::vector<uint64_t>{2, 1}));
}

TEST(SafetensorsRoundTrip, ScalarShape) {
  SafetensorsWriter w;
  w.add_raw_tensor("s", "F32", {}, {0, 0, 128, 63});
  const auto m = SafetensorsModel::parse(MappedFile::from_bytes("mem.safetensors", w.bytes()));
  EXPECT_EQ(m.find_tensor("s")->ne, std::vector<uint64_t>{1});
}

TEST(SafetensorsBadFile, EmptyAndTooSmall) {
  EXPECT_THAT(parse_error({}), AllOf(HasSubstr("bad.safetensors"), HasSubstr("empty")));
  EXPECT_THAT(parse_error({1, 2, 3}), HasSubstr("too small"));
}

TEST(SafetensorsBadFile, HeaderLengthBeyondFile) {
  auto bytes = sample_writer().bytes();
  test::patch_u64(bytes, 0, 1ull << 50);
  EXPECT_THAT(parse_error(bytes), HasSubstr("header length 1125899906842624 exceeds"));
}

TEST(SafetensorsBadFile, InvalidJsonNamesFile) {
  const std::string text = "{\"a\": [1, 2";
  EXPECT_THAT(parse_error(SafetensorsWriter::assemble(text, {})),
              AllOf(HasSubstr("bad.safetensors"), HasSubstr("not valid JSON")));
  EXPECT_THAT(parse_error(SafetensorsWriter::assemble("[1]", {})), HasSubstr("not a JSON object"));
}

TEST(SafetensorsBadFile, DuplicateTensorName) {
  const std::string text =
      R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
      R"( "t": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})";
  EXPECT_THAT(parse_error(SafetensorsWriter::assemble(text, std::vector<uint8_t>(8))),
              HasSubstr("duplicate JSON key 't'"));
}

TEST(SafetensorsBadFile, UnsupportedDtypeNamesTensorAndDtype) {
  SafetensorsWriter w;
  w.add_raw_tensor("ids", "I64", {2}, std::vector<uint8_t>(16));
  EXPECT_THAT(parse_error(w.bytes()), AllOf(HasSubstr("tensor 'ids'"), HasSubstr("dtype 'I64'")));
}

TEST(SafetensorsBadFile, MissingOrMistypedFields) {
  EXPECT_THAT(error_after([](json& h) { h["model.h"].erase("shape"); }),
              AllOf(HasSubstr("tensor 'model.h'"), HasSubstr("missing field 'shape'")));
  EXPECT_THAT(error_after([](json& h) { h["model.h"]["dtype"] = 3; }),
              HasSubstr("dtype is not a string"));
  EXPECT_THAT(error_after([](json& h) { h["model.h"]["shape"] = {-2}; }),
              AllOf(HasSubstr("tensor 'model.h'"), HasSubstr("shape entry -2")));
  EXPECT_THAT(error_after([](json& h) { h["model.h"]["data_offsets"] = {0}; }),
              HasSubstr("data_offsets is not a [begin, end] pair"));
  EXPECT_THAT(error_after([](json& h) { h["model.h"]["data_offsets"][1] = 1.5; }),
              HasSubstr("data_offsets entry 1.5"));
  EXPECT_THAT(error_after([](json& h) { h["model.h"] = 7; }), HasSubstr("not a JSON object"));
}

TEST(SafetensorsBadFile, TooManyOrZeroDimensions) {
  EXPECT_THAT(error_after([](json& h) { h["model.h"]["shape"] = {1, 1, 1, 1, 2}; }),
              AllOf(HasSubstr("tensor 'model.h'"), HasSubstr("5 dimensions")));
  EXPECT_THAT(error_after([](json& h) { h["model.h"]["shape"] = {0, 2}; }),
              HasSubstr("zero dimension"));
}

TEST(SafetensorsBadFile, ShapeOverflow) {
  EXPECT_THAT(error_after([](json& h) { h["model.h"]["shape"] = {1ull << 32, 1ull << 32}; }),
              AllOf(HasSubstr("tensor 'model.h'"), HasSubstr("overflows")));
  EXPECT_THAT(error_after([](json& h) { h["model.h"]["shape"] = {1ull << 32, 1ull << 31}; }),
              AllOf(HasSubstr("tensor 'model.h'"), HasSubstr("byte size")));
}

TEST(SafetensorsBadFile, BeginAfterEnd) {
  EXPECT_THAT(error_after([](json& h) { h["model.h"]["data_offsets"] = {52, 48}; }),
              AllOf(HasSubstr("tensor 'model.h'"), HasSubstr("[52, 48] has begin > end")));
}

TEST(SafetensorsBadFile, RangeOutsideDataSection) {
  EXPECT_THAT(error_after([](json& h) { h["model.b"]["data_offsets"] = {52, 62000}; }),
              AllOf(HasSubstr("tensor 'model.b'"), HasSubstr("exceed the data section of 62 bytes")));
}

TEST(SafetensorsBadFile, ByteCountDoesNotMatchShape) {
  EXPECT_THAT(error_after([](json& h) { h["model.a.weight"]["shape"] = {3, 3}; }),
              AllOf(HasSubstr("tensor 'model.a.weight'"),
                    HasSubstr("hold 48 bytes, but shape [3,3] of F32 needs 36")));
}

TEST(SafetensorsBadFile, OverlappingTensors) {
  EXPECT_THAT(error_after([](json& h) { h["model.b"]["data_offsets"] = {46, 56}; }),
              AllOf(HasSubstr("tensor 'model.b'"), HasSubstr("overlaps tensor 'model.a.weight'")));
}

TEST(SafetensorsBadFile, MetadataMustBeStrings) {
  EXPECT_THAT(error_after([](json& h) { h["__metadata__"]["n"] = 3; }),
              HasSubstr("__metadata__ value of 'n' is not a string"));
}

TEST(SafetensorsBadFile, ShardedIndexProblems) {
  test::TempDir tmp;
  const std::string index = sample_writer().write_sharded(tmp.path(), 2);
  auto write_index = [&](const json& j) {
    std::ofstream(index, std::ios::trunc) << j.dump();
  };
  json j = json::parse(std::ifstream(index));
  json good = j;

  j["weight_map"]["model.ghost"] = "model-00001-of-00002.safetensors";
  write_index(j);
  EXPECT_THAT(error_text([&] { SafetensorsModel::open(index); }),
              AllOf(HasSubstr(index), HasSubstr("tensor 'model.ghost' is mapped to shard")));

  j = good;
  j["weight_map"]["model.h"] = "../model-00001-of-00002.safetensors";
  write_index(j);
  EXPECT_THAT(error_text([&] { SafetensorsModel::open(index); }), HasSubstr("relative path inside"));

  j = good;
  j["weight_map"]["model.h"] = "missing.safetensors";
  write_index(j);
  EXPECT_THAT(error_text([&] { SafetensorsModel::open(index); }),
              AllOf(HasSubstr("missing.safetensors"), HasSubstr("no such file")));

  write_index(json{{"metadata", json::object()}});
  EXPECT_THAT(error_text([&] { SafetensorsModel::open(index); }), HasSubstr("no \"weight_map\""));

  std::ofstream(index, std::ios::trunc) << "{\"weight_map\": ";
  EXPECT_THAT(error_text([&] { SafetensorsModel::open(index); }),
              AllOf(HasSubstr(index), HasSubstr("not valid JSON")));
}

TEST(SafetensorsBadFile, DirectoryWithoutCheckpoint) {
  test::TempDir tmp;
  EXPECT_THAT(error_text([&] { SafetensorsModel::open(tmp.path()); }),
              AllOf(HasSubstr(tmp.path()), HasSubstr("model.safetensors.index.json")));
}

}  // namespace
}  // namespace ssd
