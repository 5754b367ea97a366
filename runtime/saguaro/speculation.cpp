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
    case SpecSource::kDecodeStep:
      return "decode step";
  }
  return "?";
}

DraftTree Speculation::tree() const { return DraftTree::chain(tokens, q); }

}  // namespace ssd
