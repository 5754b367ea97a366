#include "launch/cli/info_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "actors/roles/model_session.h"
#include "launch/cli/flags.h"
#include "runtime/tokenizer/chat_template.h"

namespace ssd {
namespace {

struct InfoArgs {
  std::filesystem::path model;
  bool tensors = false;

  template <class V>
  void visit(V&& v) {
    v(model, "model", "GGUF file, or safetensors checkpoint directory with config.json",
      {.required = true, .short_name = 'm', .must_exist = true});
    v(tensors, "tensors", "also list every tensor with its type and shape");
  }
};

}  // namespace

int run_info_command(int argc, const char* const* argv) {
  InfoArgs args;
  if (parse_or_print_help(argc, argv, args, "ssd info", "Describe a model file.")) return 0;
  const ModelFile file = ModelFile::open(args.model.string());
  const ModelConfig& c = file.config();
  fmt::print("{}\n", file.summary());
  fmt::print("layers {} | dim {} | ffn {} | heads {} (kv {}) x {} | vocab {} | context {}\n",
             c.n_layers, c.dim, c.ffn_dim, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab,
             c.context_length);
  fmt::print("rms eps {} | rope theta {} ({}, {} dims{}) | tied embeddings {} | qkv bias {} | qk norm {}\n",
             c.rms_eps, c.rope_theta,
             c.rope_layout == RopeLayout::Interleaved ? "interleaved pairs" : "neox halves",
             c.rope_dim, file.weights().rope_freqs ? ", llama3 frequency factors" : "",
             c.tied_embeddings, c.qkv_bias, c.qk_norm);
  const Tokenizer tok = load_tokenizer(file);
  std::vector<int32_t> eog = tok.spec().eog_ids;
  std::sort(eog.begin(), eog.end());
  fmt::print("tokenizer: {} tokens | bos {} | eos {} | end-of-generation {} | chat format {}\n",
             tok.vocab_size(), tok.bos(), tok.eos(), eog,
             chat_format_name(ChatTemplate::from_spec(tok.spec()).format()));
  if (args.tensors) {
    const auto& ts = file.gguf() ? file.gguf()->tensors() : file.safetensors()->tensors();
    for (const auto& t : ts)
      fmt::print("  {:<40} {:<5} [{}] {} bytes\n", t.name, dtype_name(t.type), fmt::join(t.ne, ", "),
                 t.nbytes);
  }
  return 0;
}

}  // namespace ssd
