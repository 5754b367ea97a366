// `ssd bench --workloads DIR`: a directory of prompt files, one per workload category (the suite
// in perf/workloads/), each file in the prompt-file format of `--prompt-file`. The category is the
// file's name without ".txt"; categories run in name order.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ssd {

struct WorkloadCategory {
  std::string name;                  // file stem, e.g. "translation"
  std::filesystem::path path;
  std::vector<std::string> prompts;  // at most max_prompts when > 0
};

// Every *.txt in `dir`, sorted by name. Throws ssd::Error when `dir` is not a directory, holds no
// .txt file, or a file has no prompt.
std::vector<WorkloadCategory> read_workloads(const std::filesystem::path& dir, int64_t max_prompts);

}  // namespace ssd
