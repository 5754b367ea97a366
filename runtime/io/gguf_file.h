// GGUF (v2 and v3) reader. The header, metadata and tensor table are parsed once with every count,
// string length, dimension, offset and size checked against the file size and against overflow
// before use; a malformed file throws ssd::Error naming the file, the field and the offending
// value. Tensor data is not touched: TensorRef points into the mapping.
//
// Format facts (from the GGUF spec): magic "GGUF", u32 version, u64 tensor_count, u64 kv_count
// (v1 used u32 counts and is refused), then kv pairs, then tensor infos (name, u32 n_dims,
// u64 dims[n_dims], u32 type, u64 offset relative to the data section), then padding to
// `general.alignment` (default 32), then the data section.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/io/mapped_file.h"
#include "runtime/io/tensor_ref.h"

namespace ssd {

// GGUF metadata value types (spec numbering).
enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
// "U8", "STRING", ...; "type#<id>" for an id outside the spec.
std::string gguf_type_name(GgufType t);

// A metadata value. Scalars: signed integers as int64_t, unsigned as uint64_t, F32/F64 as double.
// Arrays of numbers are widened to int64/double vectors (BOOL arrays to 0/1 int64; a U64 element
// above INT64_MAX is rejected at parse time); arrays of strings are string_views into the mapping
// (valid while the GgufFile lives). Nested arrays are rejected at parse time.
struct GgufValue {
  GgufType type = GgufType::U8;
  GgufType elem_type = GgufType::U8;  // for ARRAY
  std::variant<int64_t, uint64_t, double, bool, std::string_view, std::vector<int64_t>,
               std::vector<double>, std::vector<std::string_view>>
      v;
};

class GgufFile {
 public:
  // Maps and parses `path`; throws ssd::Error on any malformed field.
  static GgufFile open(const std::string& path);
  // Parses an already opened (or in-memory, see MappedFile::from_bytes) file; same checks.
  static GgufFile parse(MappedFile file);
  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return file_.path(); }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return file_.size(); }
  uint64_t alignment() const { return alignment_; }      // general.alignment or 32
  uint64_t data_offset() const { return data_offset_; }  // byte where the data section starts
  const std::vector<TensorRef>& tensors() const { return tensors_; }
  const TensorRef* find_tensor(std::string_view name) const;
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return kv_; }
  bool has(std::string_view key) const { return kv_.find(key) != kv_.end(); }

  // Typed getters. nullopt when the key is absent; ssd::Error (naming the key and the actual type)
  // when present with an incompatible type. Integer getters accept any integer type in range;
  // get_float accepts any numeric type.
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string_view> get_string(std::string_view key) const;
  std::optional<std::vector<std::string_view>> get_string_array(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;
  std::optional<std::vector<double>> get_float_array(std::string_view key) const;

 private:
  GgufFile() = default;
  MappedFile file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue, std::less<>> kv_;
  std::vector<TensorRef> tensors_;                            // in file order
  std::map<std::string, size_t, std::less<>> tensor_index_;  // name -> index in tensors_

  friend class GgufParser;
};

}  // namespace ssd
