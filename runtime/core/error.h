// Error model of the runtime layer: every failure that a user can cause (a bad file, a bad flag,
// an impossible configuration) throws ssd::Error with a message that names what is wrong. The
// front end catches it, prints one line and exits non-zero. Internal invariants use SSD_ASSERT,
// which throws the same type but says it is a bug. Nothing in runtime/ calls exit() or abort().
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace ssd {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

[[noreturn]] inline void fail(const std::string& msg) { throw Error(msg); }

}  // namespace ssd

// SSD_CHECK(cond, "format {}", args...): user-facing check; throws ssd::Error(formatted message).
#define SSD_CHECK(cond, ...)                                  \
  do {                                                        \
    if (!(cond)) ::ssd::fail(::fmt::format(__VA_ARGS__));     \
  } while (0)

// SSD_ASSERT(cond): internal invariant; a failure is a bug in this project, reported with location.
#define SSD_ASSERT(cond)                                                                        \
  do {                                                                                          \
    if (!(cond))                                                                                \
      ::ssd::fail(::fmt::format("internal error: {} failed at {}:{}", #cond, __FILE__, __LINE__)); \
  } while (0)
