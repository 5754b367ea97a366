#include "actors/roles/distributed_config.h"

#include <limits>
#include <sstream>

#include "runtime/core/error.h"

namespace ssd {
namespace {

// `text` as a non-negative integer, or -1 when it is not exactly one.
int non_negative(const std::string& text) {
  size_t used = 0;
  int v = -1;
  try {
    v = std::stoi(text, &used);
  } catch (...) {
    return -1;
  }
  return used == text.size() && v >= 0 ? v : -1;
}

std::vector<int32_t> parse_list(const std::string& flag, const std::string& text, int32_t k) {
  std::vector<int32_t> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    const int v = non_negative(item);
    SSD_CHECK(v >= 0, "--{}: '{}' is not a non-negative integer (in '{}')", flag, item, text);
    out.push_back(v);
  }
  SSD_CHECK(static_cast<int32_t>(out.size()) == k + 1,
            "--{} '{}' has {} entries; with --k {} it needs {} (F0..F{})", flag, text, out.size(),
            k, k + 1, k);
  return out;
}

}  // namespace

SsdDrafterOptions to_ssd_options(const DistributedConfig& a, int32_t k,
                                 const SamplerConfig& sampler) {
  SsdDrafterOptions o;
  o.k = k;
  o.sampler = sampler;
  o.saguaro_c = a.saguaro_c;
  o.fan_out.budget = a.fan_out_budget;
  if (a.prespec_chunk == "auto") {
    o.prespec_chunk = kPrespecChunkAuto;
  } else {
    o.prespec_chunk = non_negative(a.prespec_chunk);
    SSD_CHECK(o.prespec_chunk >= 0, "--prespec-chunk '{}' is not auto or a non-negative integer",
              a.prespec_chunk);
  }
  if (a.fan_out == "geometric") {
    o.fan_out.mode = FanOutMode::kGeometric;
  } else if (a.fan_out == "constant") {
    o.fan_out.mode = FanOutMode::kConstant;
  } else {
    SSD_CHECK(a.fan_out.find_first_not_of("0123456789,") == std::string::npos,
              "--fan-out '{}' is not geometric, constant, or a list like 3,2,1,1,2", a.fan_out);
    o.fan_out.mode = FanOutMode::kLists;
    o.fan_out.after_hit = parse_list("fan-out", a.fan_out, k);
    o.fan_out.after_miss = a.fan_out_after_miss
                               ? parse_list("fan-out-after-miss", *a.fan_out_after_miss, k)
                               : o.fan_out.after_hit;
  }
  SSD_CHECK(!a.fan_out_after_miss || o.fan_out.mode == FanOutMode::kLists,
            "--fan-out-after-miss needs --fan-out given as a list (got '{}')", a.fan_out);
  const MissPolicyOptions miss =
      miss_policy_options(parse_miss_choice(a.miss_policy), a.critical_batch.value_or(-1));
  o.miss.b_star = miss.b_star;
  o.miss.backup_must_not_be_worse = miss.backup_must_not_be_worse;
  return o;
}

int32_t resolve_prespec_chunk(int32_t chunk, std::string_view backend_name) {
  if (chunk != kPrespecChunkAuto) return chunk;
  return backend_name == "cpu" ? 2 : 0;
}

}  // namespace ssd
