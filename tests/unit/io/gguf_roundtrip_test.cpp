// Writer -> reader round trips for GGUF: every metadata type comes back with its value, tensor
// bytes come back identical and at the right place, for v2 and v3 and for non-default alignments.
// The float path is checked through decoded values: F32 exactly, F16 within half an F16 ulp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "runtime/core/error.h"
#include "runtime/io/gguf_file.h"
#include "tests/support/gguf_writer.h"
#include "tests/unit/io/error_text.h"

namespace ssd {
namespace {

using test::error_text;
using test::GgufWriter;
using ::testing::HasSubstr;

std::vector<uint8_t> iota_bytes(size_t n, uint8_t start) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(start + i * 7);
  return b;
}

GgufWriter metadata_writer() {
  GgufWriter w;
  w.add_u8("t.u8", 200)
      .add_i8("t.i8", -100)
      .add_u16("t.u16", 60000)
      .add_i16("t.i16", -30000)
      .add_u32("t.u32", 4000000000u)
      .add_i32("t.i32", -2000000000)
      .add_u64("t.u64", 1ull << 60)
      .add_i64("t.i64", -(1ll << 60))
      .add_f32("t.f32", 0.15625f)
      .add_f64("t.f64", 1.0 / 3.0)
      .add_bool("t.true", true)
      .add_bool("t.false", false)
      .add_string("t.str", "hello \xc3\xa9")
      .add_string("t.empty", "")
      .add_int_array("t.i32s", {-1, 0, 7, 2147483647}, GgufType::I32)
      .add_int_array("t.u8s", {0, 255}, GgufType::U8)
      .add_int_array("t.bools", {1, 0, 1}, GgufType::BOOL)
      .add_float_array("t.f32s", {0.5, -2.25})
      .add_float_array("t.f64s", {1e300, -1e-300}, GgufType::F64)
      .add_string_array("t.strs", {"a", "", "ccc"})
      .add_string_array("t.nostrs", {});
  return w;
}

void expect_metadata(const GgufFile& f) {
  EXPECT_EQ(f.get_int("t.u8"), 200);
  EXPECT_EQ(f.get_int("t.i8"), -100);
  EXPECT_EQ(f.get_int("t.u16"), 60000);
  EXPECT_EQ(f.get_int("t.i16"), -30000);
  EXPECT_EQ(f.get_int("t.u32"), 4000000000ll);
  EXPECT_EQ(f.get_int("t.i32"), -2000000000);
  EXPECT_EQ(f.get_int("t.u64"), 1ll << 60);
  EXPECT_EQ(f.get_int("t.i64"), -(1ll << 60));
  EXPECT_EQ(f.get_float("t.f32"), 0.15625);  // exactly representable
  EXPECT_EQ(f.get_float("t.f64"), 1.0 / 3.0);
  EXPECT_EQ(f.get_float("t.i32"), -2e9);  // any number reads as float
  EXPECT_EQ(f.get_bool("t.true"), true);
  EXPECT_EQ(f.get_bool("t.false"), false);
  EXPECT_EQ(f.get_string("t.str"), "hello \xc3\xa9");
  EXPECT_EQ(f.get_string("t.empty"), "");
  EXPECT_EQ(f.get_int_array("t.i32s"), (std::vector<int64_t>{-1, 0, 7, 2147483647}));
  EXPECT_EQ(f.get_int_array("t.u8s"), (std::vector<int64_t>{0, 255}));
  EXPECT_EQ(f.get_int_array("t.bools"), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(f.get_float_array("t.f32s"), (std::vector<double>{0.5, -2.25}));
  EXPECT_EQ(f.get_float_array("t.f64s"), (std::vector<double>{1e300, -1e-300}));
  EXPECT_EQ(f.get_float_array("t.i32s"), (std::vector<double>{-1, 0, 7, 2147483647}));
  EXPECT_EQ(f.get_string_array("t.strs"), (std::vector<std::string_view>{"a", "", "ccc"}));
  EXPECT_EQ(f.get_string_array("t.nostrs"), std::vector<std::string_view>{});
  EXPECT_EQ(f.metadata().at("t.u16").type, GgufType::U16);
  EXPECT_EQ(f.metadata().at("t.strs").elem_type, GgufType::STRING);
  EXPECT_FALSE(f.has("t.absent"));
  EXPECT_EQ(f.get_int("t.absent"), std::nullopt);
  EXPECT_EQ(f.get_string_array("t.absent"), std::nullopt);
}

class GgufVersions : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufVersions, MetadataAndTensorBytesRoundTrip) {
  test::TempDir tmp;
  GgufWriter w = metadata_writer();
  w.set_version(GetParam());
  const auto q = iota_bytes(2 * 34 * 3, 1);  // Q8_0: 2 blocks per row, 3 rows
  const auto h = iota_bytes(5 * 2, 9);       // F16 [5]
  const auto k = iota_bytes(144 * 2, 3);     // Q4_K: 1 block per row, 2 rows
  w.add_raw_tensor("q", DType::Q8_0, {64, 3}, q)
      .add_raw_tensor("h", DType::F16, {5}, h)
      .add_raw_tensor("k", DType::Q4_K, {256, 2, 1, 1}, k);
  const GgufFile f = GgufFile::open(w.write(tmp.file("m.gguf")));

  EXPECT_EQ(f.version(), GetParam());
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  expect_metadata(f);
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.tensors()[0].name, "q");  // file order
  EXPECT_EQ(f.tensors()[2].name, "k");
  const TensorRef* tq = f.find_tensor("q");
  ASSERT_NE(tq, nullptr);
  EXPECT_EQ(tq->type, DType::Q8_0);
  EXPECT_EQ(tq->ne, (std::vector<uint64_t>{64, 3}));
  EXPECT_EQ(tq->rows(), 3u);
  EXPECT_EQ(tq->row_bytes(), 68u);
  EXPECT_EQ(tq->file, f.path());
  ASSERT_EQ(tq->nbytes, q.size());
  EXPECT_EQ(std::memcmp(tq->data, q.data(), q.size()), 0);
  const TensorRef* th = f.find_tensor("h");
  ASSERT_NE(th, nullptr);
  ASSERT_EQ(th->nbytes, h.size());
  EXPECT_EQ(std::memcmp(th->data, h.data(), h.size()), 0);
  const TensorRef* tk = f.find_tensor("k");
  ASSERT_NE(tk, nullptr);
  EXPECT_EQ(tk->ne, (std::vector<uint64_t>{256, 2, 1, 1}));
  ASSERT_EQ(tk->nbytes, k.size());
  EXPECT_EQ(std::memcmp(tk->data, k.data(), k.size()), 0);
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
}

INSTANTIATE_TEST_SUITE_P(V2AndV3, GgufVersions, ::testing::Values(2u, 3u));

class GgufAlignments : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufAlignments, CustomAlignmentPlacesEveryTensor) {
  const uint32_t a = GetParam();
  GgufWriter w;
  w.set_alignment(a);
  std::vector<std::vector<uint8_t>> payloads;
  for (int i = 0; i < 4; ++i) {
    payloads.push_back(iota_bytes(4 * (3 + i), static_cast<uint8_t>(i)));  // odd F32 lengths
    w.add_raw_tensor(fmt::format("t{}", i), DType::F32, {3u + i}, payloads.back());
  }
  const GgufFile f = GgufFile::parse(MappedFile::from_bytes("mem.gguf", w.bytes()));
  EXPECT_EQ(f.alignment(), a);
  EXPECT_EQ(f.get_int("general.alignment"), a);
  EXPECT_EQ(f.data_offset() % a, 0u);
  ASSERT_EQ(f.tensors().size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const TensorRef& t = f.tensors()[i];
    EXPECT_EQ(static_cast<uint64_t>(t.data - f.tensors()[0].data) % a, 0u) << t.name;
    ASSERT_EQ(t.nbytes, payloads[i].size());
    EXPECT_EQ(std::memcmp(t.data, payloads[i].data(), t.nbytes), 0) << t.name;
  }
}

INSTANTIATE_TEST_SUITE_P(PowersOfTwo, GgufAlignments, ::testing::Values(1u, 8u, 64u, 4096u));

TEST(GgufRoundTrip, FloatValuesEncodeThroughTheTargetType) {
  const auto v = test::random_floats(64 * 2, 11, 2.0f);  // [2, 64]
  GgufWriter w;
  w.add_tensor("f32", {64, 2}, v).add_tensor("f16", {64, 2}, v, DType::F16);
  const GgufFile f = GgufFile::parse(MappedFile::from_bytes("mem.gguf", w.bytes()));
  const TensorRef* t32 = f.find_tensor("f32");
  ASSERT_NE(t32, nullptr);
  ASSERT_EQ(t32->nbytes, v.size() * 4);
  EXPECT_EQ(std::memcmp(t32->data, v.data(), t32->nbytes), 0);  // F32 is stored verbatim
  const TensorRef* t16 = f.find_tensor("f16");
  ASSERT_NE(t16, nullptr);
  EXPECT_EQ(t16->type, DType::F16);
  ASSERT_EQ(t16->nbytes, v.size() * 2);
  // Decoded by hand (not by the kernels that encoded it): |x| < 2 has an F16 ulp <= 2^-10, so
  // round-to-nearest is within 2^-11.
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t hbits;
    std::memcpy(&hbits, t16->data + 2 * i, 2);
    const int e = (hbits >> 10) & 31, m = hbits & 1023;
    const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    const double x = (hbits & 0x8000) ? -mag : mag;
    EXPECT_NEAR(x, v[i], 0x1p-11) << i;
  }
}

TEST(GgufRoundTrip, ZeroTensorsAndZeroMetadataIsValid) {
  const GgufFile f = GgufFile::parse(MappedFile::from_bytes("mem.gguf", GgufWriter().bytes()));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_TRUE(f.metadata().empty());
}

TEST(GgufGetters, WrongTypeNamesKeyAndActualType) {
  GgufWriter w = metadata_writer();
  const GgufFile f = GgufFile::parse(MappedFile::from_bytes("mem.gguf", w.bytes()));
  auto msg_of = [](auto&& fn) { return error_text(fn); };
  std::string m = msg_of([&] { (void)f.get_int("t.str"); });
  EXPECT_THAT(m, HasSubstr("t.str"));
  EXPECT_THAT(m, HasSubstr("STRING"));
  m = msg_of([&] { (void)f.get_string("t.u32"); });
  EXPECT_THAT(m, HasSubstr("t.u32"));
  EXPECT_THAT(m, HasSubstr("U32"));
  m = msg_of([&] { (void)f.get_bool("t.i8"); });
  EXPECT_THAT(m, HasSubstr("I8"));
  m = msg_of([&] { (void)f.get_float("t.strs"); });
  EXPECT_THAT(m, HasSubstr("ARRAY of STRING"));
  m = msg_of([&] { (void)f.get_int_array("t.f32s"); });
  EXPECT_THAT(m, HasSubstr("ARRAY of F32"));
  m = msg_of([&] { (void)f.get_string_array("t.i32s"); });
  EXPECT_THAT(m, HasSubstr("t.i32s"));
  m = msg_of([&] { (void)f.get_float_array("t.strs"); });
  EXPECT_THAT(m, HasSubstr("t.strs"));
  m = msg_of([&] { (void)f.get_int("t.f64"); });
  EXPECT_THAT(m, HasSubstr("F64"));
}

TEST(GgufGetters, U64AboveInt64MaxIsReportedNotWrapped) {
  GgufWriter w;
  w.add_u64("big", ~0ull);
  const GgufFile f = GgufFile::parse(MappedFile::from_bytes("mem.gguf", w.bytes()));
  EXPECT_THAT(error_text([&] { (void)f.get_int("big"); }), HasSubstr("does not fit in int64"));
  EXPECT_EQ(f.get_float("big"), 18446744073709551615.0);
}

}  // namespace
}  // namespace ssd
