// The writer lays a file out in one pass: header, metadata, tensor table, zero padding to the
// alignment, then each tensor's bytes at the next aligned offset. Values are encoded byte by byte
// in little-endian order so the output is identical on any host.
#include "tests/support/gguf_writer.h"

#include <cstdio>
#include <cstring>

#include "runtime/core/error.h"

namespace ssd::test {
namespace {

void put_le(std::vector<uint8_t>& out, uint64_t v, unsigned n) {
  for (unsigned i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_str(std::vector<uint8_t>& out, std::string_view s) {
  put_le(out, s.size(), 8);
  out.insert(out.end(), s.begin(), s.end());
}
template <class T>
std::vector<uint8_t> le_bytes(T v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  std::vector<uint8_t> out;
  put_le(out, bits, sizeof v);
  return out;
}
unsigned int_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: return 4;
    case GgufType::U64: case GgufType::I64: return 8;
    default:
      fail(fmt::format("GgufWriter: {} is not an integer array element type", gguf_type_name(t)));
  }
}
void pad_to(std::vector<uint8_t>& out, uint64_t a) {
  while (out.size() % a != 0) out.push_back(0);
}

}  // namespace

void patch_u32(std::vector<uint8_t>& bytes, uint64_t at, uint32_t v) {
  SSD_CHECK(at + 4 <= bytes.size(), "patch_u32: offset {} outside {} bytes", at, bytes.size());
  for (unsigned i = 0; i < 4; ++i) bytes[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void patch_u64(std::vector<uint8_t>& bytes, uint64_t at, uint64_t v) {
  SSD_CHECK(at + 8 <= bytes.size(), "patch_u64: offset {} outside {} bytes", at, bytes.size());
  for (unsigned i = 0; i < 8; ++i) bytes[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

void write_file(const std::string& path, std::span<const uint8_t> bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  SSD_CHECK(f != nullptr, "cannot create {}", path);
  const size_t n = bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), f);
  const bool ok = std::fclose(f) == 0 && n == bytes.size();
  SSD_CHECK(ok, "cannot write {} bytes to {}", bytes.size(), path);
}

GgufWriter& GgufWriter::set_version(uint32_t v) {
  version_ = v;
  return *this;
}

GgufWriter& GgufWriter::set_alignment(uint32_t a) {
  SSD_CHECK(a > 0 && (a & (a - 1)) == 0, "GgufWriter: alignment {} is not a power of two", a);
  alignment_ = a;
  return add_u32("general.alignment", a);
}

GgufWriter& GgufWriter::add_kv(std::string key, GgufType t, std::vector<uint8_t> value) {
  kvs_.push_back({std::move(key), static_cast<uint32_t>(t), std::move(value)});
  return *this;
}

GgufWriter& GgufWriter::add_u8(std::string k, uint8_t v) { return add_kv(std::move(k), GgufType::U8, le_bytes(v)); }
GgufWriter& GgufWriter::add_i8(std::string k, int8_t v) { return add_kv(std::move(k), GgufType::I8, le_bytes(v)); }
GgufWriter& GgufWriter::add_u16(std::string k, uint16_t v) { return add_kv(std::move(k), GgufType::U16, le_bytes(v)); }
GgufWriter& GgufWriter::add_i16(std::string k, int16_t v) { return add_kv(std::move(k), GgufType::I16, le_bytes(v)); }
GgufWriter& GgufWriter::add_u32(std::string k, uint32_t v) { return add_kv(std::move(k), GgufType::U32, le_bytes(v)); }
GgufWriter& GgufWriter::add_i32(std::string k, int32_t v) { return add_kv(std::move(k), GgufType::I32, le_bytes(v)); }
GgufWriter& GgufWriter::add_u64(std::string k, uint64_t v) { return add_kv(std::move(k), GgufType::U64, le_bytes(v)); }
GgufWriter& GgufWriter::add_i64(std::string k, int64_t v) { return add_kv(std::move(k), GgufType::I64, le_bytes(v)); }
GgufWriter& GgufWriter::add_f32(std::string k, float v) { return add_kv(std::move(k), GgufType::F32, le_bytes(v)); }
GgufWriter& GgufWriter::add_f64(std::string k, double v) { return add_kv(std::move(k), GgufType::F64, le_bytes(v)); }
GgufWriter& GgufWriter::add_bool(std::string k, bool v) {
  return add_kv(std::move(k), GgufType::BOOL, {static_cast<uint8_t>(v ? 1 : 0)});
}
GgufWriter& GgufWriter::add_string(std::string k, std::string_view v) {
  std::vector<uint8_t> b;
  put_str(b, v);
  return add_kv(std::move(k), GgufType::STRING, std::move(b));
}

GgufWriter& GgufWriter::add_int_array(std::string key, const std::vector<int64_t>& v,
                                      GgufType elem) {
  const unsigned n = int_size(elem);
  std::vector<uint8_t> b;
  put_le(b, static_cast<uint32_t>(elem), 4);
  put_le(b, v.size(), 8);
  for (int64_t x : v) put_le(b, static_cast<uint64_t>(x), n);  // two's complement, truncated
  return add_kv(std::move(key), GgufType::ARRAY, std::move(b));
}

GgufWriter& GgufWriter::add_float_array(std::string key, const std::vector<double>& v,
                                        GgufType elem) {
  SSD_CHECK(elem == GgufType::F32 || elem == GgufType::F64,
            "GgufWriter: {} is not a float array element type", gguf_type_name(elem));
  std::vector<uint8_t> b;
  put_le(b, static_cast<uint32_t>(elem), 4);
  put_le(b, v.size(), 8);
  for (double x : v) {
    const auto e = elem == GgufType::F32 ? le_bytes(static_cast<float>(x)) : le_bytes(x);
    b.insert(b.end(), e.begin(), e.end());
  }
  return add_kv(std::move(key), GgufType::ARRAY, std::move(b));
}

GgufWriter& GgufWriter::add_string_array(std::string key, const std::vector<std::string>& v) {
  std::vector<uint8_t> b;
  put_le(b, static_cast<uint32_t>(GgufType::STRING), 4);
  put_le(b, v.size(), 8);
  for (const auto& s : v) put_str(b, s);
  return add_kv(std::move(key), GgufType::ARRAY, std::move(b));
}

GgufWriter& GgufWriter::add_raw_kv(std::string key, uint32_t type_id, std::vector<uint8_t> value) {
  kvs_.push_back({std::move(key), type_id, std::move(value)});
  return *this;
}

GgufWriter& GgufWriter::add_tensor(std::string name, std::vector<uint64_t> ne,
                                   std::span<const float> values, DType type) {
  SSD_CHECK(!ne.empty(), "GgufWriter: tensor '{}' has no dimensions", name);
  uint64_t n = 1;
  for (auto d : ne) n *= d;
  SSD_CHECK(n == values.size(), "GgufWriter: tensor '{}': shape holds {} values, {} given", name, n,
            values.size());
  auto bytes = encode_tensor(type, values, ne[0]);
  return add_unchecked_tensor(std::move(name), static_cast<uint32_t>(type), std::move(ne),
                              std::move(bytes));
}

GgufWriter& GgufWriter::add_raw_tensor(std::string name, DType type, std::vector<uint64_t> ne,
                                       std::vector<uint8_t> bytes) {
  uint64_t n = 1;
  for (auto d : ne) n *= d;
  SSD_CHECK(n > 0, "GgufWriter: tensor '{}' has an empty shape", name);
  const bool whole_blocks = ne[0] % dtype_traits(type).block_elems == 0;
  SSD_CHECK(whole_blocks && dtype_row_bytes(type, ne[0]) * (n / ne[0]) == bytes.size(),
            "GgufWriter: tensor '{}': {} bytes do not match shape and type {}", name, bytes.size(),
            dtype_name(type));
  return add_unchecked_tensor(std::move(name), static_cast<uint32_t>(type), std::move(ne),
                              std::move(bytes));
}

GgufWriter& GgufWriter::add_unchecked_tensor(std::string name, uint32_t type_id,
                                             std::vector<uint64_t> ne, std::vector<uint8_t> bytes) {
  tensors_.push_back({std::move(name), type_id, std::move(ne), std::move(bytes)});
  return *this;
}

std::vector<uint8_t> GgufWriter::bytes(GgufLayout* layout) const {
  GgufLayout lay;
  std::vector<uint8_t> out = {'G', 'G', 'U', 'F'};
  lay.version_at = out.size();
  put_le(out, version_, 4);
  lay.tensor_count_at = out.size();
  put_le(out, tensors_.size(), 8);
  lay.kv_count_at = out.size();
  put_le(out, kvs_.size(), 8);

  for (const auto& kv : kvs_) {
    GgufLayout::Kv k{kv.key, out.size(), 0, 0};
    put_str(out, kv.key);
    k.type_at = out.size();
    put_le(out, kv.type, 4);
    k.value_at = out.size();
    out.insert(out.end(), kv.value.begin(), kv.value.end());
    lay.kvs.push_back(std::move(k));
  }

  uint64_t offset = 0;  // relative to the data section
  for (const auto& t : tensors_) {
    GgufLayout::Tensor lt;
    lt.name = t.name;
    lt.name_len_at = out.size();
    put_str(out, t.name);
    lt.n_dims_at = out.size();
    put_le(out, t.ne.size(), 4);
    lt.dims_at = out.size();
    for (auto d : t.ne) put_le(out, d, 8);
    lt.type_at = out.size();
    put_le(out, t.type, 4);
    lt.offset_at = out.size();
    put_le(out, offset, 8);
    lt.data_at = offset;  // made absolute below
    offset += (t.bytes.size() + alignment_ - 1) / alignment_ * alignment_;
    lay.tensors.push_back(std::move(lt));
  }

  pad_to(out, alignment_);
  lay.data_start = out.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    lay.tensors[i].data_at += lay.data_start;
    out.insert(out.end(), tensors_[i].bytes.begin(), tensors_[i].bytes.end());
    pad_to(out, alignment_);
  }
  if (layout) *layout = std::move(lay);
  return out;
}

std::string GgufWriter::write(const std::string& path, GgufLayout* layout) const {
  write_file(path, bytes(layout));
  return path;
}

}  // namespace ssd::test
