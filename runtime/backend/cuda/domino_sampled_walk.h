// The Domino head's SAMPLED walk on the device (DominoWalkCall::samplers; the greedy walk is
// the single kernel of domino_walk.cu). Per position i, in stream order and without returning to
// the host: one launch of domino_walk_step_kernel (every chain's GRU step on its previous token
// and the row's correction; greedy chains take their argmax there), then, for each sampled
// chain's row, the device sampler's kernels (device_sampler.cu): process the final row into
// its q list (top-k / top-p / min-p / temperature, the CPU's list) and draw the token from the
// chain's Philox uniform, which the next position's GRU step reads on the device. After the
// last position the rows' lists are packed as CSR (pack_rows.cu) and come back with the tokens
// in four downloads.
//
// The lists are processed over the draft vocabulary's row (Vd) rather than the host walk's
// scattered target row (V, -inf outside the draft vocabulary): the same candidates in the same
// order (draft indices increase with target ids), the same kept probabilities, except that
// top-p's cut compares against a normaliser summed in another order, which can move the cut
// at a rounding edge. Exactness does not depend on it: the verifier judges each token against
// the q it was drawn from (runtime/spec/verify.h). Without a draft vocabulary the lists are the
// host's bit for bit. Not yet run on a GPU.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/kernels.cuh"
#include "runtime/backend/domino_walk_call.h"

namespace ssd::cuda {

class DominoSampledWalk {
 public:
  // Runs the walk `a` describes (a.tokens is replaced by this object's device buffer) with the
  // call's samplers; fills call.tokens (target ids) and *call.lists. Waits for the stream.
  // Throws the CPU sampler's / argmax's message for the first invalid row the host walk would
  // meet (positions in order, chains in order at each position).
  void run(DominoWalkArgs a, const DominoWalkCall& call, cudaStream_t s);

 private:
  DeviceBuffer tokens_;            // [rows] int32 draft indices
  DeviceBuffer greedy_;            // [chains] uint8
  DeviceBuffer stats_;             // [rows] RowStats
  DeviceBuffer ids_, probs_;       // [rows, Vd] each row's list, in place
  DeviceBuffer e_, keys_, sorted_; // [Vd] one row's processing scratch (rows run in order)
  DeviceBuffer sort_tmp_;          // CUB's
  DeviceBuffer scan_;              // [process_scan_doubles(Vd)] the block scans' scratch
  DeviceBuffer off_, packed_ids_, packed_probs_;  // the CSR lists: [rows + 1], [rows * Vd] x 2
  std::vector<uint8_t> greedy_host_;
};

}  // namespace ssd::cuda
