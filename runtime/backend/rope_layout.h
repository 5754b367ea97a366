// Which element pairs rotary position embedding rotates, as the model file lays out Q and K:
// Interleaved rotates (2i, 2i+1) (GGUF Llama, whose Q/K weights the converter permuted); NeoX
// rotates (i, i + rot_dim/2) (the Hugging Face layout). A model property the backends' rope op
// takes; each backend maps it to its own kernels.
#pragma once

namespace ssd {

enum class RopeLayout { Interleaved, NeoX };

}  // namespace ssd
