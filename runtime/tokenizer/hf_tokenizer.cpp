// Reading tokenizer.json. The file describes a pipeline (normalizer, pre_tokenizer, model,
// decoder, post_processor) as nested JSON objects; we support only pipelines equivalent to one of
// the TokenizerKind x PreTokenizerKind pairs the Tokenizer implements, recognised structurally
// (and for Split, by the exact regex text), and reject the rest with the JSON path of the part we
// do not understand.
#include "runtime/tokenizer/hf_tokenizer.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "runtime/core/error.h"

namespace ssd {
namespace {

using json = nlohmann::json;

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 '▁'

// Split patterns we have scanners for, exactly as tokenizer.json spells them.
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Field access that names the file and the JSON path of whatever is missing or mistyped.
struct Doc {
  const std::string& name;

  const json& get(const json& obj, std::string_view key, std::string_view path) const {
    SSD_CHECK(obj.is_object(), "{}: '{}' is not an object", name, path.empty() ? "(top level)" : path);
    auto it = obj.find(key);
    SSD_CHECK(it != obj.end(), "{}: missing field '{}{}{}'", name, path, path.empty() ? "" : ".",
              key);
    return *it;
  }
  const json* opt(const json& obj, std::string_view key) const {
    if (!obj.is_object()) return nullptr;
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  std::string str(const json& v, std::string_view path) const {
    SSD_CHECK(v.is_string(), "{}: field '{}' should be a string", name, path);
    return v.get<std::string>();
  }
  bool flag(const json& obj, std::string_view key, bool dflt, std::string_view path) const {
    const json* v = opt(obj, key);
    if (!v) return dflt;
    SSD_CHECK(v->is_boolean(), "{}: field '{}.{}' should be true or false", name, path, key);
    return v->get<bool>();
  }
  std::string type(const json& obj, std::string_view path) const {
    return str(get(obj, "type", path), fmt::format("{}.type", path));
  }
  [[noreturn]] void unsupported(const json& v, std::string_view path) const {
    std::string text = v.dump();
    if (text.size() > 200) text = text.substr(0, 200) + "...";
    fail(fmt::format("{}: unsupported {}: {}", name, path, text));
  }
};

json parse(std::string_view text, const std::string& name) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail(fmt::format("{}: invalid JSON: {}", name, e.what()));
  }
}

// A ByteLevel step must not add a prefix space (we never do); returns its use_regex.
bool byte_level_regex(const Doc& d, const json& p, std::string_view path) {
  SSD_CHECK(!d.flag(p, "add_prefix_space", false, path),
            "{}: {}.add_prefix_space = true is not supported", d.name, path);
  return d.flag(p, "use_regex", true, path);
}

bool is_type(const Doc& d, const json& v, std::string_view type) {
  return v.is_object() && d.opt(v, "type") && *d.opt(v, "type") == type;
}

PreTokenizerKind byte_level_pre(const Doc& d, const json& pre) {
  const std::string path = "pre_tokenizer";
  if (is_type(d, pre, "ByteLevel") && byte_level_regex(d, pre, path)) return PreTokenizerKind::Gpt2;
  if (is_type(d, pre, "Sequence")) {
    const json& steps = d.get(pre, "pretokenizers", path);
    if (steps.is_array() && steps.size() == 2 && is_type(d, steps[1], "ByteLevel")) {
      const json& first = steps[0];
      const bool regex = byte_level_regex(d, steps[1], path + ".pretokenizers[1]");
      if (is_type(d, first, "Digits") && regex &&
          d.flag(first, "individual_digits", false, path + ".pretokenizers[0]"))
        return PreTokenizerKind::SmolLM;
      if (is_type(d, first, "Split") && !regex) {
        const json* pat = d.opt(d.get(first, "pattern", path + ".pretokenizers[0]"), "Regex");
        const json* behavior = d.opt(first, "behavior");
        const bool isolated = behavior && *behavior == "Isolated" &&
                              !d.flag(first, "invert", false, path + ".pretokenizers[0]");
        if (pat && pat->is_string() && isolated) {
          const std::string p = pat->get<std::string>();
          if (p == kGpt2Regex) return PreTokenizerKind::Gpt2;
          if (p == kLlama3Regex) return PreTokenizerKind::Llama3;
          if (p == kQwen2Regex) return PreTokenizerKind::Qwen2;
        }
      }
    }
  }
  d.unsupported(pre, "pre_tokenizer (not a known GPT-2 / Llama 3 / Qwen2 / SmolLM2 split)");
}

// SentencePiece-style pipelines: returns add_space_prefix.
bool spm_space_prefix(const Doc& d, const json* norm, const json* pre) {
  if (pre) {
    SSD_CHECK(is_type(d, *pre, "Metaspace"), "{}: unsupported pre_tokenizer type {} for a "
              "SentencePiece vocabulary", d.name, d.get(*pre, "type", "pre_tokenizer").dump());
    SSD_CHECK(d.str(d.get(*pre, "replacement", "pre_tokenizer"), "pre_tokenizer.replacement") ==
                  kSpmSpace,
              "{}: pre_tokenizer.replacement must be U+2581", d.name);
    SSD_CHECK(!d.flag(*pre, "split", true, "pre_tokenizer"),
              "{}: pre_tokenizer Metaspace with split = true is not supported", d.name);
    if (const json* scheme = d.opt(*pre, "prepend_scheme"))
      return d.str(*scheme, "pre_tokenizer.prepend_scheme") != "never";
    return d.flag(*pre, "add_prefix_space", true, "pre_tokenizer");
  }
  SSD_CHECK(norm, "{}: SentencePiece vocabulary without a normalizer or Metaspace pre_tokenizer",
            d.name);
  std::vector<const json*> steps;
  if (is_type(d, *norm, "Sequence")) {
    for (const json& s : d.get(*norm, "normalizers", "normalizer")) steps.push_back(&s);
  } else {
    steps.push_back(norm);
  }
  bool prefix = false, replace = false;
  for (const json* s : steps) {
    if (is_type(d, *s, "Prepend") && d.opt(*s, "prepend") && *d.opt(*s, "prepend") == kSpmSpace) {
      prefix = true;
    } else if (is_type(d, *s, "Replace") && d.opt(*s, "pattern") &&
               d.opt(*d.opt(*s, "pattern"), "String") &&
               *d.opt(*d.opt(*s, "pattern"), "String") == " " && d.opt(*s, "content") &&
               *d.opt(*s, "content") == kSpmSpace) {
      replace = true;
    } else {
      d.unsupported(*s, "normalizer step");
    }
  }
  SSD_CHECK(replace, "{}: normalizer does not replace ' ' with U+2581", d.name);
  return prefix;
}

// A special-token field of tokenizer_config.json: a string, {"content": "..."} or null.
std::optional<std::string> config_token(const Doc& d, const json& cfg, std::string_view key) {
  const json* v = d.opt(cfg, key);
  if (!v) return std::nullopt;
  if (v->is_object()) return d.str(d.get(*v, "content", key), fmt::format("{}.content", key));
  return d.str(*v, key);
}

}  // namespace

TokenizerSpec tokenizer_spec_from_hf_json(std::string_view tokenizer_json,
                                          std::string_view config_json,
                                          const std::string& tokenizer_name,
                                          const std::string& config_name) {
  const Doc d{tokenizer_name};
  const json j = parse(tokenizer_json, tokenizer_name);
  SSD_CHECK(j.is_object(), "{}: top level is not a JSON object", tokenizer_name);
  TokenizerSpec s;
  s.source = tokenizer_name;

  // ---- model: vocab, merges, options ----
  const json& model = d.get(j, "model", "");
  const std::string mtype = d.type(model, "model");
  SSD_CHECK(mtype == "BPE", "{}: model.type '{}' is not supported (only BPE)", d.name, mtype);
  for (std::string_view key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json* v = d.opt(model, key);
    SSD_CHECK(!v || *v == "", "{}: model.{} is not supported", d.name, key);
  }
  std::unordered_map<int64_t, std::string> by_id;
  int64_t max_id = -1;
  auto put = [&](int64_t id, const std::string& text, std::string_view where) {
    SSD_CHECK(id >= 0 && id < (int64_t{1} << 31), "{}: {} '{}' has invalid id {}", d.name, where,
              text, id);
    auto [it, fresh] = by_id.try_emplace(id, text);
    SSD_CHECK(fresh || it->second == text, "{}: id {} is both '{}' and '{}'", d.name, id,
              it->second, text);
    max_id = std::max(max_id, id);
  };
  const json& vocab = d.get(model, "vocab", "model");
  SSD_CHECK(vocab.is_object(), "{}: model.vocab is not an object", d.name);
  for (const auto& [text, id] : vocab.items()) {
    SSD_CHECK(id.is_number_integer(), "{}: model.vocab['{}'] is not an integer id", d.name, text);
    put(id.get<int64_t>(), text, "model.vocab");
  }
  std::vector<std::pair<int64_t, bool>> added;  // (id, special)
  if (const json* at = d.opt(j, "added_tokens")) {
    for (size_t i = 0; i < at->size(); ++i) {
      const json& t = (*at)[i];
      const std::string path = fmt::format("added_tokens[{}]", i);
      const json& idv = d.get(t, "id", path);
      SSD_CHECK(idv.is_number_integer(), "{}: {}.id is not an integer", d.name, path);
      put(idv.get<int64_t>(), d.str(d.get(t, "content", path), path + ".content"), path);
      added.emplace_back(idv.get<int64_t>(), d.flag(t, "special", false, path));
    }
  }
  SSD_CHECK(max_id >= 0, "{}: model.vocab is empty", d.name);
  const auto n = static_cast<size_t>(max_id + 1);
  s.tokens.resize(n);
  for (size_t i = 0; i < n; ++i) {
    auto it = by_id.find(static_cast<int64_t>(i));
    SSD_CHECK(it != by_id.end(), "{}: no token has id {} (ids must be 0..{})", d.name, i, n - 1);
    s.tokens[i] = std::move(it->second);
  }
  const json& merges = d.get(model, "merges", "model");
  SSD_CHECK(merges.is_array(), "{}: model.merges is not an array", d.name);
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      s.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      continue;
    }
    const std::string text = d.str(m, fmt::format("model.merges[{}]", i));
    const size_t sp = text.find(' ');
    SSD_CHECK(sp != std::string::npos && text.find(' ', sp + 1) == std::string::npos,
              "{}: model.merges[{}] = '{}' is not 'left right'", d.name, i, text);
    s.merges.emplace_back(text.substr(0, sp), text.substr(sp + 1));
  }
  s.ignore_merges = d.flag(model, "ignore_merges", false, "model");
  const bool byte_fallback = d.flag(model, "byte_fallback", false, "model");

  // ---- token types and ids ----
  auto id_of = [&](const std::string& text, std::string_view what) {
    for (size_t i = 0; i < n; ++i)
      if (s.tokens[i] == text) return static_cast<int32_t>(i);
    fail(fmt::format("{} '{}' is not in the vocabulary", what, text));
  };
  s.types.assign(n, TokenType::Normal);
  for (const auto& [id, special] : added)
    s.types[static_cast<size_t>(id)] = special ? TokenType::Control : TokenType::UserDefined;
  if (const json* unk = d.opt(model, "unk_token")) {
    s.unk_id = id_of(d.str(*unk, "model.unk_token"), d.name + ": model.unk_token");
    s.types[static_cast<size_t>(s.unk_id)] = TokenType::Unknown;
  }

  // ---- pipeline -> kind, pre-tokenizer, space prefix ----
  const json* norm = d.opt(j, "normalizer");
  const json* pre = d.opt(j, "pre_tokenizer");
  const json* dec = d.opt(j, "decoder");
  const bool byte_level = (pre && pre->dump().find(R"("type":"ByteLevel")") != std::string::npos) ||
                          (dec && is_type(d, *dec, "ByteLevel"));
  if (byte_level) {
    s.kind = TokenizerKind::ByteBpe;
    SSD_CHECK(pre, "{}: byte-level vocabulary without a pre_tokenizer", d.name);
    if (norm) d.unsupported(*norm, "normalizer for a byte-level vocabulary");
    s.pre = byte_level_pre(d, *pre);
  } else {
    s.kind = TokenizerKind::SpmBpe;
    s.pre = PreTokenizerKind::None;
    s.add_space_prefix = spm_space_prefix(d, norm, pre);
    if (byte_fallback)
      for (size_t i = 0; i < n; ++i) {
        const std::string& t = s.tokens[i];
        if (s.types[i] == TokenType::Normal && t.size() == 6 && t.starts_with("<0x") && t[5] == '>')
          s.types[i] = TokenType::Byte;
      }
  }

  // add_bos / bos from a TemplateProcessing post-processor ("<s> $A"), possibly inside a Sequence.
  if (const json* post = d.opt(j, "post_processor")) {
    std::vector<const json*> procs{post};
    if (is_type(d, *post, "Sequence"))
      for (const json& p : d.get(*post, "processors", "post_processor")) procs.push_back(&p);
    for (const json* p : procs) {
      if (!is_type(d, *p, "TemplateProcessing")) continue;
      const json& single = d.get(*p, "single", "post_processor");
      if (!single.is_array() || single.empty()) continue;
      auto special_at = [&](const json& item) -> const json* {
        const json* st = d.opt(item, "SpecialToken");
        return st ? d.opt(*st, "id") : nullptr;
      };
      if (const json* b = special_at(single.front())) {
        s.add_bos = true;
        s.bos_id = id_of(d.str(*b, "post_processor.single"), d.name + ": post_processor BOS");
      }
      if (single.size() > 1)
        if (const json* e = special_at(single.back())) {
          s.add_eos = true;
          s.eos_id = id_of(d.str(*e, "post_processor.single"), d.name + ": post_processor EOS");
        }
    }
  }

  // ---- tokenizer_config.json ----
  if (!config_json.empty()) {
    const Doc c{config_name};
    const json cfg = parse(config_json, config_name);
    SSD_CHECK(cfg.is_object(), "{}: top level is not a JSON object", config_name);
    auto set_id = [&](std::string_view key, int32_t& id) {
      if (auto t = config_token(c, cfg, key)) id = id_of(*t, fmt::format("{}: {}", config_name, key));
    };
    set_id("bos_token", s.bos_id);
    set_id("eos_token", s.eos_id);
    set_id("unk_token", s.unk_id);
    set_id("pad_token", s.pad_id);
    s.add_bos = c.flag(cfg, "add_bos_token", s.add_bos, "") && s.bos_id >= 0;
    s.add_eos = c.flag(cfg, "add_eos_token", s.add_eos, "") && s.eos_id >= 0;
    if (const json* t = c.opt(cfg, "chat_template")) {
      if (t->is_string()) {
        s.chat_template = t->get<std::string>();
      } else {
        // A list of named templates: take "default", else the first.
        SSD_CHECK(t->is_array() && !t->empty(), "{}: chat_template is neither a string nor a "
                  "list of templates", config_name);
        const json* pick = &(*t)[0];
        for (const json& e : *t)
          if (c.opt(e, "name") && *c.opt(e, "name") == "default") pick = &e;
        s.chat_template = c.str(c.get(*pick, "template", "chat_template[]"), "chat_template[].template");
      }
    }
  }
  add_default_eog_ids(s);
  validate_tokenizer_spec(s);
  return s;
}

TokenizerSpec tokenizer_spec_from_hf_file(const std::string& tokenizer_json_path) {
  auto slurp = [](const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    SSD_CHECK(f, "{}: cannot open", p.string());
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  const std::string text = slurp(tokenizer_json_path);
  const auto cfg_path = std::filesystem::path(tokenizer_json_path).parent_path() / "tokenizer_config.json";
  const std::string cfg = std::filesystem::exists(cfg_path) ? slurp(cfg_path) : std::string();
  return tokenizer_spec_from_hf_json(text, cfg, tokenizer_json_path, cfg_path.string());
}

}  // namespace ssd
