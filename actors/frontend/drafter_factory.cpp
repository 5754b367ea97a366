#include "actors/frontend/drafter_factory.h"

#include <charconv>

#include "runtime/core/error.h"
#include "runtime/drafters/ngram_drafter.h"

namespace ssd {
namespace {

constexpr const char* kKinds = "ngram[:MIN-MAX], model:PATH, early-exit:L, domino:PATH, oracle:ALPHA";

int64_t parse_int(std::string_view s, std::string_view what) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  SSD_CHECK(ec == std::errc() && p == s.data() + s.size(), "--drafter: {} '{}' is not an integer",
            what, s);
  return v;
}

std::unique_ptr<Drafter> make_ngram(const DrafterSpec& spec) {
  NgramOptions o;
  if (!spec.arg.empty()) {
    const auto dash = spec.arg.find('-');
    SSD_CHECK(dash != std::string::npos, "--drafter ngram:{}: expected ngram:MIN-MAX, e.g. ngram:1-4",
              spec.arg);
    o.n_min = static_cast<int32_t>(parse_int(std::string_view(spec.arg).substr(0, dash), "n min"));
    o.n_max = static_cast<int32_t>(parse_int(std::string_view(spec.arg).substr(dash + 1), "n max"));
  }
  return std::make_unique<NgramDrafter>(o);
}

}  // namespace

DrafterSpec parse_drafter_spec(std::string_view text) {
  DrafterSpec s;
  const auto colon = text.find(':');
  s.kind = std::string(text.substr(0, colon));
  if (colon != std::string_view::npos) s.arg = std::string(text.substr(colon + 1));
  const bool known = s.kind == "ngram" || s.kind == "model" || s.kind == "early-exit" ||
                     s.kind == "domino" || s.kind == "oracle";
  SSD_CHECK(known, "--drafter '{}': unknown kind '{}' (known: {})", text, s.kind, kKinds);
  SSD_CHECK(s.kind == "ngram" || !s.arg.empty(), "--drafter {} needs an argument ({})", s.kind,
            kKinds);
  return s;
}

std::unique_ptr<Drafter> make_drafter(const DrafterSpec& spec, ModelSession& target,
                                      const DrafterOptions& opts) {
  if (spec.kind == "ngram") return make_ngram(spec);
  fail(fmt::format("--drafter {}: this kind is not available in this build", spec.kind));
}

}  // namespace ssd
