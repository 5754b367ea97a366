// The CUDA target's TokenPicker (runtime/generate/token_picker.h): decode and verification
// forwards leave their logits on the device (reads_backend_logits), and tokens are picked there,
// in order with the backend's stream:
//   sample   DeviceSampler: the greedy argmax, or process() + the Philox draw; one token id
//            comes back; sample_rows (an AR decode step) takes the argmax of the step's greedy
//            rows in one launch (DeviceVerifier::argmax_rows) and draws sampled rows one by one;
//   verify   DeviceVerifier: greedy trees by device argmaxes (ids come back, the walk is host
//            bookkeeping), sampled trees and chains by the device tree verifier (the emitted
//            tokens and the accepted path come back).
// Host rows (a prefill's, or a TP forward's over MPI) are staged to the device first, so the
// same picker serves every forward. The results equal HostTokenPicker's on the same logits.
// Free of CUDA headers. Not yet run on a GPU (tests/unit/cuda/device_token_picker_test.cpp
// compares the two pickers where one exists).
#pragma once

#include <memory>

#include "runtime/backend/backend.h"
#include "runtime/generate/token_picker.h"

namespace ssd {

// A device picker on `backend` (a CUDA backend; ssd::Error otherwise), which must outlive it.
std::unique_ptr<TokenPicker> make_device_token_picker(Backend& backend);

}  // namespace ssd
