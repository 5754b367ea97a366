// Conversions between the SSD core's types (runtime/saguaro) and the drafter-link messages of
// actors/transport/protocol.h, in one place for both ends of the link. Target features travel as
// the bulk of StartSeqs / Outcome / PrespecWork: the rows of every sequence one after the other,
// [sum of rows, dim]; the head says how many rows each sequence has.
#pragma once

#include <span>
#include <vector>

#include "actors/transport/protocol.h"
#include "runtime/saguaro/ssd_drafter_core.h"

namespace ssd {

// Drafter side. Feature row counts come from a peer and are checked before any row is read:
// none below zero, their total times the row width equal to the bulk's size (no overflow), and
// rows as wide as the drafter reads them (drafter_dim, SsdDrafterCore::feature_dim()).
void start_sequences(SsdDrafterCore& core, const StartSeqs& m, std::span<const float> features);
// Per sequence of the outcome, pointing into `features` (which must outlive the result).
std::vector<RoundOutcome> round_outcomes(const Outcome& m, std::span<const float> features,
                                         int64_t drafter_dim);
std::vector<RoundOutcome> work_outcomes(const PrespecWork& w, std::span<const float> features,
                                        int64_t drafter_dim);
// The answer's entries: every speculation but the decode steps (length 0), which the leader did
// not ask for; no entries means no answer is sent.
SpeculationMsg speculation_message(int64_t round, const std::vector<Speculation>& next);
// Every entry of a round's pre-speculation, for the leader (StartSeqs::push), in cache order.
PrespecPush prespec_push(int64_t round, const std::vector<CacheEntry>& entries);
PrespecWork prespec_work(int64_t round, const Outcome& outcome, std::vector<Speculation> next);
DrafterStatsMsg stats_message(SsdDrafterCore& core, double busy_s);

// Target side: the tree a sequence's speculation asks the target to verify.
DraftTree tree_of(const SeqSpeculation& s);

}  // namespace ssd
