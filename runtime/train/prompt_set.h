// Prompt files: the plain-text prompt sets of perf/prompts/ (`ssd bench --prompt-file`,
// `ssd distill --prompts`). One prompt per line; empty lines and lines starting with '#' are
// skipped; the two characters "\n" inside a line stand for a newline (so multi-line prompts fit
// on one line). Nothing else is escaped: a backslash not followed by 'n' is kept as is.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ssd {

// The prompts of a text in that format (possibly none).
std::vector<std::string> parse_prompt_lines(std::string_view text);

// `prompt` as one line of a prompt file (newlines written as "\n"), or "" when it cannot be
// written so that parse_prompt_lines gives it back unchanged: it is empty or all whitespace,
// contains "\n" as two characters, a carriage return, or starts with '#'.
std::string to_prompt_line(std::string_view prompt);

// A prompt's identity for duplicate checks: lower case, runs of whitespace as one space, no
// leading or trailing space ("What is X?" and " what  is x? " are the same prompt).
std::string prompt_key(std::string_view prompt);

// The prompts of the file at `path`, the first `max` of them when max > 0. Throws ssd::Error
// naming the file when it cannot be read or holds no prompt.
std::vector<std::string> read_prompt_file(const std::string& path, int64_t max = 0);

// The prompts of each file of a comma-separated list, in order, then the first `max` of them
// when max > 0. Each file must hold prompts (read_prompt_file).
std::vector<std::string> read_prompt_files(const std::string& comma_list, int64_t max = 0);

}  // namespace ssd
