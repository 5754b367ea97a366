#include "tests/support/run_command.h"

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "tests/support/temp_dir.h"

namespace ssd::test {
namespace {
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
}  // namespace

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

CommandResult run_command(const std::string& command_line) {
  TempDir tmp;
  const std::string out = tmp.file("stdout"), err = tmp.file("stderr");
  const std::string full = command_line + " > " + shell_quote(out) + " 2> " + shell_quote(err) + " < /dev/null";
  const int status = std::system(full.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::string project_binary(const std::string& name) {
  const char* dir = std::getenv("SSD_BIN_DIR");
  return std::string(dir ? dir : "build/bin") + "/" + name;
}

}  // namespace ssd::test
