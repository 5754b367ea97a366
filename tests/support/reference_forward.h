// A plain float64 forward pass of a Llama-family model, written independently of the engine for
// tests: no KV cache, no batching tricks, no backend, every op straight from its definition. It
// reads the weights the loader resolved and decodes them with the kernels' scalar reference
// dequantizers (themselves checked against the PyPI gguf package), so a comparison isolates the
// engine's arithmetic from the weight format.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/model/model_file.h"

namespace ssd::test {

// Logits of every position of `tokens` under a causal mask: [tokens.size(), vocab] (float64).
std::vector<std::vector<double>> reference_logits(const ModelFile& model,
                                                  const std::vector<int32_t>& tokens);

}  // namespace ssd::test
