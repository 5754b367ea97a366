// The outcome trace: what happened to every speculation of a run, one JSON object per line
// (JSONL), one line per (round, sequence) verified. It is what `ssd simulate --outcome-trace`
// replays, and what a run records: the simulator's own --record-trace, and a real run's leader
// (`ssd bench --outcome-trace DIR` with drafter ranks, actors/roles/remote_decode.cpp, which
// leaves bonus_rank at -1: the ranking lives on the drafter rank). The fields:
//
//   {"round": 3, "seq": 0, "k": 4, "accepted": 2, "bonus_rank": 1, "hit": true}
//
//   round       the verification round, from 0 (the first speculation of a batch)
//   seq         the sequence within the batch, from 0
//   k           draft tokens offered in this round (the chosen K; 0 for an AR step)
//   accepted    draft tokens the target accepted, 0..k (the round emits accepted + 1 tokens)
//   bonus_rank  the emitted bonus token's rank in the drafter's list at position `accepted`
//               (0 = its top choice); -1 or absent = unknown / not in the list
//   hit         SSD only: this round's outcome (accepted, bonus) was pre-speculated and drafted,
//               so the sequence's next speculation came from the cache; absent for AR and SD
//   prespec     SSD only: whether the drafter pre-speculated while this round was verified (the
//               leader's PrespecSwitch regime, runtime/saguaro/prespec_switch.h; off: it answered
//               the outcome by a fallback and drafted nothing meanwhile); absent = unknown (traces
//               recorded before the field: the simulator then runs the switch itself)
//   leader      SSD only: this round's outcome missed and the target leader drafted the next
//               speculation itself (--miss-at leader, actors/roles/leader_lookup.h: a miss the
//               drafter answers with a lookup), so that sequence waited for no answer; false:
//               it did not (a hit, or answered by the drafter rank); absent = unknown (traces
//               recorded before the field: the simulator then decides by its own miss policy and
//               --miss-at)
//   backup      SSD only: this round's outcome missed and the drafter rank answered it with its
//               backup speculator (true) or drafted it with its primary (false), as its miss
//               policy chose (runtime/saguaro/miss_policy.h); absent on hits, on misses the leader
//               drafted, before a decode step, and in traces recorded before the field (the
//               simulator then chooses by its own miss policy)
//
// Lines may come in any order; blank lines and lines starting with '#' are skipped. A malformed
// line is an ssd::Error naming the file and line number.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ssd::sim {

struct OutcomeRecord {
  int64_t round = 0;
  int32_t seq = 0;
  int32_t k = 0;
  int32_t accepted = 0;
  int32_t bonus_rank = -1;
  std::optional<bool> hit;
  std::optional<bool> prespec;
  std::optional<bool> leader;
  std::optional<bool> backup;
};

std::string to_jsonl_line(const OutcomeRecord& r);
OutcomeRecord parse_outcome_line(const std::string& line, const std::string& where);

std::vector<OutcomeRecord> read_outcome_trace(const std::string& path);
void write_outcome_trace(const std::string& path, const std::vector<OutcomeRecord>& records);

// The figures a trace determines by itself (a replay must reproduce them exactly).
struct TraceSummary {
  int64_t rounds = 0;        // distinct rounds
  int64_t seq_rounds = 0;    // records
  int64_t tokens = 0;        // sum of accepted + 1
  int64_t hits = 0, misses = 0;  // records with a "hit" field
  int64_t leader_drafted = 0;    // records with "leader": true
  int32_t sequences = 0;     // distinct seq ids
  double mal() const { return seq_rounds ? double(tokens) / double(seq_rounds) : 0; }
  double hit_rate() const { return hits + misses ? double(hits) / double(hits + misses) : 0; }
};
TraceSummary summarize(const std::vector<OutcomeRecord>& records);

}  // namespace ssd::sim
