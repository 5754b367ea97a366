// Prompt-file parsing (format in prompt_set.h), shared by `ssd bench` and `ssd distill`.
#include "runtime/train/prompt_set.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/core/error.h"

namespace ssd {

std::vector<std::string> parse_prompt_lines(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF files
    if (line.empty() || line[0] == '#') continue;
    std::string prompt;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == 'n') {
        prompt += '\n';
        ++i;
      } else {
        prompt += line[i];
      }
    }
    out.push_back(std::move(prompt));
  }
  return out;
}

std::vector<std::string> read_prompt_file(const std::string& path, int64_t max) {
  std::error_code ec;
  std::ifstream in(path, std::ios::binary);
  SSD_CHECK(in.good() && std::filesystem::is_regular_file(path, ec),
            "prompt file '{}' cannot be read", path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<std::string> out = parse_prompt_lines(ss.str());
  SSD_CHECK(!out.empty(), "prompt file '{}' has no prompts (one per line, '#' comments)", path);
  if (max > 0 && static_cast<int64_t>(out.size()) > max) out.resize(static_cast<size_t>(max));
  return out;
}

}  // namespace ssd
