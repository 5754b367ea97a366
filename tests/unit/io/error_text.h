// error_text(fn): runs fn and returns the ssd::Error message it threw, or "<no error>", so a test
// can assert what a message names: EXPECT_THAT(error_text([&]{ open(p); }), HasSubstr("kv_count")).
#pragma once

#include <string>

#include "runtime/core/error.h"

namespace ssd::test {

template <class F>
std::string error_text(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace ssd::test
