// The trainer's progress report: one line rewritten in place on a TTY ("\r"), or one line every
// --log-every steps otherwise, plus an optional JSON-lines log (one object per log step, for the
// model card's curves).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace ssd::train {

struct ProgressPoint {
  int64_t step = 0, total = 0;  // step = steps done
  double loss = 0, ce_final = 0, ce_base = 0, lambda = 0, acc1 = 0, oov = 0;
  double lr = 0, grad_norm = 0, tokens_per_s = 0, steps_per_s = 0, elapsed_s = 0;
};

std::string format_duration(double seconds);  // "1h02m", "3m07s", "12s"
// Time left at the rate so far: elapsed / done x (total - done); NaN before anything is done
// (format_duration prints it as "?").
double time_left(double elapsed_s, int64_t done, int64_t total);
std::string progress_line(const ProgressPoint& p);
std::string progress_json(const ProgressPoint& p);

// One status line on `out` (stderr) for a long job: rewritten in place on a TTY, a line of its own
// each time otherwise (a log file keeps every update). Used by train-domino, distill and
// synth-prompts.
class StatusLine {
 public:
  explicit StatusLine(std::FILE* out);
  ~StatusLine() { finish(); }
  StatusLine(const StatusLine&) = delete;
  StatusLine& operator=(const StatusLine&) = delete;
  bool tty() const { return tty_; }
  void show(std::string_view line);
  void finish();  // ends an in-place line (the next output starts on a fresh line)

 private:
  std::FILE* out_;
  bool tty_ = false, dirty_ = false;
};

class ProgressReporter {
 public:
  // out: where lines go (stderr); json_path: empty = no JSON log. Throws when it cannot open it.
  ProgressReporter(std::FILE* out, const std::string& json_path, bool append_json);
  ~ProgressReporter();
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;
  // force: a log step (newline when not a TTY, JSON written); otherwise a TTY refresh only.
  void report(const ProgressPoint& p, bool log_step);
  void finish();  // ends the in-place line

 private:
  StatusLine status_;
  std::FILE* json_ = nullptr;
};

}  // namespace ssd::train
