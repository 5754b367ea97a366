#include "runtime/saguaro/miss_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/median.h"

namespace ssd {

MissChoice parse_miss_choice(const std::string& s) {
  if (s == "auto") return MissChoice::kAuto;
  if (s == "not-worse") return MissChoice::kNotWorse;
  if (s == "primary") return MissChoice::kPrimary;
  if (s == "backup") return MissChoice::kBackup;
  fail(fmt::format("--miss-policy '{}' is not auto, not-worse, primary or backup", s));
}

const char* miss_choice_name(MissChoice c) {
  switch (c) {
    case MissChoice::kAuto: return "auto";
    case MissChoice::kNotWorse: return "not-worse";
    case MissChoice::kPrimary: return "primary";
    case MissChoice::kBackup: return "backup";
  }
  return "?";
}

MissPolicyOptions miss_policy_options(MissChoice choice, int32_t b_star) {
  MissPolicyOptions o;
  if (choice == MissChoice::kPrimary) o.b_star = 1 << 20;
  if (choice == MissChoice::kBackup) o.b_star = 0;
  o.backup_must_not_be_worse = choice == MissChoice::kNotWorse;
  if (b_star >= 0) {
    SSD_CHECK(choice == MissChoice::kAuto || choice == MissChoice::kNotWorse,
              "--critical-batch needs --miss-policy auto or not-worse (got {})",
              miss_choice_name(choice));
    o.b_star = b_star;
  }
  return o;
}

int32_t critical_batch_size(const MissCosts& c, int32_t b_max) {
  SSD_CHECK(b_max >= 1, "miss policy: b_max = {} must be at least 1", b_max);
  const double h = std::clamp(c.hit_rate, 0.0, 1.0);
  if (h >= 1) return b_max;
  if (c.accept_primary <= c.accept_backup) return 0;
  const double mix = h * c.accept_primary + (1 - h) * c.accept_backup;
  int32_t b_star = 0;
  for (int32_t b = 1; b <= b_max; ++b) {
    const double tv = std::max(0.0, c.verify_s0 + c.verify_s1 * b) + std::max(0.0, c.round_s);
    const double d = std::max(0.0, c.draft_s0 * (1 - std::pow(h, b)) + c.draft_s1 * b * (1 - h));
    if ((1 - h) * (c.accept_primary - c.accept_backup) * tv > mix * d)
      b_star = b;
    else
      break;
  }
  return b_star;
}

void LineFit::add(double x, double y) {
  n_++;
  sx_ += x;
  sy_ += y;
  sxx_ += x * x;
  sxy_ += x * y;
}

double LineFit::slope() const {
  const double den = n_ * sxx_ - sx_ * sx_;
  // One distinct x (den = 0 up to rounding): no slope to speak of.
  if (n_ < 2 || den <= 1e-12 * std::max(1.0, n_ * sxx_)) return 0;
  return (n_ * sxy_ - sx_ * sy_) / den;
}

double LineFit::intercept() const { return n_ == 0 ? 0 : (sy_ - slope() * sx_) / n_; }

double LineFit::at(double x) const { return std::max(0.0, intercept() + slope() * x); }

MissPolicy::MissPolicy(const MissPolicyOptions& opts) : opts_(opts) {
  SSD_CHECK(opts.b_star >= -1, "miss policy: b* = {} must be -1 (derived) or >= 0", opts.b_star);
  SSD_CHECK(opts.b_star_default >= 0, "miss policy: default b* = {} must be >= 0",
            opts.b_star_default);
  SSD_CHECK(opts.b_max >= 1, "miss policy: b_max = {} must be at least 1", opts.b_max);
  SSD_CHECK(opts.accept_backup_default >= 1,
            "miss policy: default backup acceptance length {} must be >= 1 (the bonus)",
            opts.accept_backup_default);
}

void MissPolicy::observe_primary_draft(int32_t batch, double seconds) {
  if (batch > 0 && seconds >= 0) draft_.add(batch, seconds);
}

void MissPolicy::observe_verify(int32_t batch, double seconds) {
  if (batch > 0 && seconds >= 0) verify_.add(batch, seconds);
}

void MissPolicy::observe_round_overhead(double seconds) {
  if (!(seconds >= 0)) return;  // a clock step or a wait the caller could not account for
  overheads_.push_back(seconds);
  if (overheads_.size() > kOverheadWindow) overheads_.pop_front();
}

void MissPolicy::observe_round(SpecSource source, int32_t accepted) {
  if (source == SpecSource::kBackup) {
    rounds_backup_++;
    accepted_backup_ += accepted;
  } else {
    rounds_primary_++;
    accepted_primary_ += accepted;
  }
}

void MissPolicy::observe_shadow(int32_t accepted) {
  rounds_backup_++;
  accepted_backup_ += std::max(0, accepted);
}

bool MissPolicy::backup_not_worse() const {
  if (rounds_backup_ < opts_.min_samples) return false;
  const MissCosts c = costs();
  return c.accept_backup >= c.accept_primary;
}

void MissPolicy::observe_lookup(bool hit) {
  lookups_++;
  hits_ += hit ? 1 : 0;
}

MissCosts MissPolicy::costs() const {
  MissCosts c;
  c.draft_s0 = draft_.intercept();
  c.draft_s1 = draft_.slope();
  c.verify_s0 = verify_.intercept();
  c.verify_s1 = verify_.slope();
  c.round_s = median(std::vector<double>(overheads_.begin(), overheads_.end()));
  c.accept_primary =
      rounds_primary_ == 0 ? 1.0 : 1.0 + static_cast<double>(accepted_primary_) / rounds_primary_;
  c.accept_backup = rounds_backup_ == 0
                        ? opts_.accept_backup_default
                        : 1.0 + static_cast<double>(accepted_backup_) / rounds_backup_;
  c.hit_rate = lookups_ == 0 ? 0.0 : static_cast<double>(hits_) / lookups_;
  return c;
}

bool MissPolicy::derived() const {
  return opts_.b_star < 0 && draft_.count() >= opts_.min_samples &&
         verify_.count() >= opts_.min_samples;
}

int32_t MissPolicy::critical_batch() const {
  if (opts_.b_star >= 0) return opts_.b_star;
  if (!derived()) return opts_.b_star_default;
  return critical_batch_size(costs(), opts_.b_max);
}

}  // namespace ssd
