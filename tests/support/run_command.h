// Runs a shell command for CLI tests and captures its exit code, stdout and stderr separately
// (through files in a temporary directory, so large outputs cannot dead-lock a pipe).
#pragma once

#include <string>

namespace ssd::test {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

CommandResult run_command(const std::string& command_line);

// Path of a binary built by this project (env SSD_BIN_DIR, set by ctest).
std::string project_binary(const std::string& name);

// Single-quotes s for /bin/sh.
std::string shell_quote(const std::string& s);

}  // namespace ssd::test
