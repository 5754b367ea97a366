#include "runtime/core/dtype.h"

#include "runtime/core/error.h"

namespace ssd {
namespace {
constexpr DTypeTraits kTraits[] = {
    {DType::F32, "F32", 1, 4},       {DType::F16, "F16", 1, 2},
    {DType::BF16, "BF16", 1, 2},     {DType::Q8_0, "Q8_0", 32, 34},
    {DType::Q4_0, "Q4_0", 32, 18},   {DType::Q4_1, "Q4_1", 32, 20},
    {DType::Q4_K, "Q4_K", 256, 144}, {DType::Q6_K, "Q6_K", 256, 210},
};
}  // namespace

std::optional<DTypeTraits> dtype_traits_from_ggml_id(uint32_t id) {
  for (const auto& t : kTraits)
    if (static_cast<uint32_t>(t.type) == id) return t;
  return std::nullopt;
}

const DTypeTraits& dtype_traits(DType t) {
  for (const auto& tr : kTraits)
    if (tr.type == t) return tr;
  fail(fmt::format("internal error: unknown dtype id {}", static_cast<uint32_t>(t)));
}

}  // namespace ssd
