// Safetensors writing (see safetensors_writer.h). Shards are independent safetensors files (each
// with its own header and offsets from zero) plus an index whose weight_map names each tensor's
// shard, which is all a reader relies on; "metadata.total_size" is written too.
#include "runtime/io/safetensors_writer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "kernels/cpu/half.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

// values encoded element by element as F32, F16 or BF16 (little-endian).
std::vector<uint8_t> encode(DType type, std::span<const float> values) {
  if (type == DType::F32) {
    std::vector<uint8_t> out(values.size() * sizeof(float));
    if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
    return out;
  }
  std::vector<uint8_t> out(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = type == DType::F16 ? kernels::fp32_to_fp16(values[i])
                                          : kernels::fp32_to_bf16(values[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

}  // namespace

SafetensorsWriter& SafetensorsWriter::add_tensor(std::string name, std::vector<uint64_t> shape,
                                                 std::span<const float> values, DType type) {
  SSD_CHECK(type == DType::F32 || type == DType::F16 || type == DType::BF16,
            "safetensors writer: tensor '{}': type {} is not F32, F16 or BF16", name,
            dtype_name(type));
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  SSD_CHECK(n == values.size(), "safetensors writer: tensor '{}': shape holds {} values, {} given",
            name, n, values.size());
  return add_raw_tensor(std::move(name), std::string(dtype_name(type)), std::move(shape),
                        encode(type, values));
}

SafetensorsWriter& SafetensorsWriter::add_raw_tensor(std::string name, std::string dtype,
                                                     std::vector<uint64_t> shape,
                                                     std::vector<uint8_t> bytes) {
  tensors_.push_back({std::move(name), std::move(dtype), std::move(shape), std::move(bytes)});
  return *this;
}

SafetensorsWriter& SafetensorsWriter::add_metadata(std::string key, std::string value) {
  metadata_.emplace_back(std::move(key), std::move(value));
  return *this;
}

nlohmann::ordered_json SafetensorsWriter::header() const {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    auto& m = h["__metadata__"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata_) m[k] = v;
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    h[t.name] = {{"dtype", t.dtype},
                 {"shape", t.shape},
                 {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  return h;
}

std::vector<uint8_t> SafetensorsWriter::data() const {
  std::vector<uint8_t> out;
  for (const auto& t : tensors_) out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  return out;
}

std::vector<uint8_t> SafetensorsWriter::assemble(std::string header_json,
                                                 std::span<const uint8_t> data) {
  while (header_json.size() % 8 != 0) header_json.push_back(' ');
  std::vector<uint8_t> out;
  out.reserve(8 + header_json.size() + data.size());
  for (unsigned i = 0; i < 8; ++i)
    out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(header_json.size()) >> (8 * i)));
  out.insert(out.end(), header_json.begin(), header_json.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<uint8_t> SafetensorsWriter::bytes() const { return assemble(header().dump(), data()); }

std::string SafetensorsWriter::write(const std::string& path) const {
  write_file_atomic(path, bytes());
  return path;
}

std::string SafetensorsWriter::write_sharded(const std::string& dir, int n_shards) const {
  const size_t n = tensors_.size();
  SSD_CHECK(n_shards >= 1 && static_cast<size_t>(n_shards) <= n,
            "safetensors writer: cannot split {} tensors into {} shards", n, n_shards);
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  uint64_t total = 0;
  for (int s = 0; s < n_shards; ++s) {
    const std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, n_shards);
    SafetensorsWriter shard;
    shard.metadata_ = metadata_;
    for (size_t i = n * s / n_shards; i < n * (s + 1) / n_shards; ++i) {
      shard.tensors_.push_back(tensors_[i]);
      weight_map[tensors_[i].name] = file;
      total += tensors_[i].bytes.size();
    }
    shard.write(dir + "/" + file);
  }
  const nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}},
                                        {"weight_map", weight_map}};
  const std::string text = index.dump(2);
  const std::string path = dir + "/model.safetensors.index.json";
  write_file_atomic(path, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  return path;
}

void write_file_atomic(const std::string& path, std::span<const uint8_t> bytes) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  SSD_CHECK(f, "cannot write {}: {}", tmp, std::strerror(errno));
  const size_t wrote = bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), f);
  const bool ok = wrote == bytes.size() && std::fflush(f) == 0;
  std::fclose(f);
  if (!ok) {
    std::remove(tmp.c_str());
    fail(fmt::format("cannot write {}: disk full or I/O error", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  SSD_CHECK(!ec, "cannot rename {} to {}: {}", tmp, path, ec.message());
}

}  // namespace ssd
