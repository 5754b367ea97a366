// What this binary is, for every figure a run reports: the commit it was built from, the build
// type and the CPU kernels it dispatches to.
#pragma once

#include <string>

namespace ssd {

const char* build_commit();  // short git hash at configure time, "unknown" outside a checkout
std::string build_description();  // "ssd <commit> (Release, cpu kernels: avx512)"

}  // namespace ssd
