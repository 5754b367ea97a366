// The type-erased half of the flags registry (see flags.h): parsing and printing work on a list
// of FlagSpec whose FlagField variant says what each value is. Parsing is strict on purpose: a
// flag given twice, a number with trailing junk, a bool flag swallowing the next word are all
// errors, because a silently misread flag wastes a benchmark run.
#include "launch/cli/flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <type_traits>

#include "runtime/core/error.h"

namespace ssd {
namespace {

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

template <class T>
struct Unwrap {
  using type = T;
};
template <class T>
struct Unwrap<std::optional<T>> {
  using type = T;
};

template <class T>
constexpr bool kIsNumber = std::is_arithmetic_v<T> && !std::is_same_v<T, bool>;

// The value type behind a field pointer, without std::optional.
template <class Ptr>
using ValueOf = typename Unwrap<std::remove_pointer_t<Ptr>>::type;

template <class T>
std::string_view type_label() {
  if constexpr (std::is_same_v<T, bool>) return "";
  else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) return "NUM";
  else if constexpr (std::is_unsigned_v<T>) return "UINT";
  else if constexpr (std::is_integral_v<T>) return "INT";
  else if constexpr (std::is_same_v<T, std::filesystem::path>) return "PATH";
  else return "STR";
}

std::string dashed(const FlagSpec& s) { return fmt::format("--{}", s.name); }

// ---- value parsing ----

bool parse_bool(std::string_view v, bool& out) {
  if (v == "true" || v == "1" || v == "yes" || v == "on") return out = true, true;
  if (v == "false" || v == "0" || v == "no" || v == "off") return out = false, true;
  return false;
}

template <class T>
T parse_number(const FlagSpec& s, std::string_view v) {
  std::string_view body = v;
  if (!body.empty() && body[0] == '+') body.remove_prefix(1);
  T out{};
  const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), out);
  const bool whole = ec == std::errc() && end == body.data() + body.size() && !body.empty();
  if constexpr (std::is_floating_point_v<T>) {
    SSD_CHECK(ec != std::errc::result_out_of_range, "{}: '{}' is out of range for a {}",
              dashed(s), v, std::is_same_v<T, float> ? "float" : "double");
    SSD_CHECK(whole, "{}: '{}' is not a number", dashed(s), v);
    SSD_CHECK(std::isfinite(out), "{}: '{}' is not a finite number", dashed(s), v);
  } else {
    SSD_CHECK(ec != std::errc::result_out_of_range, "{}: '{}' does not fit in a {}-bit {}",
              dashed(s), v, 8 * sizeof(T), std::is_signed_v<T> ? "integer" : "unsigned integer");
    SSD_CHECK(whole, "{}: '{}' is not {}", dashed(s), v,
              std::is_signed_v<T> ? "an integer" : "a non-negative integer");
  }
  return out;
}

void check_range(const FlagSpec& s, std::string_view v, double x) {
  const auto& o = s.opts;
  if (o.min && o.max)
    SSD_CHECK(x >= *o.min && x <= *o.max, "{}: {} is out of range [{}, {}]", dashed(s), v, *o.min,
              *o.max);
  else if (o.min)
    SSD_CHECK(x >= *o.min, "{}: {} is out of range (must be >= {})", dashed(s), v, *o.min);
  else if (o.max)
    SSD_CHECK(x <= *o.max, "{}: {} is out of range (must be <= {})", dashed(s), v, *o.max);
}

template <class T>
T parse_value(const FlagSpec& s, std::string_view v) {
  if constexpr (std::is_same_v<T, bool>) {
    bool b = false;
    SSD_CHECK(parse_bool(v, b), "{}: '{}' is not a boolean (use true/false, 1/0, yes/no, on/off)",
              dashed(s), v);
    return b;
  } else if constexpr (kIsNumber<T>) {
    const T x = parse_number<T>(s, v);
    check_range(s, v, static_cast<double>(x));
    return x;
  } else {
    if (!s.opts.choices.empty()) {
      const bool ok = std::find(s.opts.choices.begin(), s.opts.choices.end(), v) !=
                      s.opts.choices.end();
      SSD_CHECK(ok, "{}: '{}' is not one of {}", dashed(s), v, fmt::join(s.opts.choices, ", "));
    }
    if constexpr (std::is_same_v<T, std::filesystem::path>) {
      std::error_code ec;
      SSD_CHECK(!s.opts.must_exist || std::filesystem::exists(v, ec), "{}: '{}' does not exist",
                dashed(s), v);
    }
    return T(v);
  }
}

void set_value(const FlagSpec& s, std::string_view v) {
  std::visit([&](auto* field) { *field = parse_value<ValueOf<decltype(field)>>(s, v); }, s.field);
}

bool is_bool(const FlagSpec& s) { return std::holds_alternative<bool*>(s.field); }

// ---- value printing ----

template <class T>
std::string show(const T& v) {
  if constexpr (std::is_same_v<T, std::filesystem::path>) return v.empty() ? "\"\"" : v.string();
  else if constexpr (std::is_same_v<T, std::string>) return v.empty() ? "\"\"" : v;
  else return fmt::format("{}", v);
}

std::string show_field(const FlagSpec& s) {
  return std::visit(
      [](auto* field) -> std::string {
        using F = std::remove_pointer_t<decltype(field)>;
        if constexpr (IsOptional<F>::value) return *field ? show(**field) : "unset";
        else return show(*field);
      },
      s.field);
}

template <class T>
nlohmann::json to_json(const T& v) {
  // A float goes through its shortest decimal form, so 0.7f is stored as 0.7 and not as
  // 0.699999988079071.
  if constexpr (std::is_same_v<T, float>) return std::stod(fmt::format("{}", v));
  else if constexpr (std::is_same_v<T, std::filesystem::path>) return v.string();
  else return v;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1] ? 1u : 0u)});
      diag = up;
    }
  }
  return row[b.size()];
}

// Declaration mistakes are bugs in an args struct, reported as such.
void check_specs(const std::vector<FlagSpec>& specs) {
  for (size_t i = 0; i < specs.size(); ++i) {
    const FlagSpec& s = specs[i];
    SSD_CHECK(!s.name.empty() && s.name != "help" && s.opts.short_name != 'h',
              "internal error: flag '{}' uses an empty or reserved name", s.name);
    const bool numeric = std::visit(
        [](auto* f) { return kIsNumber<ValueOf<decltype(f)>>; }, s.field);
    SSD_CHECK(numeric || (!s.opts.min && !s.opts.max),
              "internal error: flag --{} has a range but is not numeric", s.name);
    for (size_t j = 0; j < i; ++j)
      SSD_CHECK(specs[j].name != s.name &&
                    (s.opts.short_name == 0 || specs[j].opts.short_name != s.opts.short_name),
                "internal error: flag --{} is declared twice", s.name);
  }
}

const FlagSpec* find_long(const std::vector<FlagSpec>& specs, std::string_view name) {
  for (const auto& s : specs)
    if (s.name == name) return &s;
  return nullptr;
}

const FlagSpec* find_short(const std::vector<FlagSpec>& specs, char c) {
  for (const auto& s : specs)
    if (s.opts.short_name == c) return &s;
  return nullptr;
}

// "-x" with a letter: an option, not a value such as "-1" or "-".
bool is_short_option(std::string_view t) {
  return t.size() >= 2 && t[0] == '-' && t[1] != '-' &&
         ((t[1] >= 'a' && t[1] <= 'z') || (t[1] >= 'A' && t[1] <= 'Z'));
}

// Suggestions are by long name; a one-letter alias is too short for an edit distance to mean much.
[[noreturn]] void unknown_flag(bool is_long, std::string_view name,
                               const std::vector<FlagSpec>& specs) {
  const std::string shown = fmt::format("{}{}", is_long ? "--" : "-", name);
  if (const auto near = is_long ? closest_flag(name, specs) : std::nullopt)
    fail(fmt::format("unknown flag {} (did you mean --{}?)", shown, *near));
  fail(fmt::format("unknown flag {} (see --help for the list)", shown));
}

}  // namespace

std::optional<std::string_view> closest_flag(std::string_view name,
                                             const std::vector<FlagSpec>& specs) {
  std::optional<std::string_view> best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& s : specs) {
    const size_t d = edit_distance(name, s.name);
    if (d < best_d) best_d = d, best = s.name;
  }
  // A typo changes a couple of characters; beyond that a suggestion is noise.
  if (best && best_d <= std::max<size_t>(2, name.size() / 3)) return best;
  return std::nullopt;
}

ParseResult parse_flags(std::span<const std::string> tokens, const std::vector<FlagSpec>& specs,
                        const ParseOptions& opts) {
  check_specs(specs);
  ParseResult r;
  for (const auto& t : tokens) {
    if (t == "--") break;
    if (t == "--help" || t == "-h") return ParseResult{.help = true, .positional = {}};
  }

  std::vector<const FlagSpec*> seen;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string_view t = tokens[i];
    if (t == "--") {
      SSD_CHECK(opts.allow_positional || i + 1 == tokens.size(),
                "unexpected argument '{}' after --", i + 1 < tokens.size() ? tokens[i + 1] : "");
      for (size_t j = i + 1; j < tokens.size(); ++j) r.positional.push_back(tokens[j]);
      break;
    }
    const bool is_long = t.starts_with("--");
    if (!is_long && !is_short_option(t)) {
      SSD_CHECK(opts.allow_positional, "unexpected argument '{}' (flags start with --)", t);
      r.positional.emplace_back(t);
      continue;
    }
    // Split "--name=value" / "-n=value".
    const std::string_view body = t.substr(is_long ? 2 : 1);
    const size_t eq = body.find('=');
    const std::string_view name = body.substr(0, eq);
    std::optional<std::string_view> value;
    if (eq != std::string_view::npos) value = body.substr(eq + 1);

    const FlagSpec* s = nullptr;
    bool negated = false;
    if (is_long) {
      s = find_long(specs, name);
      if (!s && name.starts_with("no-")) {
        if (const FlagSpec* base = find_long(specs, name.substr(3))) {
          SSD_CHECK(is_bool(*base), "unknown flag --{} (--{} is not a boolean flag)", name,
                    base->name);
          SSD_CHECK(!value, "--{} takes no value (got '{}')", name, value.value_or(""));
          s = base;
          negated = true;
        }
      }
    } else if (name.size() == 1) {
      s = find_short(specs, name[0]);
    }
    if (!s) unknown_flag(is_long, name, specs);

    SSD_CHECK(std::find(seen.begin(), seen.end(), s) == seen.end(), "{} is given more than once",
              dashed(*s));
    seen.push_back(s);

    if (is_bool(*s)) {
      *std::get<bool*>(s->field) = negated ? false : value ? parse_value<bool>(*s, *value) : true;
      continue;
    }
    if (!value) {
      const bool has_next = i + 1 < tokens.size() && !tokens[i + 1].starts_with("--") &&
                            !(is_short_option(tokens[i + 1]) &&
                              find_short(specs, tokens[i + 1][1]) != nullptr);
      SSD_CHECK(has_next, "{}: missing value", dashed(*s));
      value = tokens[++i];
    }
    set_value(*s, *value);
  }

  std::vector<std::string> missing;
  for (const auto& s : specs)
    if (s.opts.required && std::find(seen.begin(), seen.end(), &s) == seen.end())
      missing.push_back(dashed(s));
  SSD_CHECK(missing.empty(), "missing required flag{} {}", missing.size() > 1 ? "s" : "",
            fmt::join(missing, ", "));
  return r;
}

std::string help_text(const std::vector<FlagSpec>& specs, std::string_view command,
                      std::string_view summary) {
  check_specs(specs);
  std::vector<std::pair<std::string, std::string>> rows;  // (left column, description)
  for (const auto& s : specs) {
    const std::string_view label =
        std::visit([](auto* f) { return type_label<ValueOf<decltype(f)>>(); }, s.field);
    std::string left = s.opts.short_name ? fmt::format("-{}, ", s.opts.short_name) : "    ";
    left += is_bool(s) ? fmt::format("--{}", s.name) : fmt::format("--{} {}", s.name, label);
    std::string desc(s.help);
    if (is_bool(s) && *std::get<bool*>(s.field)) desc += fmt::format("; --no-{} turns it off", s.name);
    if (s.opts.required) {
      desc += " (required)";
    } else {
      desc += fmt::format(" [default: {}", show_field(s));
      if (s.opts.min && s.opts.max) desc += fmt::format(", range [{}, {}]", *s.opts.min, *s.opts.max);
      else if (s.opts.min) desc += fmt::format(", >= {}", *s.opts.min);
      else if (s.opts.max) desc += fmt::format(", <= {}", *s.opts.max);
      desc += "]";
    }
    if (!s.opts.choices.empty()) desc += fmt::format(" {{{}}}", fmt::join(s.opts.choices, ", "));
    rows.emplace_back(std::move(left), std::move(desc));
  }
  rows.emplace_back("-h, --help", "show this help");
  size_t width = 0;
  for (const auto& [l, d] : rows) width = std::max(width, l.size());

  std::string out = fmt::format("usage: {} [flags]\n", command);
  if (!summary.empty()) out += fmt::format("\n{}\n", summary);
  out += "\nflags:\n";
  for (const auto& [l, d] : rows) out += fmt::format("  {:<{}}  {}\n", l, width, d);
  return out;
}

std::string resolved_text(const std::vector<FlagSpec>& specs) {
  size_t width = 0;
  for (const auto& s : specs) width = std::max(width, s.name.size());
  std::string out;
  for (const auto& s : specs) out += fmt::format("{:<{}} = {}\n", s.name, width, show_field(s));
  return out;
}

nlohmann::json resolved_json(const std::vector<FlagSpec>& specs) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& s : specs) {
    j[std::string(s.name)] = std::visit(
        [](auto* field) -> nlohmann::json {
          using F = std::remove_pointer_t<decltype(field)>;
          if constexpr (IsOptional<F>::value) return *field ? to_json(**field) : nullptr;
          else return to_json(*field);
        },
        s.field);
  }
  return j;
}

}  // namespace ssd
