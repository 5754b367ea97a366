// POSIX implementation of MappedFile. The whole file is mapped read-only and privately: weights
// are read in place, and a model file being rewritten underneath us is the user's problem, not a
// memory-safety one for anything but the data pages. Open errors are turned into messages that
// say what is wrong with the path (missing, a directory, not readable) rather than a bare errno.
#include "runtime/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "runtime/core/error.h"

namespace ssd {
namespace {

std::string describe_open_error(const std::string& path, int err) {
  switch (err) {
    case ENOENT: return fmt::format("{}: no such file", path);
    case ENOTDIR: return fmt::format("{}: no such file (a parent is not a directory)", path);
    case EACCES: return fmt::format("{}: permission denied", path);
    case EISDIR: return fmt::format("{}: is a directory, expected a file", path);
    default: return fmt::format("{}: cannot open: {}", path, std::strerror(err));
  }
}

// Closes the descriptor on every path out of open(); the mapping outlives it.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MappedFile MappedFile::open(const std::string& path) {
  SSD_CHECK(!path.empty(), "cannot open a file with an empty path");
  FdGuard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) fail(describe_open_error(path, errno));

  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) fail(fmt::format("{}: cannot stat: {}", path, std::strerror(errno)));
  SSD_CHECK(!S_ISDIR(st.st_mode), "{}: is a directory, expected a file", path);
  SSD_CHECK(S_ISREG(st.st_mode), "{}: not a regular file", path);

  MappedFile f;
  f.path_ = path;
  f.size_ = static_cast<uint64_t>(st.st_size);
  if (f.size_ == 0) return f;  // mmap of length 0 is invalid; parsers report the empty file
  void* p = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (p == MAP_FAILED)
    fail(fmt::format("{}: cannot map {} bytes: {}", path, f.size_, std::strerror(errno)));
  f.data_ = static_cast<const uint8_t*>(p);
  f.mapped_ = true;
  return f;
}

MappedFile MappedFile::from_bytes(std::string name, std::vector<uint8_t> bytes) {
  MappedFile f;
  f.path_ = std::move(name);
  f.owned_ = std::move(bytes);
  f.size_ = f.owned_.size();
  f.data_ = f.owned_.empty() ? nullptr : f.owned_.data();
  return f;
}

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      path_(std::move(o.path_)),
      mapped_(std::exchange(o.mapped_, false)),
      owned_(std::move(o.owned_)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    path_ = std::move(o.path_);
    mapped_ = std::exchange(o.mapped_, false);
    owned_ = std::move(o.owned_);
  }
  return *this;
}

}  // namespace ssd
