// Typed access to GGUF metadata. Converters are not consistent about integer widths (a count may
// be U32 in one file and I32 or U64 in another), so integer getters accept any integer type whose
// value fits, and float getters any number; anything else is an error naming the key and the
// type actually found, so a wrong model file fails with a message instead of a default value.
#include <limits>

#include "runtime/core/error.h"
#include "runtime/io/gguf_file.h"

namespace ssd {
namespace {

std::string type_label(const GgufValue& v) {
  if (v.type == GgufType::ARRAY) return fmt::format("ARRAY of {}", gguf_type_name(v.elem_type));
  return gguf_type_name(v.type);
}

[[noreturn]] void wrong_type(const std::string& path, std::string_view key, const GgufValue& v,
                             std::string_view expected) {
  fail(fmt::format("{}: metadata key '{}' has type {}, expected {}", path, key, type_label(v),
                   expected));
}

bool is_int_array(const GgufValue& v) {
  return v.type == GgufType::ARRAY && std::holds_alternative<std::vector<int64_t>>(v.v);
}

}  // namespace

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) return std::nullopt;
  const GgufValue& v = it->second;
  if (const auto* i = std::get_if<int64_t>(&v.v)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&v.v)) {
    SSD_CHECK(*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
              "{}: metadata key '{}': value {} does not fit in int64", path(), key, *u);
    return static_cast<int64_t>(*u);
  }
  wrong_type(path(), key, v, "an integer");
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) return std::nullopt;
  const GgufValue& v = it->second;
  if (const auto* d = std::get_if<double>(&v.v)) return *d;
  if (const auto* i = std::get_if<int64_t>(&v.v)) return static_cast<double>(*i);
  if (const auto* u = std::get_if<uint64_t>(&v.v)) return static_cast<double>(*u);
  wrong_type(path(), key, v, "a number");
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) return std::nullopt;
  if (const auto* b = std::get_if<bool>(&it->second.v)) return *b;
  wrong_type(path(), key, it->second, "BOOL");
}

std::optional<std::string_view> GgufFile::get_string(std::string_view key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) return std::nullopt;
  if (const auto* s = std::get_if<std::string_view>(&it->second.v)) return *s;
  wrong_type(path(), key, it->second, "STRING");
}

std::optional<std::vector<std::string_view>> GgufFile::get_string_array(
    std::string_view key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) return std::nullopt;
  if (const auto* a = std::get_if<std::vector<std::string_view>>(&it->second.v)) return *a;
  wrong_type(path(), key, it->second, "ARRAY of STRING");
}

// Arrays of any integer type, and of BOOL (as 0/1).
std::optional<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) return std::nullopt;
  if (is_int_array(it->second)) return std::get<std::vector<int64_t>>(it->second.v);
  wrong_type(path(), key, it->second, "ARRAY of integers");
}

// Arrays of F32/F64, or of integers (converted).
std::optional<std::vector<double>> GgufFile::get_float_array(std::string_view key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) return std::nullopt;
  const GgufValue& v = it->second;
  if (const auto* a = std::get_if<std::vector<double>>(&v.v)) return *a;
  if (is_int_array(v)) {
    const auto& ints = std::get<std::vector<int64_t>>(v.v);
    return std::vector<double>(ints.begin(), ints.end());
  }
  wrong_type(path(), key, v, "ARRAY of numbers");
}

}  // namespace ssd
