// The start-up agreement: the very first collective of a distributed job, before any collective
// whose shape depends on the flags (the communicator splits by --tp, device placement, the
// transport set-up by --transport). Ranks started with different start-up-shaping flags would
// block or fail there in ways that name nothing; instead, every rank contributes a fixed-size
// print of those flags to one MPI_Allgather (the same size on every rank, whatever the flags),
// and every rank judges the same gathered prints the same way:
//   "ranks were started with different start-up flags: --tp is 2 on rank 0 but 1 on rank 1"
// (every differing flag, every rank that differs from rank 0). The handshake that follows
// compares the whole resolved configuration by digest; this check comes first and names values.
//
// The fields are compared by position: one ssd binary lists them in one order. A value longer
// than a print holds is compared by its hash and shown cut short.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ssd {

struct StartupField {
  std::string flag;   // "--tp"
  std::string value;  // "2"
};

// What one rank sends (POD, fixed size: the gather needs no size exchange).
struct StartupPrint {
  static constexpr size_t kMaxFields = 12;
  static constexpr size_t kText = 48;
  struct Field {
    uint64_t hash = 0;              // of the whole value
    std::array<char, kText> text{};  // the value, cut to kText - 1 characters
  };
  uint32_t magic = 0x41535344;  // "DSSA": a rank of another program sends something else
  uint32_t n_fields = 0;
  std::array<Field, kMaxFields> fields{};
};

// This rank's print of `fields` (at most kMaxFields).
StartupPrint make_startup_print(const std::vector<StartupField>& fields);

// The verdict on every rank's print (index = world rank): "" when all agree with rank 0, else
// one line naming each differing flag, its value on rank 0 and on every rank that differs.
// `fields` gives the flag names (this rank's list). Pure: unit-tested without MPI.
std::string judge_startup_prints(const std::vector<StartupField>& fields,
                                 const std::vector<StartupPrint>& all);

// Collective over `comm` (every rank of the job): gathers the prints and throws ssd::Error with
// the verdict, the same on every rank, when they disagree. The caller bounds it with a watchdog
// (a rank that never reaches it, e.g. a different program, leaves the others waiting).
void agree_on_startup(MPI_Comm comm, const std::vector<StartupField>& fields);

}  // namespace ssd
