// Safetensors writing (see safetensors_out.h).
#include "runtime/train/safetensors_out.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "kernels/cpu/half.h"
#include "runtime/core/error.h"

namespace ssd::train {

void SafetensorsOut::add(const std::string& name, std::vector<uint64_t> shape, const float* values,
                         DType type) {
  SSD_CHECK(type == DType::F32 || type == DType::BF16,
            "safetensors writer: tensor '{}': only F32 and BF16 are written", name);
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  Entry e{name, std::move(shape), type, {}};
  if (type == DType::F32) {
    e.bytes.resize(n * 4);
    std::memcpy(e.bytes.data(), values, n * 4);
  } else {
    e.bytes.resize(n * 2);
    for (uint64_t i = 0; i < n; ++i) {
      const uint16_t h = kernels::fp32_to_bf16(values[i]);
      std::memcpy(e.bytes.data() + 2 * i, &h, 2);
    }
  }
  entries_.push_back(std::move(e));
}

void SafetensorsOut::write(const std::string& path) const {
  nlohmann::ordered_json header;
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  for (const auto& [k, v] : meta_) meta[k] = v;
  header["__metadata__"] = meta;
  uint64_t off = 0;
  for (const Entry& e : entries_) {
    header[e.name] = {{"dtype", e.type == DType::F32 ? "F32" : "BF16"},
                      {"shape", e.shape},
                      {"data_offsets", {off, off + e.bytes.size()}}};
    off += e.bytes.size();
  }
  std::string text = header.dump();
  while (text.size() % 8) text.push_back(' ');
  std::vector<uint8_t> out(8 + text.size() + off);
  const uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(len >> (8 * i));
  std::memcpy(out.data() + 8, text.data(), text.size());
  uint8_t* p = out.data() + 8 + text.size();
  for (const Entry& e : entries_) {
    std::memcpy(p, e.bytes.data(), e.bytes.size());
    p += e.bytes.size();
  }
  write_file_atomic(path, out);
}

void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  SSD_CHECK(f, "cannot write {}: {}", tmp, std::strerror(errno));
  const size_t wrote = std::fwrite(bytes.data(), 1, bytes.size(), f);
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

}  // namespace ssd::train
