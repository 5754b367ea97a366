#include "launch/cli/bench_workloads.h"

#include <algorithm>

#include "runtime/core/error.h"
#include "runtime/train/prompt_set.h"

namespace ssd {

std::vector<WorkloadCategory> read_workloads(const std::filesystem::path& dir,
                                             int64_t max_prompts) {
  std::error_code ec;
  SSD_CHECK(std::filesystem::is_directory(dir, ec), "--workloads '{}' is not a directory",
            dir.string());
  std::vector<WorkloadCategory> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".txt") continue;
    out.push_back(WorkloadCategory{entry.path().stem().string(), entry.path(), {}});
  }
  SSD_CHECK(!out.empty(), "--workloads '{}' holds no .txt prompt file (one per category)",
            dir.string());
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (auto& c : out) c.prompts = read_prompt_file(c.path.string(), max_prompts);
  return out;
}

}  // namespace ssd
