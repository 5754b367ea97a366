// What the round simulator is asked to simulate: the cluster (target TP group, drafter ranks,
// their links), the models, the workload, the acceptance and the SSD policy. Plain structs, filled
// by `ssd simulate` from its flags (or by a test) and checked once by validate().
#pragma once

#include <cstdint>
#include <string>

#include "runtime/saguaro/miss_policy.h"
#include "topology/sim/acceptance_model.h"
#include "topology/sim/hw_profile.h"
#include "topology/sim/model_shape.h"

namespace ssd::sim {

enum class SimMode { kAr, kSd, kSsd };
const char* mode_name(SimMode m);
SimMode parse_mode(const std::string& s);  // "ar", "sd", "ssd"; ssd::Error otherwise

struct SimCluster {
  DeviceProfile target_device;
  int32_t tp = 1;
  LinkProfile tp_link;  // between the target's TP ranks (used when tp > 1)
  DeviceProfile drafter_device;
  int32_t drafters = 1;      // drafter ranks (SSD splits the pre-speculation branches over them)
  LinkProfile drafter_link;  // target leader <-> drafter ranks, and between drafter ranks
  // SD with the drafter inside the target's process (one rank): drafting runs on the target's
  // device, between verifications, with no link.
  bool colocated = false;
};

struct SimDrafter {
  ModelShape shape;         // its style decides the cost (model_shape.h); unused for kLookup
  double lookup_s = 20e-6;  // one n-gram lookup, per sequence (host time)
};

struct SimWorkload {
  int32_t batch = 1;    // sequences decoded together
  int32_t tokens = 128; // generated per sequence
  int32_t prompt = 128; // cached tokens before the first generated one
  int32_t k = 4;        // draft tokens per speculation
};

struct SsdPolicy {
  int32_t budget = 8;  // pre-speculated branches per sequence (geometric fan-out over K + 1)
  int32_t chunk = 0;   // branches per draft call; 0 = all in one call (never cut short)
  MissChoice miss = MissChoice::kAuto;  // --miss-policy (runtime/saguaro/miss_policy.h)
  int32_t b_star = -1;  // >= 0: fixed critical batch; -1: derived from the simulated costs
  // The runtime's adaptive pre-speculation switch (runtime/saguaro/prespec_switch.h, `ssd bench
  // --prespec-switch auto`): blocks of rounds with pre-speculation on or off, the faster regime
  // kept. false: pre-speculate every round (Saguaro as published). A replayed trace that records
  // each round's regime ("prespec") is followed instead.
  bool adaptive_switch = false;
  // The lead pushes each round's installed cache to the target leader (PrespecPush), which
  // verifies a hit at once when the push arrived before its verification ended: a round whose
  // every sequence is such a hit (or a decode step) waits for no answer (remote_decode.cpp).
  bool push = true;
  // One drafter rank drafts only the chunks expected to end before the next outcome arrives
  // (runtime/saguaro/prespec_budget.h, DrafterActorOptions::fit_window), learnt online.
  bool fit_window = true;
  // --miss-at leader (the runtime's default, actors/roles/leader_lookup.h): a miss the drafter
  // answers with a lookup (its primary is n-gram, or the miss policy chose the backup) is drafted
  // by the target leader at once, with its own copy of that lookup, and sent with the outcome; the
  // drafter adopts it and pre-speculates after it, and no answer is waited for. The leader follows
  // the choice the drafter last told it, and only while it takes pushes (push). false: --miss-at
  // drafter, the drafter rank answers every miss after the outcome's round trip.
  bool miss_at_leader = true;
};

struct SimConfig {
  SimCluster cluster;
  ModelShape target;
  SimDrafter drafter;  // the primary
  SimDrafter backup;   // the miss fallback past b* (an n-gram lookup by default)
  SimWorkload work;
  AcceptanceParams primary;     // speculations of the primary (cache hits and primary fallbacks)
  AcceptanceParams backup_acc;  // speculations of the backup
  SsdPolicy ssd;
  uint64_t seed = 1;
  bool record_events = false;  // keep the timeline (Chrome trace)

  // Throws ssd::Error naming what is impossible (TP not dividing heads, zero bandwidth, ...).
  void validate() const;
};

}  // namespace ssd::sim
