#include "launch/cli/build_info.h"

#include <fmt/format.h>

#include "kernels/cpu/rowops.h"
#include "ssd_git_commit.h"  // generated at every build (cmake/git_commit.cmake)
#ifndef SSD_BUILD_TYPE
#define SSD_BUILD_TYPE "unknown"
#endif

namespace ssd {

const char* build_commit() { return SSD_GIT_COMMIT; }

std::string build_description() {
  return fmt::format("ssd {} ({}, cpu kernels: {})", build_commit(), SSD_BUILD_TYPE,
                     kernels::isa_name(kernels::active_isa()));
}

}  // namespace ssd
