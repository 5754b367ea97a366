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

// The prompts of the file at `path`, the first `max` of them when max > 0. Throws ssd::Error
// naming the file when it cannot be read or holds no prompt.
std::vector<std::string> read_prompt_file(const std::string& path, int64_t max = 0);

}  // namespace ssd
