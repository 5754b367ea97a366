// Progress lines and the JSON log (see train_progress.h).
#include "runtime/train/train_progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "runtime/core/error.h"

namespace ssd::train {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

double time_left(double elapsed_s, int64_t done, int64_t total) {
  if (done <= 0) return NAN;
  return elapsed_s / static_cast<double>(done) * static_cast<double>(total - done);
}

std::string progress_line(const ProgressPoint& p) {
  const double left = p.steps_per_s > 0 ? (p.total - p.step) / p.steps_per_s : NAN;
  return fmt::format(
      "step {}/{} | loss {:.4f} | ce final {:.4f} base {:.4f} | lambda {:.3f} | acc@1 {:.3f}{} | "
      "lr {:.2e} | {:.0f} tok/s | {} elapsed, {} left",
      p.step, p.total, p.loss, p.ce_final, p.ce_base, p.lambda, p.acc1,
      p.oov > 0 ? fmt::format(" | oov {:.3f}", p.oov) : "", p.lr, p.tokens_per_s,
      format_duration(p.elapsed_s), format_duration(left));
}

std::string progress_json(const ProgressPoint& p) {
  return nlohmann::json{{"step", p.step},          {"total", p.total},
                        {"loss", p.loss},          {"ce_final", p.ce_final},
                        {"ce_base", p.ce_base},    {"lambda", p.lambda},
                        {"acc1", p.acc1},          {"oov", p.oov},
                        {"lr", p.lr},              {"grad_norm", p.grad_norm},
                        {"tokens_per_s", p.tokens_per_s}, {"elapsed_s", p.elapsed_s}}
      .dump();
}

StatusLine::StatusLine(std::FILE* out) : out_(out), tty_(out && isatty(fileno(out))) {}

void StatusLine::show(std::string_view line) {
  if (!out_) return;
  if (tty_) {
    fmt::print(out_, "\r\033[K{}", line);
    dirty_ = true;
  } else {
    fmt::print(out_, "{}\n", line);
  }
  std::fflush(out_);
}

void StatusLine::finish() {
  if (dirty_ && out_) fmt::print(out_, "\n");
  dirty_ = false;
}

ProgressReporter::ProgressReporter(std::FILE* out, const std::string& json_path, bool append_json)
    : status_(out) {
  if (!json_path.empty()) {
    json_ = std::fopen(json_path.c_str(), append_json ? "a" : "w");
    SSD_CHECK(json_, "--log-json: cannot open {}: {}", json_path, std::strerror(errno));
  }
}

ProgressReporter::~ProgressReporter() {
  finish();
  if (json_) std::fclose(json_);
}

void ProgressReporter::report(const ProgressPoint& p, bool log_step) {
  if (status_.tty() || log_step) status_.show(progress_line(p));
  if (json_ && log_step) {
    fmt::print(json_, "{}\n", progress_json(p));
    std::fflush(json_);
  }
}

void ProgressReporter::finish() { status_.finish(); }

}  // namespace ssd::train
