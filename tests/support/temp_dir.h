// A fresh directory under $TMPDIR (or /tmp) for one test's files, removed with everything in it
// when the object goes out of scope, so tests that write model files never collide or leak.
//
//   ssd::test::TempDir tmp;
//   const std::string path = tmp.file("model.gguf");   // <tmp>/model.gguf (not created)
#pragma once

#include <string>

namespace ssd::test {

class TempDir {
 public:
  TempDir();  // throws ssd::Error if the directory cannot be created
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace ssd::test
