// Command-line flags, declared once. Each subcommand has an args struct whose visit() lists its
// fields with name, help and options; that single list drives parsing, the --help text (every
// flag with its default) and the printout of the resolved configuration (text and JSON, for
// stats files). Nothing else names a flag, so the three can never disagree.
//
//   struct GenerateArgs {
//     std::filesystem::path model;
//     int n_predict = 128;
//     float temp = 0;
//     template <class V> void visit(V&& v) {
//       v(model, "model", "path to a GGUF file or a safetensors directory", kRequired);
//       v(n_predict, "n", "tokens to generate", {.short_name = 'n', .min = 0});
//       v(temp, "temp", "sampling temperature, 0 = greedy", {.min = 0});
//     }
//   };
//   GenerateArgs a;
//   auto r = parse(argc - 2, argv + 2, a);          // the tokens after "ssd generate"
//   if (r.help) { fmt::print("{}", help_text(GenerateArgs{}, "ssd generate", "...")); ... }
//
// Syntax: --name value, --name=value, -s value / -s=value for a short alias; a bool flag is set by
// --name and takes a value only inline (--name=false) or as --no-name; "--" ends the flags. A
// value that starts with "--" must be given inline (--prompt=--x). -h / --help ask for help.
// Every error is an ssd::Error with one line naming the flag and the value.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ssd {

struct FlagOpts {
  bool required = false;
  char short_name = 0;                    // e.g. 'n' accepts -n; 0 = none
  std::optional<double> min, max;         // inclusive range, numeric flags only
  std::vector<std::string_view> choices;  // allowed values, string flags only
  bool must_exist = false;                // path flags: the path must exist when given
};
inline const FlagOpts kRequired{.required = true};

// The field types a flag can bind to. An std::optional field starts unset and reports "unset".
using FlagField =
    std::variant<bool*, int32_t*, int64_t*, uint32_t*, uint64_t*, float*, double*, std::string*,
                 std::filesystem::path*, std::optional<int32_t>*, std::optional<int64_t>*,
                 std::optional<uint64_t>*, std::optional<float>*, std::optional<double>*,
                 std::optional<std::string>*, std::optional<std::filesystem::path>*>;

// One declared flag: where its value lives plus its declaration. Pointers into an args object,
// valid while that object lives.
struct FlagSpec {
  FlagField field;
  std::string_view name;
  std::string_view help;
  FlagOpts opts;
};

template <class Args>
std::vector<FlagSpec> flag_specs(Args& args) {
  std::vector<FlagSpec> specs;
  args.visit([&specs](auto& field, std::string_view name, std::string_view help,
                      const FlagOpts& opts = {}) {
    specs.push_back(FlagSpec{FlagField(&field), name, help, opts});
  });
  return specs;
}

struct ParseOptions {
  bool allow_positional = false;  // otherwise a bare word is an error
};

struct ParseResult {
  bool help = false;                    // -h / --help was given; nothing else was parsed
  std::vector<std::string> positional;  // bare words and everything after "--"
};

// ---- non-template core (flags.cpp), working on a spec list ----

ParseResult parse_flags(std::span<const std::string> tokens, const std::vector<FlagSpec>& specs,
                        const ParseOptions& opts = {});
std::string help_text(const std::vector<FlagSpec>& specs, std::string_view command,
                      std::string_view summary);
std::string resolved_text(const std::vector<FlagSpec>& specs);
nlohmann::json resolved_json(const std::vector<FlagSpec>& specs);

// The closest flag name to `name` by edit distance, when close enough to be a likely typo.
std::optional<std::string_view> closest_flag(std::string_view name,
                                             const std::vector<FlagSpec>& specs);

// ---- the typed front: one call per use ----

// Parses tokens into args. On --help returns {help = true} without touching args.
template <class Args>
ParseResult parse(std::span<const std::string> tokens, Args& args, const ParseOptions& opts = {}) {
  return parse_flags(tokens, flag_specs(args), opts);
}

// argv[0, argc) are the flag tokens only: pass argc - 2, argv + 2 after "ssd <command>".
template <class Args>
ParseResult parse(int argc, const char* const* argv, Args& args, const ParseOptions& opts = {}) {
  std::vector<std::string> tokens(argv, argv + argc);
  return parse(std::span<const std::string>(tokens), args, opts);
}

// The values currently in `args` are shown as defaults, so pass a default-constructed struct.
template <class Args>
std::string help_text(const Args& args, std::string_view command, std::string_view summary) {
  Args copy = args;
  return help_text(flag_specs(copy), command, summary);
}

// The start of every command: parses argv into args, or on --help prints the command's help (the
// flags with their defaults, those of a default-constructed Args) and returns true, after which
// the command exits 0.
template <class Args>
bool parse_or_print_help(int argc, const char* const* argv, Args& args, std::string_view command,
                         std::string_view summary) {
  if (!parse(argc, argv, args).help) return false;
  const std::string text = help_text(Args{}, command, summary);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return true;
}

template <class Args>
std::string resolved_text(const Args& args) {
  Args copy = args;
  return resolved_text(flag_specs(copy));
}

template <class Args>
nlohmann::json resolved_json(const Args& args) {
  Args copy = args;
  return resolved_json(flag_specs(copy));
}

}  // namespace ssd
