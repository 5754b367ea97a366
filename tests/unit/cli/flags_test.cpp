// The flags registry: parsing syntax, every error class (with the message naming the flag and
// the value), --help listing every flag with its default, and the resolved text / JSON.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "launch/cli/flags.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

struct TestArgs {
  std::filesystem::path model;
  int32_t n_predict = 128;
  float temp = 0;
  double top_p = 1;
  int64_t offset = -5;
  uint64_t seed = 42;
  uint32_t threads = 2;
  bool verbose = false;
  bool color = true;
  std::string backend = "cpu";
  std::string prompt;
  std::optional<int32_t> ctx;
  std::optional<std::string> stats;

  template <class V>
  void visit(V&& v) {
    v(model, "model", "path to a GGUF file or a safetensors directory", kRequired);
    v(n_predict, "n", "tokens to generate", {.short_name = 'n', .min = 0});
    v(temp, "temp", "sampling temperature, 0 = greedy", {.min = 0, .max = 2});
    v(top_p, "top-p", "nucleus mass", {.min = 0.0001, .max = 1});
    v(offset, "offset", "a signed 64-bit value");
    v(seed, "seed", "sampling seed");
    v(threads, "threads", "worker threads", {.short_name = 't', .max = 256});
    v(verbose, "verbose", "print more", {.short_name = 'v'});
    v(color, "color", "colour the output");
    v(backend, "backend", "compute backend", {.choices = {"cpu", "cuda"}});
    v(prompt, "prompt", "the prompt text");
    v(ctx, "ctx", "context length (default: the model's)");
    v(stats, "stats", "write a JSON stats file here");
  }
};

ParseResult parse_tokens(std::vector<std::string> tokens, TestArgs& a, ParseOptions o = {}) {
  return parse(std::span<const std::string>(tokens), a, o);
}

// Runs the parse and returns the error message ("" when it did not throw).
std::string error_of(std::vector<std::string> tokens) {
  TestArgs a;
  try {
    parse_tokens(std::move(tokens), a);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Flags, ParsesEverySyntaxAndType) {
  TestArgs a;
  const auto r = parse_tokens({"--model", "/m.gguf", "-n", "7", "--temp=0.7", "--top-p", "0.9",
                               "--offset", "-9000000000", "--seed=18446744073709551615", "-t=4",
                               "-v", "--no-color", "--backend", "cuda", "--prompt=a=b --c",
                               "--ctx", "2048"},
                              a);
  EXPECT_FALSE(r.help);
  EXPECT_TRUE(r.positional.empty());
  EXPECT_EQ(a.model, "/m.gguf");
  EXPECT_EQ(a.n_predict, 7);
  EXPECT_EQ(a.temp, 0.7f);
  EXPECT_EQ(a.top_p, 0.9);
  EXPECT_EQ(a.offset, -9000000000);
  EXPECT_EQ(a.seed, 18446744073709551615ull);
  EXPECT_EQ(a.threads, 4u);
  EXPECT_TRUE(a.verbose);
  EXPECT_FALSE(a.color);
  EXPECT_EQ(a.backend, "cuda");
  EXPECT_EQ(a.prompt, "a=b --c");  // only the first '=' splits
  ASSERT_TRUE(a.ctx.has_value());
  EXPECT_EQ(*a.ctx, 2048);
  EXPECT_FALSE(a.stats.has_value());
}

TEST(Flags, DefaultsStayWhenNotGiven) {
  TestArgs a;
  parse_tokens({"--model=x"}, a);
  const TestArgs d;
  EXPECT_EQ(a.n_predict, d.n_predict);
  EXPECT_EQ(a.offset, d.offset);
  EXPECT_EQ(a.color, d.color);
  EXPECT_EQ(a.backend, d.backend);
  EXPECT_FALSE(a.ctx.has_value());
}

TEST(Flags, BoolForms) {
  TestArgs a;
  parse_tokens({"--model=x", "--verbose=true", "--color=off"}, a);
  EXPECT_TRUE(a.verbose);
  EXPECT_FALSE(a.color);
  TestArgs b;
  // A bool flag never takes the next word: "yes" is a stray argument here.
  EXPECT_THROW(parse_tokens({"--model=x", "--verbose", "yes"}, b), Error);
  EXPECT_EQ(error_of({"--model=x", "--verbose=maybe"}),
            "--verbose: 'maybe' is not a boolean (use true/false, 1/0, yes/no, on/off)");
  EXPECT_EQ(error_of({"--model=x", "--no-color=1"}), "--no-color takes no value (got '1')");
  EXPECT_EQ(error_of({"--model=x", "--no-temp"}),
            "unknown flag --no-temp (--temp is not a boolean flag)");
}

TEST(Flags, UnknownFlagSuggestsClosest) {
  EXPECT_EQ(error_of({"--model=x", "--tmep", "1"}), "unknown flag --tmep (did you mean --temp?)");
  EXPECT_EQ(error_of({"--model=x", "--thread=2"}),
            "unknown flag --thread (did you mean --threads?)");
  EXPECT_EQ(error_of({"--modle", "x"}), "unknown flag --modle (did you mean --model?)");
  EXPECT_EQ(error_of({"--model=x", "--frobnicate"}),
            "unknown flag --frobnicate (see --help for the list)");
  EXPECT_EQ(error_of({"--model=x", "-q"}), "unknown flag -q (see --help for the list)");
}

TEST(Flags, MissingValue) {
  EXPECT_EQ(error_of({"--model=x", "--temp"}), "--temp: missing value");
  EXPECT_EQ(error_of({"--model", "--temp", "1"}), "--model: missing value");
  EXPECT_EQ(error_of({"--model=x", "--prompt", "-n", "3"}), "--prompt: missing value");
  // A negative number or a lone "-" is a value, not a flag.
  TestArgs a;
  parse_tokens({"--model", "-", "--offset", "-3"}, a);
  EXPECT_EQ(a.model, "-");
  EXPECT_EQ(a.offset, -3);
}

TEST(Flags, ValuesThatDoNotParse) {
  EXPECT_EQ(error_of({"--model=x", "--temp", "abc"}), "--temp: 'abc' is not a number");
  EXPECT_EQ(error_of({"--model=x", "--temp", "0.5x"}), "--temp: '0.5x' is not a number");
  EXPECT_EQ(error_of({"--model=x", "--temp", "inf"}), "--temp: 'inf' is not a finite number");
  EXPECT_EQ(error_of({"--model=x", "--temp", "1e60"}), "--temp: '1e60' is out of range for a float");
  EXPECT_EQ(error_of({"--model=x", "-n", "1.5"}), "--n: '1.5' is not an integer");
  EXPECT_EQ(error_of({"--model=x", "-n", ""}), "--n: '' is not an integer");
  EXPECT_EQ(error_of({"--model=x", "-n", "3000000000"}),
            "--n: '3000000000' does not fit in a 32-bit integer");
  EXPECT_EQ(error_of({"--model=x", "--seed", "-1"}),
            "--seed: '-1' is not a non-negative integer");
  EXPECT_EQ(error_of({"--model=x", "--backend", "gpu"}),
            "--backend: 'gpu' is not one of cpu, cuda");
}

TEST(Flags, RangeChecks) {
  EXPECT_EQ(error_of({"--model=x", "--temp", "2.5"}), "--temp: 2.5 is out of range [0, 2]");
  EXPECT_EQ(error_of({"--model=x", "-n", "-1"}), "--n: -1 is out of range (must be >= 0)");
  EXPECT_EQ(error_of({"--model=x", "-t", "300"}), "--threads: 300 is out of range (must be <= 256)");
  EXPECT_EQ(error_of({"--model=x", "--top-p", "0"}),
            "--top-p: 0 is out of range [0.0001, 1]");
  // The bounds themselves are allowed.
  TestArgs a;
  parse_tokens({"--model=x", "--temp", "2", "-n", "0", "--top-p=1"}, a);
  EXPECT_EQ(a.temp, 2.0f);
  EXPECT_EQ(a.n_predict, 0);
}

TEST(Flags, RequiredAndRepeated) {
  EXPECT_EQ(error_of({"-n", "3"}), "missing required flag --model");
  EXPECT_EQ(error_of({"--model=x", "-n", "3", "--n=4"}), "--n is given more than once");
}

TEST(Flags, HelpShortCircuitsWithoutTouchingArgs) {
  TestArgs a;
  const auto r = parse_tokens({"-n", "5", "--bogus", "--help"}, a);
  EXPECT_TRUE(r.help);
  EXPECT_EQ(a.n_predict, 128);
  EXPECT_TRUE(parse_tokens({"-h"}, a).help);
  // After "--" it is just a word.
  TestArgs b;
  const auto r2 = parse_tokens({"--model=x", "--", "--help", "tail"}, b, {.allow_positional = true});
  EXPECT_FALSE(r2.help);
  EXPECT_EQ(r2.positional, (std::vector<std::string>{"--help", "tail"}));
  EXPECT_EQ(error_of({"--model=x", "--", "--help"}), "unexpected argument '--help' after --");
}

TEST(Flags, PositionalOnlyWhenAllowed) {
  EXPECT_EQ(error_of({"--model=x", "stray"}), "unexpected argument 'stray' (flags start with --)");
  TestArgs a;
  const auto r = parse_tokens({"one", "--model=x", "two"}, a, {.allow_positional = true});
  EXPECT_EQ(r.positional, (std::vector<std::string>{"one", "two"}));
}

TEST(Flags, ArgvOverload) {
  const char* argv[] = {"ssd", "generate", "--model", "m.gguf", "-n", "9"};
  TestArgs a;
  parse(4, argv + 2, a);
  EXPECT_EQ(a.model, "m.gguf");
  EXPECT_EQ(a.n_predict, 9);
}

struct PathArgs {
  std::filesystem::path p;
  template <class V>
  void visit(V&& v) {
    v(p, "p", "an existing path", {.must_exist = true});
  }
};

TEST(Flags, MustExistPaths) {
  PathArgs a;
  std::vector<std::string> ok = {"--p", "/"};
  parse(std::span<const std::string>(ok), a);
  EXPECT_EQ(a.p, "/");
  std::vector<std::string> bad = {"--p", "/no/such/file.gguf"};
  try {
    parse(std::span<const std::string>(bad), a);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--p: '/no/such/file.gguf' does not exist");
  }
}

// Declaration mistakes in an args struct are bugs, reported when the struct is first used.
struct DuplicateArgs {
  int a = 0, b = 0;
  template <class V>
  void visit(V&& v) {
    v(a, "x", "first");
    v(b, "x", "second");
  }
};
struct RangedStringArgs {
  std::string s;
  template <class V>
  void visit(V&& v) {
    v(s, "s", "a string", {.min = 1});
  }
};
struct ReservedNameArgs {
  bool h = false;
  template <class V>
  void visit(V&& v) {
    v(h, "help", "clashes with --help");
  }
};

TEST(Flags, DeclarationMistakesAreReported) {
  std::vector<std::string> none;
  DuplicateArgs d;
  RangedStringArgs r;
  ReservedNameArgs h;
  EXPECT_THROW(parse(std::span<const std::string>(none), d), Error);
  EXPECT_THROW(parse(std::span<const std::string>(none), r), Error);
  EXPECT_THROW(parse(std::span<const std::string>(none), h), Error);
  EXPECT_THROW(help_text(d, "x", ""), Error);
}

TEST(Flags, HelpListsEveryFlagWithDefault) {
  const std::string h = help_text(TestArgs{}, "ssd generate", "Generate text.");
  EXPECT_EQ(h.rfind("usage: ssd generate [flags]\n\nGenerate text.\n\nflags:\n", 0), 0u) << h;
  // One line per flag, the descriptions aligned after the widest left column (18 chars):
  // the name, the help, and the default (or "required").
  const std::vector<std::string> want = {
      "    --model PATH    path to a GGUF file or a safetensors directory (required)\n",
      "-n, --n INT         tokens to generate [default: 128, >= 0]\n",
      "    --temp NUM      sampling temperature, 0 = greedy [default: 0, range [0, 2]]\n",
      "    --top-p NUM     nucleus mass [default: 1, range [0.0001, 1]]\n",
      "    --offset INT    a signed 64-bit value [default: -5]\n",
      "    --seed UINT     sampling seed [default: 42]\n",
      "-t, --threads UINT  worker threads [default: 2, <= 256]\n",
      "-v, --verbose       print more [default: false]\n",
      "    --color         colour the output; --no-color turns it off [default: true]\n",
      "    --backend STR   compute backend [default: cpu] {cpu, cuda}\n",
      "    --prompt STR    the prompt text [default: \"\"]\n",
      "    --ctx INT       context length (default: the model's) [default: unset]\n",
      "    --stats STR     write a JSON stats file here [default: unset]\n",
      "-h, --help          show this help\n",
  };
  for (const auto& line : want) EXPECT_NE(h.find("  " + line), std::string::npos) << line << h;
  EXPECT_EQ(std::count(h.begin(), h.end(), '\n'), 5 + static_cast<long>(want.size()));
}

TEST(Flags, ResolvedTextAndJson) {
  TestArgs a;
  parse_tokens({"--model", "/m.gguf", "--temp=0.7", "--ctx", "512", "--prompt", "hi \"there\""},
               a);
  const std::string t = resolved_text(a);
  EXPECT_NE(t.find("model   = /m.gguf\n"), std::string::npos) << t;
  EXPECT_NE(t.find("temp    = 0.7\n"), std::string::npos) << t;
  EXPECT_NE(t.find("ctx     = 512\n"), std::string::npos) << t;
  EXPECT_NE(t.find("stats   = unset\n"), std::string::npos) << t;
  EXPECT_NE(t.find("verbose = false\n"), std::string::npos) << t;

  const nlohmann::json j = resolved_json(a);
  EXPECT_EQ(j.size(), 13u);
  EXPECT_EQ(j["model"], "/m.gguf");
  EXPECT_EQ(j["n"], 128);
  EXPECT_EQ(j["temp"].get<double>(), 0.7);  // the float's shortest decimal, not 0.69999998...
  EXPECT_EQ(j["seed"].get<uint64_t>(), 42u);
  EXPECT_EQ(j["offset"], -5);
  EXPECT_EQ(j["color"], true);
  EXPECT_EQ(j["prompt"], "hi \"there\"");
  EXPECT_EQ(j["ctx"], 512);
  EXPECT_TRUE(j["stats"].is_null());
  // Round trip through the text form of the JSON.
  EXPECT_EQ(nlohmann::json::parse(j.dump()), j);
}

}  // namespace
}  // namespace ssd
