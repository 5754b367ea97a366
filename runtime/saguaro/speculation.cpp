#include "runtime/saguaro/speculation.h"

namespace ssd {

const char* spec_source_name(SpecSource s) {
  switch (s) {
    case SpecSource::kInitial:
      return "initial";
    case SpecSource::kCache:
      return "cache";
    case SpecSource::kPrimary:
      return "primary";
    case SpecSource::kBackup:
      return "backup";
  }
  return "?";
}

DraftTree Speculation::tree() const {
  DraftTree t;
  for (size_t i = 0; i < tokens.size(); ++i)
    t.add(static_cast<int32_t>(i) - 1, tokens[i], i < q.size() ? q[i] : one_hot(tokens[i]));
  return t;
}

}  // namespace ssd
