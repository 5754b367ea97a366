#include "actors/transport/startup_agreement.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "actors/transport/mpi_check.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

static_assert(std::is_trivially_copyable_v<StartupPrint>, "StartupPrint is gathered as bytes");

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string shown(const StartupPrint::Field& f) {
  const char* end = std::find(f.text.begin(), f.text.end(), '\0');
  std::string s(f.text.begin(), end);
  return s.size() == StartupPrint::kText - 1 ? s + "..." : s;
}

}  // namespace

StartupPrint make_startup_print(const std::vector<StartupField>& fields) {
  SSD_CHECK(fields.size() <= StartupPrint::kMaxFields,
            "{} start-up fields; a start-up print holds {}", fields.size(),
            StartupPrint::kMaxFields);
  StartupPrint p;
  p.n_fields = static_cast<uint32_t>(fields.size());
  for (size_t i = 0; i < fields.size(); ++i) {
    p.fields[i].hash = fnv1a(fields[i].value);
    const size_t n = std::min(fields[i].value.size(), StartupPrint::kText - 1);
    std::memcpy(p.fields[i].text.data(), fields[i].value.data(), n);
  }
  return p;
}

std::string judge_startup_prints(const std::vector<StartupField>& fields,
                                 const std::vector<StartupPrint>& all) {
  if (all.empty()) return "";
  const StartupPrint& root = all[0];
  std::vector<std::string> problems;
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r].magic != root.magic || all[r].n_fields != root.n_fields)
      problems.push_back(fmt::format("rank {} sent a start-up print of another layout (magic "
                                     "{:#x}, {} fields; rank 0: {:#x}, {} fields): another "
                                     "program or ssd version",
                                     r, all[r].magic, all[r].n_fields, root.magic, root.n_fields));
  if (!problems.empty()) return fmt::format("{}", fmt::join(problems, "; "));
  const size_t n = std::min<size_t>(root.n_fields, StartupPrint::kMaxFields);
  for (size_t f = 0; f < n; ++f) {
    std::vector<std::string> differ;
    for (size_t r = 1; r < all.size(); ++r)
      if (all[r].fields[f].hash != root.fields[f].hash)
        differ.push_back(fmt::format("'{}' on rank {}", shown(all[r].fields[f]), r));
    if (differ.empty()) continue;
    const std::string flag = f < fields.size() ? fields[f].flag : fmt::format("field {}", f);
    problems.push_back(fmt::format("{} is '{}' on rank 0 but {}", flag, shown(root.fields[f]),
                                   fmt::join(differ, ", ")));
  }
  if (problems.empty()) return "";
  return fmt::format("ranks were started with different start-up flags: {} (start every rank "
                     "with the same flags)",
                     fmt::join(problems, "; "));
}

void agree_on_startup(MPI_Comm comm, const std::vector<StartupField>& fields) {
  const StartupPrint mine = make_startup_print(fields);
  int n = 0;
  SSD_MPI_CHECK(MPI_Comm_size(comm, &n));
  std::vector<StartupPrint> all(static_cast<size_t>(n));
  SSD_MPI_CHECK(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE,
                              comm));
  const std::string verdict = judge_startup_prints(fields, all);
  SSD_CHECK(verdict.empty(), "{}", verdict);
}

}  // namespace ssd
