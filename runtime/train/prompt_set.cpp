// Prompt-file parsing (format in prompt_set.h), shared by `ssd bench` and `ssd distill`.
#include "runtime/train/prompt_set.h"

#include <cctype>
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

std::string to_prompt_line(std::string_view prompt) {
  if (prompt.empty() || prompt[0] == '#') return {};
  if (prompt.find("\\n") != std::string_view::npos) return {};
  if (prompt.find('\r') != std::string_view::npos) return {};
  bool blank = true;
  std::string line;
  for (char c : prompt) {
    if (!std::isspace(static_cast<unsigned char>(c))) blank = false;
    if (c == '\n')
      line += "\\n";
    else
      line += c;
  }
  return blank ? std::string{} : line;
}

std::string prompt_key(std::string_view prompt) {
  std::string out;
  for (char c : prompt) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
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

std::vector<std::string> read_prompt_files(const std::string& comma_list, int64_t max) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= comma_list.size()) {
    size_t end = comma_list.find(',', start);
    if (end == std::string::npos) end = comma_list.size();
    const std::string path = comma_list.substr(start, end - start);
    SSD_CHECK(!path.empty(), "prompt file list '{}' has an empty entry", comma_list);
    const std::vector<std::string> ps = read_prompt_file(path);
    out.insert(out.end(), ps.begin(), ps.end());
    start = end + 1;
  }
  if (max > 0 && static_cast<int64_t>(out.size()) > max) out.resize(static_cast<size_t>(max));
  return out;
}

}  // namespace ssd
