// ssd_tokenize: the tokenizer as a command-line tool, for comparing against reference
// implementations from scripts (tests/reference/make_tokenizer_expectations.py --live) and for
// measuring encode speed.
//
//   ssd_tokenize MODEL --input FILE   FILE has one JSON string per line; prints one line of
//                                      space-separated ids per string (no BOS, specials parsed
//                                      unless --no-special)
//   ssd_tokenize MODEL --bench FILE    encodes FILE's bytes, reports MB/s, checks the round trip
// MODEL is a .gguf file or a Hugging Face tokenizer.json.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "runtime/core/error.h"
#include "runtime/io/gguf_file.h"
#include "runtime/tokenizer/gguf_tokenizer.h"
#include "runtime/tokenizer/hf_tokenizer.h"
#include "runtime/tokenizer/tokenizer.h"

namespace {

ssd::TokenizerSpec load_spec(const std::string& path) {
  if (path.size() >= 5 && path.substr(path.size() - 5) == ".gguf")
    return ssd::tokenizer_spec_from_gguf(ssd::GgufFile::open(path));
  return ssd::tokenizer_spec_from_hf_file(path);
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  SSD_CHECK(f, "{}: cannot open", path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int encode_lines(const ssd::Tokenizer& tok, const std::string& path, bool parse_special) {
  std::ifstream f(path, std::ios::binary);
  SSD_CHECK(f, "{}: cannot open", path);
  std::string line, out;
  for (size_t n = 1; std::getline(f, line); ++n) {
    std::string text;
    try {
      text = nlohmann::json::parse(line).get<std::string>();
    } catch (const nlohmann::json::exception& e) {
      ssd::fail(fmt::format("{}:{}: not a JSON string: {}", path, n, e.what()));
    }
    out.clear();
    for (int32_t id : tok.encode(text, /*add_bos=*/false, parse_special)) {
      if (!out.empty()) out += ' ';
      out += std::to_string(id);
    }
    std::cout << out << '\n';
  }
  return 0;
}

int bench(const ssd::Tokenizer& tok, const std::string& path) {
  const std::string text = slurp(path);
  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  const auto ids = tok.encode(text, false, false);
  const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const bool round_trip = tok.decode(ids) == text;
  const double mb = static_cast<double>(text.size()) / 1e6;
  std::printf("%zu bytes -> %zu tokens: %.2f MB/s (CPU time %.3f s), %.2f MB/s (wall %.3f s); "
              "round trip %s\n",
              text.size(), ids.size(), mb / cpu, cpu, mb / wall, wall,
              round_trip ? "exact" : "DIFFERS");
  return round_trip ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string model, input, bench_file;
    bool parse_special = true;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--input" && i + 1 < argc) input = argv[++i];
      else if (a == "--bench" && i + 1 < argc) bench_file = argv[++i];
      else if (a == "--no-special") parse_special = false;
      else if (model.empty() && !a.starts_with("--")) model = a;
      else ssd::fail(fmt::format("unexpected argument '{}'", a));
    }
    SSD_CHECK(!model.empty() && (input.empty() != bench_file.empty()),
              "usage: ssd_tokenize MODEL(.gguf|tokenizer.json) (--input FILE.jsonl [--no-special] "
              "| --bench FILE)");
    const ssd::Tokenizer tok(load_spec(model));
    return input.empty() ? bench(tok, bench_file) : encode_lines(tok, input, parse_special);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ssd_tokenize: %s\n", e.what());
    return 2;
  }
}
