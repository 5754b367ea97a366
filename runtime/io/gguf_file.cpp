// GGUF parsing. The file is untrusted input: every count, length, dimension, type id, offset and
// size is checked before it is used to index memory or size an allocation. Containers are sized
// only after the count has been bounded by the bytes left in the file (an element of any kind
// occupies at least one byte on disk), so a hostile count fails fast instead of allocating.
// Errors read "<path>: <where>: <what>", e.g. "m.gguf: tensor 'blk.0.attn_q.weight': data offset
// 12345 + size 999 exceeds file size 2000 (data section starts at byte 1024)".
#include "runtime/io/gguf_file.h"

#include <fmt/ranges.h>

#include <cstring>
#include <limits>
#include <utility>

#include "runtime/core/error.h"
#include "runtime/io/byte_cursor.h"

namespace ssd {
namespace {

using io::add_ok;
using io::mul_ok;
using io::printable;

constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;
// Smallest possible on-disk record, used to bound counts before anything is reserved:
// key (u64 length + >= 1 byte) + u32 type + >= 1 byte of value.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
// name (u64 length + >= 1 byte) + u32 n_dims + one u64 dim + u32 type + u64 offset.
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;

// GGML type ids by name, so an unsupported tensor type is reported by name as well as by id.
std::string ggml_type_label(uint32_t id) {
  static constexpr std::pair<uint32_t, const char*> kNames[] = {
      {0, "F32"},      {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {6, "Q5_0"},
      {7, "Q5_1"},     {8, "Q8_0"},    {9, "Q8_1"},    {10, "Q2_K"},   {11, "Q3_K"},
      {12, "Q4_K"},    {13, "Q5_K"},   {14, "Q6_K"},   {15, "Q8_K"},   {16, "IQ2_XXS"},
      {17, "IQ2_XS"},  {18, "IQ3_XXS"}, {19, "IQ1_S"}, {20, "IQ4_NL"}, {21, "IQ3_S"},
      {22, "IQ2_S"},   {23, "IQ4_XS"}, {24, "I8"},     {25, "I16"},    {26, "I32"},
      {27, "I64"},     {28, "F64"},    {29, "IQ1_M"},  {30, "BF16"},   {34, "TQ1_0"},
      {35, "TQ2_0"},   {39, "MXFP4"},
  };
  for (const auto& [i, name] : kNames)
    if (i == id) return fmt::format("{} ({})", id, name);
  return fmt::format("{} (unknown)", id);
}

bool is_integer(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::U16: case GgufType::I16:
    case GgufType::U32: case GgufType::I32: case GgufType::U64: case GgufType::I64:
      return true;
    default:
      return false;
  }
}

// Bytes one value of type t occupies on disk; for STRING the minimum (its length field).
uint64_t min_disk_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: case GgufType::STRING: return 8;
    case GgufType::ARRAY: return 4 + 8;
  }
  return 1;
}

bool valid_type(uint32_t id) { return id <= static_cast<uint32_t>(GgufType::F64); }

}  // namespace

std::string gguf_type_name(GgufType t) {
  static constexpr const char* kNames[] = {"U8",  "I8",   "U16",    "I16",   "U32", "I32", "F32",
                                           "BOOL", "STRING", "ARRAY", "U64", "I64", "F64"};
  const auto id = static_cast<uint32_t>(t);
  return valid_type(id) ? kNames[id] : fmt::format("type#{}", id);
}

// One parse of one file. `where_` names the record being read, so that any failure below (including
// a truncation detected by the cursor) is reported with its context by parse_all().
class GgufParser {
 public:
  explicit GgufParser(GgufFile& out) : f_(out), c_(out.file_.data(), out.file_.size()) {}

  void parse_all() {
    try {
      parse_header();
      parse_metadata();
      parse_alignment();
      parse_tensor_infos();
      place_tensors();
    } catch (const Error& e) {
      fail(fmt::format("{}: {}{}", f_.path(), where_.empty() ? "" : where_ + ": ", e.what()));
    }
  }

 private:
  void parse_header() {
    where_ = "header";
    SSD_CHECK(c_.size() > 0, "file is empty");
    SSD_CHECK(c_.size() >= 4, "file is {} bytes, too small to be GGUF", c_.size());
    const std::string_view magic = c_.bytes(4, "magic");
    SSD_CHECK(magic == "GGUF", "not a GGUF file: magic is '{}', expected 'GGUF'", printable(magic));
    const uint32_t v = c_.u32("version");
    const uint32_t swapped = __builtin_bswap32(v);
    SSD_CHECK(!(v != swapped && swapped >= 1 && swapped <= 3),
              "version field reads {:#x}, which is version {} byte-swapped: this is a big-endian "
              "GGUF file and only little-endian files are supported", v, swapped);
    SSD_CHECK(v != 1, "GGUF version 1 is not supported (32-bit counts); re-convert the model to "
              "version 2 or 3");
    SSD_CHECK(v == 2 || v == 3, "unsupported GGUF version {} (supported: 2, 3)", v);
    f_.version_ = v;

    tensor_count_ = c_.u64("tensor_count");
    kv_count_ = c_.u64("kv_count");
    // Fail fast on counts the file cannot possibly hold, before any allocation or loop.
    SSD_CHECK(kv_count_ <= c_.remaining() / kMinKvBytes,
              "kv_count {} cannot fit in the {} bytes left in the file", kv_count_, c_.remaining());
    SSD_CHECK(tensor_count_ <= c_.remaining() / kMinTensorInfoBytes,
              "tensor_count {} cannot fit in the {} bytes left in the file", tensor_count_,
              c_.remaining());
    uint64_t need = 0;
    SSD_CHECK(mul_ok(kv_count_, kMinKvBytes, &need) &&
                  add_ok(need, tensor_count_ * kMinTensorInfoBytes, &need) && need <= c_.remaining(),
              "kv_count {} and tensor_count {} cannot both fit in the {} bytes left in the file",
              kv_count_, tensor_count_, c_.remaining());
  }

  void parse_metadata() {
    for (uint64_t i = 0; i < kv_count_; ++i) {
      where_ = fmt::format("metadata entry #{}", i);
      const std::string_view key = read_string("key");
      SSD_CHECK(!key.empty(), "empty key");
      where_ = fmt::format("metadata key '{}'", printable(key));
      SSD_CHECK(f_.kv_.find(key) == f_.kv_.end(), "duplicate key");
      const uint32_t type = c_.u32("value type");
      SSD_CHECK(valid_type(type), "unknown value type {}", type);
      f_.kv_.emplace(std::string(key), read_value(static_cast<GgufType>(type)));
    }
  }

  void parse_alignment() {
    where_ = "metadata key 'general.alignment'";
    auto it = f_.kv_.find("general.alignment");
    if (it == f_.kv_.end()) return;
    const GgufValue& v = it->second;
    SSD_CHECK(is_integer(v.type), "type is {}, expected an unsigned integer (U32)",
              gguf_type_name(v.type));
    const uint64_t a = std::holds_alternative<uint64_t>(v.v)
                           ? std::get<uint64_t>(v.v)
                           : static_cast<uint64_t>(std::get<int64_t>(v.v));
    SSD_CHECK(std::holds_alternative<uint64_t>(v.v) || std::get<int64_t>(v.v) > 0,
              "alignment {} is not positive", std::get<int64_t>(v.v));
    SSD_CHECK(a != 0 && (a & (a - 1)) == 0, "alignment {} is not a power of two", a);
    f_.alignment_ = a;
  }

  void parse_tensor_infos() {
    where_ = "tensor table";
    // Bounded in parse_header(); re-checked against what the metadata left.
    SSD_CHECK(tensor_count_ <= c_.remaining() / kMinTensorInfoBytes,
              "tensor_count {} cannot fit in the {} bytes left after the metadata", tensor_count_,
              c_.remaining());
    f_.tensors_.reserve(tensor_count_);
    offsets_.reserve(tensor_count_);
    for (uint64_t i = 0; i < tensor_count_; ++i) {
      where_ = fmt::format("tensor #{}", i);
      const std::string_view name = read_string("tensor name");
      SSD_CHECK(!name.empty(), "empty tensor name");
      where_ = fmt::format("tensor '{}'", printable(name));
      SSD_CHECK(f_.tensor_index_.find(name) == f_.tensor_index_.end(), "duplicate tensor name");

      TensorRef t;
      t.name = std::string(name);
      t.file = f_.path();
      const uint32_t n_dims = c_.u32("n_dims");
      SSD_CHECK(n_dims >= 1 && n_dims <= kMaxDims, "n_dims {} is outside 1..{}", n_dims, kMaxDims);
      uint64_t elems = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        const uint64_t n = c_.u64("dimension");
        SSD_CHECK(n > 0, "dimension {} is 0", d);
        t.ne.push_back(n);
        SSD_CHECK(mul_ok(elems, n, &elems), "shape {} has more than 2^64 elements",
                  fmt::join(t.ne, "x"));
      }
      const uint32_t type_id = c_.u32("type");
      const auto traits = dtype_traits_from_ggml_id(type_id);
      SSD_CHECK(traits.has_value(), "unsupported tensor type id {}", ggml_type_label(type_id));
      t.type = traits->type;
      SSD_CHECK(t.ne[0] % traits->block_elems == 0,
                "innermost dimension {} is not a multiple of the {} block size {}", t.ne[0],
                traits->name, traits->block_elems);
      const uint64_t rows = elems / t.ne[0];
      uint64_t row_bytes = 0;
      SSD_CHECK(mul_ok(t.ne[0] / traits->block_elems, traits->block_bytes, &row_bytes) &&
                    mul_ok(row_bytes, rows, &t.nbytes),
                "size of shape {} in {} overflows 64 bits", fmt::join(t.ne, "x"), traits->name);
      const uint64_t offset = c_.u64("offset");
      SSD_CHECK(offset % f_.alignment_ == 0, "offset {} is not a multiple of general.alignment {}",
                offset, f_.alignment_);
      f_.tensor_index_.emplace(t.name, f_.tensors_.size());
      f_.tensors_.push_back(std::move(t));
      offsets_.push_back(offset);
    }
  }

  // Resolves data pointers once the data section's start is known.
  void place_tensors() {
    where_ = "data section";
    const uint64_t a = f_.alignment_;
    uint64_t start = 0;
    SSD_CHECK(add_ok(c_.pos(), a - 1, &start), "alignment {} overflows the data offset", a);
    start &= ~(a - 1);
    f_.data_offset_ = start;
    if (f_.tensors_.empty()) return;
    SSD_CHECK(start <= c_.size(),
              "data section would start at byte {} (tensor table end {} padded to alignment {}), "
              "past the end of the file ({} bytes)", start, c_.pos(), a, c_.size());
    for (size_t i = 0; i < f_.tensors_.size(); ++i) {
      TensorRef& t = f_.tensors_[i];
      where_ = fmt::format("tensor '{}'", printable(t.name));
      uint64_t end = 0;
      SSD_CHECK(add_ok(start, offsets_[i], &end) && add_ok(end, t.nbytes, &end) && end <= c_.size(),
                "data offset {} + size {} exceeds file size {} (data section starts at byte {})",
                offsets_[i], t.nbytes, c_.size(), start);
      t.data = f_.file_.data() + start + offsets_[i];
    }
  }

  std::string_view read_string(std::string_view field) {
    const uint64_t len = c_.u64(field);
    SSD_CHECK(len <= c_.remaining(), "{} length {} exceeds the {} bytes left in the file", field,
              len, c_.remaining());
    return c_.bytes(len, field);
  }

  GgufValue read_value(GgufType t) {
    GgufValue out;
    out.type = t;
    switch (t) {
      case GgufType::U8: out.v = uint64_t{c_.u8("U8 value")}; break;
      case GgufType::I8: out.v = int64_t{static_cast<int8_t>(c_.u8("I8 value"))}; break;
      case GgufType::U16: out.v = uint64_t{c_.u16("U16 value")}; break;
      case GgufType::I16: out.v = int64_t{static_cast<int16_t>(c_.u16("I16 value"))}; break;
      case GgufType::U32: out.v = uint64_t{c_.u32("U32 value")}; break;
      case GgufType::I32: out.v = int64_t{static_cast<int32_t>(c_.u32("I32 value"))}; break;
      case GgufType::U64: out.v = c_.u64("U64 value"); break;
      case GgufType::I64: out.v = static_cast<int64_t>(c_.u64("I64 value")); break;
      case GgufType::F32: out.v = double{read_f32()}; break;
      case GgufType::F64: out.v = read_f64(); break;
      case GgufType::BOOL: out.v = read_bool(); break;
      case GgufType::STRING: out.v = read_string("string"); break;
      case GgufType::ARRAY: read_array(out); break;
    }
    return out;
  }

  void read_array(GgufValue& out) {
    const uint32_t et = c_.u32("array element type");
    SSD_CHECK(et != static_cast<uint32_t>(GgufType::ARRAY), "nested arrays are not supported");
    SSD_CHECK(valid_type(et), "unknown array element type {}", et);
    const auto elem = static_cast<GgufType>(et);
    out.elem_type = elem;
    const uint64_t n = c_.u64("array length");
    SSD_CHECK(n <= c_.remaining() / min_disk_size(elem),
              "array length {} of {} cannot fit in the {} bytes left in the file", n,
              gguf_type_name(elem), c_.remaining());
    if (elem == GgufType::STRING) {
      std::vector<std::string_view> v;
      v.reserve(n);
      for (uint64_t i = 0; i < n; ++i) v.push_back(read_string("array string"));
      out.v = std::move(v);
    } else if (elem == GgufType::F32 || elem == GgufType::F64) {
      std::vector<double> v;
      v.reserve(n);
      for (uint64_t i = 0; i < n; ++i) v.push_back(elem == GgufType::F32 ? read_f32() : read_f64());
      out.v = std::move(v);
    } else {  // integers and bools, widened to int64
      std::vector<int64_t> v;
      v.reserve(n);
      for (uint64_t i = 0; i < n; ++i) {
        const GgufValue e = read_value(elem);
        if (const auto* u = std::get_if<uint64_t>(&e.v)) {
          SSD_CHECK(*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                    "U64 element {} = {} does not fit in int64", i, *u);
          v.push_back(static_cast<int64_t>(*u));
        } else if (const auto* b = std::get_if<bool>(&e.v)) {
          v.push_back(*b ? 1 : 0);
        } else {
          v.push_back(std::get<int64_t>(e.v));
        }
      }
      out.v = std::move(v);
    }
  }

  float read_f32() {
    const uint32_t bits = c_.u32("F32 value");
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  double read_f64() {
    const uint64_t bits = c_.u64("F64 value");
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }
  bool read_bool() {
    const uint8_t b = c_.u8("BOOL value");
    SSD_CHECK(b <= 1, "BOOL value byte is {}, expected 0 or 1", b);
    return b == 1;
  }

  GgufFile& f_;
  io::ByteCursor c_;
  std::string where_;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
  std::vector<uint64_t> offsets_;  // [tensor_count] data offsets relative to the data section
};

GgufFile GgufFile::open(const std::string& path) { return parse(MappedFile::open(path)); }

GgufFile GgufFile::parse(MappedFile file) {
  GgufFile f;
  f.file_ = std::move(file);
  f.alignment_ = kDefaultAlignment;
  GgufParser(f).parse_all();
  return f;
}

const TensorRef* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace ssd
