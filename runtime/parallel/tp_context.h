// What a Transformer needs to run as one rank of a tensor-parallel group: the group's Collective
// and this rank's TpShard. Built once at start-up (make_tp_context) and handed to the Transformer
// constructor; a Transformer without one is the whole model on one rank, exactly as before.
//
// Also here: the start-up handshake every rank's Transformer runs (check_tp_group).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/model/model_file.h"
#include "runtime/parallel/collective.h"
#include "runtime/parallel/tp_plan.h"

namespace ssd {

struct TpContext {
  Collective* comm = nullptr;  // not owned; outlives the Transformer
  TpShard shard;
  TpMode mode = TpMode::Exact;  // see tp_plan.h
};

// Every rank's ranges, as [T + 1] offsets (rank r holds [off[r], off[r+1])).
struct TpLayout {
  std::vector<int64_t> heads, ffn, vocab, dim;
};

// The ffn split unit for a model: the least common multiple of the block sizes of every layer's
// down projection, so that each rank's w_down column slice stays in the stored type.
int64_t tp_ffn_block(const ModelWeights& w);

// comm's rank's plan for `model` (T = comm.size()). Throws for an impossible T.
TpContext make_tp_context(const ModelFile& model, Collective& comm,
                          TpMode mode = TpMode::Exact);

// Collective: every rank of the group calls it once at start-up with its own context. Exchanges
// each rank's model dimensions, mode and shard ranges, and throws ssd::Error on every rank, with
// the same message (naming the rank and the field), unless all ranks run the same model in the
// same mode and their shards tile it exactly: query heads, ffn columns, vocab rows and output
// rows each covered once, in rank order. Returns every rank's ranges.
TpLayout check_tp_group(const TpContext& tp, const ModelConfig& cfg, int64_t layers);

}  // namespace ssd
