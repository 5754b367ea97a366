// GgufWriter: builds GGUF files for tests (tiny random models, round trips, bad-file cases).
//
//   ssd::test::TempDir tmp;
//   ssd::test::GgufWriter w;                                   // GGUF v3, alignment 32
//   w.add_string("general.architecture", "llama")
//       .add_u32("llama.block_count", 2)
//       .add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
//       .add_string_array("tokenizer.ggml.tokens", {"a", "b", "c"})
//       .add_float_array("tokenizer.ggml.scores", {0.0, -1.0, -2.0});           // F32 elements
//   auto emb = ssd::test::random_floats(64 * 3, /*seed=*/1, 0.1f);
//   w.add_tensor("token_embd.weight", {64, 3}, emb, ssd::DType::Q8_0);  // ne innermost first
//   w.add_raw_tensor("x", ssd::DType::F16, {4}, bytes);                 // already-encoded bytes
//   std::string path = w.write(tmp.file("model.gguf"));                // or w.bytes()
//
// Conventions: `ne` lists dimensions innermost first, like TensorRef (a matrix of `out` rows by
// `in` columns is {in, out}); float values are row-major and encoded with kernels::quantize_row.
// Metadata and tensors are written in the order they were added. set_version(2) writes a v2 file
// (same layout as v3 for little-endian files); set_alignment(a) writes general.alignment (U32)
// and aligns the data section and every tensor to a.
//
// Bad-file tests: the writer validates little on purpose (duplicate keys or names are written as
// given). add_raw_kv() writes any type id with any value bytes, and bytes(&layout) reports the
// byte position of every field so a test can patch one value (patch_u32/patch_u64) and check
// that the reader names it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/core/dtype.h"
#include "runtime/io/gguf_file.h"
#include "tests/support/tensor_data.h"
#include "tests/support/temp_dir.h"

namespace ssd::test {

// Byte positions of the fields of a written GGUF file (all absolute file offsets).
struct GgufLayout {
  uint64_t version_at = 0, tensor_count_at = 0, kv_count_at = 0;
  struct Kv {
    std::string key;
    uint64_t key_len_at = 0;  // u64 key length (the key bytes follow)
    uint64_t type_at = 0;     // u32 value type
    uint64_t value_at = 0;    // value bytes (for ARRAY: u32 element type, u64 count, elements)
  };
  struct Tensor {
    std::string name;
    uint64_t name_len_at = 0, n_dims_at = 0, dims_at = 0, type_at = 0, offset_at = 0;
    uint64_t data_at = 0;  // absolute position of the tensor's bytes
  };
  std::vector<Kv> kvs;
  std::vector<Tensor> tensors;
  uint64_t data_start = 0;  // start of the data section
};

// Little-endian overwrite of a field inside `bytes` (at must be in range).
void patch_u32(std::vector<uint8_t>& bytes, uint64_t at, uint32_t v);
void patch_u64(std::vector<uint8_t>& bytes, uint64_t at, uint64_t v);

class GgufWriter {
 public:
  GgufWriter& set_version(uint32_t v);    // default 3
  GgufWriter& set_alignment(uint32_t a);  // adds general.alignment; default (absent) is 32

  GgufWriter& add_u8(std::string key, uint8_t v);
  GgufWriter& add_i8(std::string key, int8_t v);
  GgufWriter& add_u16(std::string key, uint16_t v);
  GgufWriter& add_i16(std::string key, int16_t v);
  GgufWriter& add_u32(std::string key, uint32_t v);
  GgufWriter& add_i32(std::string key, int32_t v);
  GgufWriter& add_u64(std::string key, uint64_t v);
  GgufWriter& add_i64(std::string key, int64_t v);
  GgufWriter& add_f32(std::string key, float v);
  GgufWriter& add_f64(std::string key, double v);
  GgufWriter& add_bool(std::string key, bool v);
  GgufWriter& add_string(std::string key, std::string_view v);
  // Arrays. elem must be an integer type or BOOL for add_int_array, F32 or F64 for add_float_array.
  GgufWriter& add_int_array(std::string key, const std::vector<int64_t>& v,
                            GgufType elem = GgufType::I32);
  GgufWriter& add_float_array(std::string key, const std::vector<double>& v,
                              GgufType elem = GgufType::F32);
  GgufWriter& add_string_array(std::string key, const std::vector<std::string>& v);
  // Any type id followed by `value` verbatim (for malformed files).
  GgufWriter& add_raw_kv(std::string key, uint32_t type_id, std::vector<uint8_t> value);

  // `values` (product(ne) floats, row-major) encoded as `type`; ne[0] a multiple of its block.
  GgufWriter& add_tensor(std::string name, std::vector<uint64_t> ne, std::span<const float> values,
                         DType type = DType::F32);
  // Already-encoded bytes; their size must match ne and type.
  GgufWriter& add_raw_tensor(std::string name, DType type, std::vector<uint64_t> ne,
                             std::vector<uint8_t> bytes);
  // Any type id, dims and bytes, unchecked (for malformed files).
  GgufWriter& add_unchecked_tensor(std::string name, uint32_t type_id, std::vector<uint64_t> ne,
                                   std::vector<uint8_t> bytes);

  std::vector<uint8_t> bytes(GgufLayout* layout = nullptr) const;
  // Writes bytes() to `path` and returns the path.
  std::string write(const std::string& path, GgufLayout* layout = nullptr) const;

 private:
  struct Kv {
    std::string key;
    uint32_t type;
    std::vector<uint8_t> value;  // encoded value
  };
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> ne;
    std::vector<uint8_t> bytes;
  };
  GgufWriter& add_kv(std::string key, GgufType t, std::vector<uint8_t> value);

  uint32_t version_ = 3;
  uint64_t alignment_ = 32;
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
};

// Writes `bytes` to `path` (binary, truncating); throws ssd::Error on failure.
void write_file(const std::string& path, std::span<const uint8_t> bytes);

}  // namespace ssd::test
