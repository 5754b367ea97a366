// mkdtemp gives a unique name even when several test binaries run in parallel under ctest -j.
#include "tests/support/temp_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "runtime/core/error.h"

namespace ssd::test {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/ssd-test-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  SSD_CHECK(::mkdtemp(buf.data()) != nullptr, "cannot create a temporary directory {}: {}", tmpl,
            std::strerror(errno));
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;  // best effort: a destructor must not throw
  std::filesystem::remove_all(path_, ec);
}

}  // namespace ssd::test
