// A read-only memory mapping of a whole file. Model weights are used in place from the mapping
// (never copied wholesale); the mapping lives as long as the MappedFile. Move-only: copying would
// either duplicate a large mapping or alias it, and both should be visible decisions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ssd {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws ssd::Error naming the path when it cannot be opened, is a directory or cannot be mapped.
  static MappedFile open(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
};

}  // namespace ssd
