#include "tests/support/tiny_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "runtime/core/error.h"
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/io/safetensors_writer.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/tensor_data.h"

namespace ssd::test {
namespace {

// One HF-layout tensor: row-major values of shape [rows, cols] (a vector has rows == 1).
struct HfTensor {
  int64_t rows = 1, cols = 0;
  std::vector<float> v;
  bool is_matrix = true;
};

// The model's weights in Hugging Face naming and layout, generated from the spec's seed.
std::map<std::string, HfTensor> make_weights(const TinyModelSpec& s) {
  std::map<std::string, HfTensor> w;
  uint64_t seed = s.seed * 1000;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    // Uniform with variance ~1/cols keeps activations O(1) through the layers.
    const float scale = std::sqrt(3.0f / static_cast<float>(cols));
    w[name] = HfTensor{rows, cols, random_floats(rows * cols, ++seed, scale), true};
  };
  auto vec = [&](const std::string& name, int64_t n, float center, float spread) {
    auto v = random_floats(n, ++seed, spread);
    for (auto& x : v) x += center;
    w[name] = HfTensor{1, n, std::move(v), false};
  };
  const int64_t q_out = s.n_heads * s.head_dim, kv_out = s.n_kv_heads * s.head_dim;
  w["model.embed_tokens.weight"] = HfTensor{s.vocab, s.dim, random_floats(s.vocab * s.dim, ++seed, 1.0f), true};
  vec("model.norm.weight", s.dim, 1.0f, 0.2f);
  for (float& x : w["model.norm.weight"].v) x *= s.head_sharpness;
  if (!s.tied) matrix("lm_head.weight", s.vocab, s.dim);
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    vec(p + "input_layernorm.weight", s.dim, 1.0f, 0.2f);
    matrix(p + "self_attn.q_proj.weight", q_out, s.dim);
    matrix(p + "self_attn.k_proj.weight", kv_out, s.dim);
    matrix(p + "self_attn.v_proj.weight", kv_out, s.dim);
    matrix(p + "self_attn.o_proj.weight", s.dim, q_out);
    if (s.arch == Arch::Qwen2) {
      vec(p + "self_attn.q_proj.bias", q_out, 0.0f, 0.5f);
      vec(p + "self_attn.k_proj.bias", kv_out, 0.0f, 0.5f);
      vec(p + "self_attn.v_proj.bias", kv_out, 0.0f, 0.5f);
    }
    if (s.arch == Arch::Qwen3) {
      vec(p + "self_attn.q_norm.weight", s.head_dim, 1.0f, 0.2f);
      vec(p + "self_attn.k_norm.weight", s.head_dim, 1.0f, 0.2f);
    }
    vec(p + "post_attention_layernorm.weight", s.dim, 1.0f, 0.2f);
    matrix(p + "mlp.gate_proj.weight", s.ffn_dim, s.dim);
    matrix(p + "mlp.up_proj.weight", s.ffn_dim, s.dim);
    matrix(p + "mlp.down_proj.weight", s.dim, s.ffn_dim);
  }
  return w;
}

// The llama.cpp converter's Q/K permutation for interleaved RoPE: within each head, HF row
// (half j, index i) moves to GGUF row 2i + j.
std::vector<float> permute_rope_rows(const HfTensor& t, int64_t n_heads) {
  const int64_t hd = t.rows / n_heads, half = hd / 2;
  std::vector<float> out(t.v.size());
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t i = 0; i < half; ++i) {
        const int64_t src = h * hd + j * half + i, dst = h * hd + 2 * i + j;
        std::copy_n(t.v.data() + src * t.cols, t.cols, out.data() + dst * t.cols);
      }
  return out;
}

// GGUF name of an HF tensor name.
std::string gguf_name(const std::string& hf) {
  static const std::map<std::string, std::string> global = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"}};
  if (auto it = global.find(hf); it != global.end()) return it->second;
  static const std::map<std::string, std::string> layer = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"}};
  const std::string prefix = "model.layers.";
  SSD_ASSERT(hf.rfind(prefix, 0) == 0);
  const size_t dot = hf.find('.', prefix.size());
  const std::string l = hf.substr(prefix.size(), dot - prefix.size());
  return "blk." + l + "." + layer.at(hf.substr(dot + 1));
}

// GPT-2 byte-to-unicode alphabet: printable Latin-1 bytes map to themselves, the others to
// U+0100 onwards, so every byte has a visible one-character token.
std::vector<std::string> byte_alphabet() {
  std::vector<std::string> out(256);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    const int cp = printable ? b : next++;
    std::string s;
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    out[b] = s;
  }
  return out;
}

const char* gguf_arch(Arch a) { return arch_name(a); }

// A byte-level BPE vocabulary: 256 byte tokens, two merges, then control tokens up to `vocab`
// (ids 258 <|endoftext|> = BOS, 259 <|im_start|>, 260 <|im_end|> = EOS).
struct TinyVocab {
  std::vector<std::string> tokens;
  std::vector<int64_t> types;  // GGUF token types: 1 normal, 3 control
};
TinyVocab tiny_vocab(int64_t vocab) {
  TinyVocab v;
  v.tokens = byte_alphabet();
  v.tokens.push_back("Ġt");
  v.tokens.push_back("he");
  v.types.assign(v.tokens.size(), 1);
  for (const char* sp : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    v.tokens.push_back(sp);
    v.types.push_back(3);
  }
  SSD_CHECK(static_cast<int64_t>(v.tokens.size()) <= vocab, "tiny model vocab {} is too small", vocab);
  for (int64_t i = static_cast<int64_t>(v.tokens.size()); i < vocab; ++i) {
    v.tokens.push_back(fmt::format("<|reserved_{}|>", i));
    v.types.push_back(3);
  }
  return v;
}

// tokenizer.json (Hugging Face tokenizers format) of the same vocabulary.
nlohmann::json tiny_tokenizer_json(int64_t vocab) {
  const TinyVocab v = tiny_vocab(vocab);
  nlohmann::json j;
  nlohmann::json ids = nlohmann::json::object(), added = nlohmann::json::array();
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.types[i] == 3)
      added.push_back({{"id", i}, {"content", v.tokens[i]}, {"special", true}, {"single_word", false},
                       {"lstrip", false}, {"rstrip", false}, {"normalized", false}});
    else
      ids[v.tokens[i]] = i;
  }
  j["version"] = "1.0";
  j["added_tokens"] = added;
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                        {"use_regex", true}};
  j["post_processor"] = nullptr;
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true},
                  {"use_regex", true}};
  j["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", ids},
                {"merges", {"Ġ t", "h e"}}};
  return j;
}

}  // namespace

TinyModelSpec tiny_spec(Arch arch, DType weight_type) {
  TinyModelSpec s;
  s.arch = arch;
  s.weight_type = weight_type;
  if (arch == Arch::Qwen3) s.head_dim = 128;
  return s;
}

std::string write_tiny_gguf(const TinyModelSpec& s, const std::string& path) {
  const auto w = make_weights(s);
  const std::string a = gguf_arch(s.arch);
  GgufWriter g;
  g.add_string("general.architecture", a)
      .add_string("general.name", "tiny-test-model")
      .add_u32(a + ".block_count", static_cast<uint32_t>(s.n_layers))
      .add_u32(a + ".context_length", static_cast<uint32_t>(s.context))
      .add_u32(a + ".embedding_length", static_cast<uint32_t>(s.dim))
      .add_u32(a + ".feed_forward_length", static_cast<uint32_t>(s.ffn_dim))
      .add_u32(a + ".attention.head_count", static_cast<uint32_t>(s.n_heads))
      .add_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(s.n_kv_heads))
      .add_u32(a + ".attention.key_length", static_cast<uint32_t>(s.head_dim))
      .add_u32(a + ".attention.value_length", static_cast<uint32_t>(s.head_dim))
      .add_u32(a + ".rope.dimension_count", static_cast<uint32_t>(s.head_dim))
      .add_f32(a + ".rope.freq_base", s.rope_theta)
      .add_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f)
      .add_u32(a + ".vocab_size", static_cast<uint32_t>(s.vocab));

  const TinyVocab v = tiny_vocab(s.vocab);
  const auto& tokens = v.tokens;
  const auto& types = v.types;
  g.add_string("tokenizer.ggml.model", "gpt2")
      .add_string("tokenizer.ggml.pre", "gpt2")
      .add_string_array("tokenizer.ggml.tokens", tokens)
      .add_int_array("tokenizer.ggml.token_type", types)
      .add_string_array("tokenizer.ggml.merges", {"Ġ t", "h e"})
      .add_u32("tokenizer.ggml.bos_token_id", 258)
      .add_u32("tokenizer.ggml.eos_token_id", 260)
      .add_bool("tokenizer.ggml.add_bos_token", false)
      .add_string("tokenizer.chat_template",
                  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                  "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}");

  if (s.llama3_rope) {
    // Frequency factors as llama3 GGUFs store them: factor per rotary frequency.
    ModelConfig c;
    c.rope_theta = s.rope_theta;
    c.rope_dim = s.head_dim;
    c.rope_scaling.kind = RopeScaling::Kind::Llama3;
    c.rope_scaling.factor = 8.0f;
    c.rope_scaling.original_context = 64;
    ModelConfig plain = c;
    plain.rope_scaling.kind = RopeScaling::Kind::None;
    const auto scaled = rope_inv_freq(c, nullptr), base = rope_inv_freq(plain, nullptr);
    std::vector<float> factors(scaled.size());
    for (size_t i = 0; i < factors.size(); ++i) factors[i] = base[i] / scaled[i];
    g.add_tensor("rope_freqs.weight", {factors.size()}, factors, DType::F32);
  }

  for (const auto& [name, t] : w) {
    const bool permute = s.arch == Arch::Llama && (name.find("q_proj.weight") != std::string::npos ||
                                                   name.find("k_proj.weight") != std::string::npos);
    std::vector<float> values = t.v;
    if (permute) {
      const int64_t heads = name.find("q_proj") != std::string::npos ? s.n_heads : s.n_kv_heads;
      values = permute_rope_rows(t, heads);
    }
    const std::vector<uint64_t> ne =
        t.is_matrix ? std::vector<uint64_t>{static_cast<uint64_t>(t.cols), static_cast<uint64_t>(t.rows)}
                    : std::vector<uint64_t>{static_cast<uint64_t>(t.cols)};
    // Norms, biases (and the Q/K norms) stay F32 as converters keep them.
    const DType type = t.is_matrix ? s.weight_type : DType::F32;
    g.add_tensor(gguf_name(name), ne, values, type);
  }
  return g.write(path);
}

std::string write_tiny_safetensors(const TinyModelSpec& s, const std::string& dir, int shards) {
  SSD_CHECK(s.weight_type == DType::F32 || s.weight_type == DType::F16 || s.weight_type == DType::BF16,
            "safetensors tiny models are F32, F16 or BF16, not {}", dtype_name(s.weight_type));
  const auto w = make_weights(s);
  SafetensorsWriter st;
  for (const auto& [name, t] : w) {
    const std::vector<uint64_t> shape =
        t.is_matrix ? std::vector<uint64_t>{static_cast<uint64_t>(t.rows), static_cast<uint64_t>(t.cols)}
                    : std::vector<uint64_t>{static_cast<uint64_t>(t.cols)};
    st.add_tensor(name, shape, t.v, s.weight_type);
  }
  st.add_metadata("format", "pt");
  if (shards > 1) {
    st.write_sharded(dir, shards);
  } else {
    st.write(dir + "/model.safetensors");
  }
  static const char* kTypes[] = {"llama", "qwen2", "qwen3"};
  nlohmann::json c = {
      {"model_type", kTypes[static_cast<int>(s.arch)]},
      {"hidden_size", s.dim},
      {"intermediate_size", s.ffn_dim},
      {"num_hidden_layers", s.n_layers},
      {"num_attention_heads", s.n_heads},
      {"num_key_value_heads", s.n_kv_heads},
      {"head_dim", s.head_dim},
      {"vocab_size", s.vocab},
      {"max_position_embeddings", s.context},
      {"rms_norm_eps", 1e-5},
      {"rope_theta", s.rope_theta},
      {"tie_word_embeddings", s.tied},
      {"torch_dtype", s.weight_type == DType::F32 ? "float32" : s.weight_type == DType::F16 ? "float16" : "bfloat16"},
  };
  if (s.llama3_rope)
    c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}};
  std::ofstream(dir + "/config.json") << c.dump(2);
  std::ofstream(dir + "/tokenizer.json") << tiny_tokenizer_json(s.vocab).dump();
  return dir;
}

}  // namespace ssd::test
