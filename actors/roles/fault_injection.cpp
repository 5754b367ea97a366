#include "actors/roles/fault_injection.h"

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "runtime/core/error.h"

namespace ssd {
namespace {

constexpr std::string_view kUsage =
    "SSD_FAULT=<leader|worker|drafter|secondary>:<kill|stop|error|corrupt>:"
    "<startup|prefill|round|prespec|init>[:round=N]";

template <class E, size_t N>
E pick(std::string_view part, const std::string_view (&names)[N], std::string_view what,
       std::string_view text) {
  for (size_t i = 0; i < N; ++i)
    if (part == names[i]) return static_cast<E>(i);
  std::string choices;
  for (size_t i = 0; i < N; ++i) choices += fmt::format("{}{}", i ? ", " : "", names[i]);
  fail(fmt::format("SSD_FAULT='{}': unknown {} '{}' (one of {}; the form is {})", text, what,
                   part, choices, kUsage));
}

constexpr std::string_view kRoles[] = {"leader", "worker", "drafter", "secondary"};
constexpr std::string_view kKinds[] = {"kill", "stop", "error", "corrupt"};
constexpr std::string_view kPhases[] = {"startup", "prefill", "round", "prespec", "init"};

}  // namespace

std::string_view fault_role_name(FaultRole role) { return kRoles[static_cast<size_t>(role)]; }
std::string_view fault_kind_name(FaultKind kind) { return kKinds[static_cast<size_t>(kind)]; }
std::string_view fault_phase_name(FaultPhase phase) { return kPhases[static_cast<size_t>(phase)]; }

FaultPlan parse_fault_plan(std::string_view text) {
  FaultPlan plan;
  if (text.empty()) return plan;
  std::vector<std::string_view> parts;
  for (size_t at = 0;;) {
    const size_t colon = text.find(':', at);
    parts.push_back(text.substr(at, colon == std::string_view::npos ? colon : colon - at));
    if (colon == std::string_view::npos) break;
    at = colon + 1;
  }
  SSD_CHECK(parts.size() == 3 || parts.size() == 4,
            "SSD_FAULT='{}': {} parts separated by ':', expected 3 or 4 ({})", text, parts.size(),
            kUsage);
  plan.active = true;
  plan.role = pick<FaultRole>(parts[0], kRoles, "role", text);
  plan.kind = pick<FaultKind>(parts[1], kKinds, "fault", text);
  plan.phase = pick<FaultPhase>(parts[2], kPhases, "phase", text);
  if (parts.size() == 4) {
    const std::string_view r = parts[3];
    SSD_CHECK(r.starts_with("round="), "SSD_FAULT='{}': the fourth part '{}' is not round=N ({})",
              text, r, kUsage);
    const std::string digits(r.substr(6));
    SSD_CHECK(!digits.empty() && digits.size() <= 9 &&
                  digits.find_first_not_of("0123456789") == std::string::npos,
              "SSD_FAULT='{}': round '{}' is not a whole number >= 0", text, digits);
    plan.round = std::stoll(digits);
    SSD_CHECK(plan.phase == FaultPhase::kRound || plan.phase == FaultPhase::kPrespec,
              "SSD_FAULT='{}': round=N applies to the round and prespec phases only", text);
  }
  return plan;
}

FaultRole fault_role_of(const RankLayout& layout) {
  if (layout.is_target_leader()) return FaultRole::kLeader;
  if (layout.is_target()) return FaultRole::kWorker;
  return layout.is_drafter_lead() ? FaultRole::kDrafterLead : FaultRole::kSecondary;
}

FaultInjector::FaultInjector(const FaultPlan& plan, const RankLayout& layout, Transport* world)
    : plan_(plan), layout_(layout), world_(world) {}

bool FaultInjector::fires(FaultPhase phase, int64_t round) const {
  if (!plan_.active || fired_.load() || plan_.phase != phase) return false;
  if (fault_role_of(layout_) != plan_.role) return false;
  return phase == FaultPhase::kStartup || phase == FaultPhase::kPrefill ||
         phase == FaultPhase::kInit || round == plan_.round;
}

void FaultInjector::at(FaultPhase phase, int64_t round, std::string_view where) const {
  if (!fires(phase, round) || fired_.exchange(true)) return;
  // The steady clock (CLOCK_MONOTONIC, shared by the processes of one machine) lets a test
  // measure how long the job took to end after the fault.
  const double now = std::chrono::duration<double>(
                         std::chrono::steady_clock::now().time_since_epoch()).count();
  fmt::print(stderr, "ssd: fault injection: rank {} ({}) {} {} (steady clock {:.3f} s)\n",
             layout_.rank, fault_role_name(plan_.role), fault_kind_name(plan_.kind), where, now);
  std::fflush(stderr);
  switch (plan_.kind) {
    case FaultKind::kKill: std::raise(SIGKILL); break;
    case FaultKind::kStop: std::raise(SIGSTOP); break;
    case FaultKind::kError:
      throw std::runtime_error(fmt::format("injected error {}", where));
    case FaultKind::kCorrupt: {
      SSD_CHECK(world_ != nullptr, "fault injection: no transport to send a corrupted frame on");
      // The victim: a peer that reads this rank's frames on the world transport.
      const int victim = plan_.role == FaultRole::kLeader || plan_.role == FaultRole::kSecondary
                             ? layout_.drafter_lead()
                             : layout_.target_leader();
      // A well-formed header over a head of 0xFF bytes: an Error whose role is 255 (past the
      // enum) and whose text's size prefix exceeds the head. The sending transport checks only
      // the header; the receiver's decode must refuse the head.
      const std::vector<std::byte> head(24, std::byte{0xFF});
      world_->send_frame(victim, build_frame(MsgKind::kError, head, {}));
      break;
    }
  }
}

}  // namespace ssd
