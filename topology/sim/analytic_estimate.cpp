// The closed forms beside the event simulation (declared in round_sim.h): what one draft call and
// the verifier's host work cost, the critical batch the miss policy would derive from those costs,
// and the analytic round estimate that the simulated rounds are checked against.
#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/saguaro/fan_out.h"
#include "runtime/saguaro/miss_policy.h"
#include "topology/sim/roofline.h"
#include "topology/sim/round_sim.h"  // declares what this file defines

namespace ssd::sim {

double verify_host_seconds(const DeviceProfile& device, double rows) {
  return device.verify_host_s + rows * device.verify_host_row_s;
}

double draft_seconds(const SimDrafter& drafter, const DeviceProfile& on, double n,
                     double suffix, int32_t k, double context, bool predict_bonus,
                     double kv_seqs) {
  if (n <= 0) return 0;
  if (kv_seqs < 0) kv_seqs = n;
  const ModelShape& m = drafter.shape;
  const LinkProfile none{"none", 0, 1};
  const DrafterFit* fit = on.drafter_fit(m.name);
  const double call = fit ? fit->call_s : 0;
  if (m.style == DraftStyle::kLookup) return call + (fit ? fit->lookup_s : drafter.lookup_s) * n;
  const DeviceProfile device = on.for_drafter(m.name);
  // A drafter rank's request (predict_bonus) ranks every drafted row's alternatives.
  const double rank =
      predict_bonus && fit ? fit->rank_row_s * n * (k + 1) : 0;
  switch (m.style) {
    case DraftStyle::kLookup: break;
    case DraftStyle::kBlock:
      return call + rank + forward_cost(m, device, 1, none,
                                        {.rows = n * (suffix + k), .seqs = kv_seqs,
                                         .context = context})
                               .total_s;
    case DraftStyle::kAutoregressive: {
      const int32_t steps = k + (predict_bonus ? 1 : 0);
      // Nothing to draft (a sequence's start on its prompt): its catch-up alone, no logits.
      if (steps == 0)
        return call + forward_cost(m, device, 1, none,
                                   {.rows = n * suffix, .seqs = kv_seqs, .context = context,
                                    .logits_rows = 0})
                          .total_s;
      // Step 0 forwards each request's new tokens and the committed token the runner held back
      // (model_draft_runner.h: every draft forwards at least one token), and asks one logits row
      // per request. The tokens drafted so far by each branch are read too (n x i at step i).
      double t = forward_cost(m, device, 1, none,
                              {.rows = n * (suffix + 1), .seqs = kv_seqs, .context = context,
                               .logits_rows = n})
                     .total_s;
      for (int32_t i = 1; i < steps; ++i)
        t += forward_cost(m, device, 1, none,
                          {.rows = n, .seqs = kv_seqs, .context = context + n / kv_seqs * (suffix + i)})
                 .total_s;
      return call + rank + t;
    }
  }
  return 0;
}

int32_t derived_critical_batch(const SimConfig& cfg) {
  const SimCluster& c = cfg.cluster;
  const DeviceProfile& dd = c.colocated ? c.target_device : c.drafter_device;
  const double ctx = cfg.work.prompt;
  const int32_t k = cfg.work.k;
  auto verify = [&](double b) {
    return forward_cost(cfg.target, c.target_device, c.tp, c.tp_link,
                        {.rows = b * (k + 1), .seqs = b, .context = ctx})
               .total_s +
           verify_host_seconds(c.target_device, b * (k + 1));
  };
  auto draft = [&](double m) { return draft_seconds(cfg.drafter, dd, m, 1, k, ctx, true); };
  MissCosts mc;
  mc.verify_s1 = verify(2) - verify(1);
  mc.verify_s0 = verify(1) - mc.verify_s1;
  mc.draft_s1 = draft(2) - draft(1);
  mc.draft_s0 = draft(1) - mc.draft_s1;
  mc.accept_primary = cfg.primary.expected_tokens(k);
  mc.accept_backup = cfg.backup_acc.expected_tokens(k);
  mc.hit_rate = cfg.primary.hit_rate(
      geometric_fan_out(k, cfg.ssd.budget, cfg.primary.mean(k), cfg.primary.r));
  return critical_batch_size(mc, 1024);
}

AnalyticEstimate analytic_estimate(const SimConfig& cfg) {
  cfg.validate();
  const SimCluster& c = cfg.cluster;
  const DeviceProfile& dd = c.colocated ? c.target_device : c.drafter_device;
  const double b = cfg.work.batch, ctx = cfg.work.prompt + 0.5 * cfg.work.tokens;
  const int32_t k = cfg.work.k;
  const double lp = cfg.primary.expected_tokens(k), lb = cfg.backup_acc.expected_tokens(k);
  AnalyticEstimate e;
  e.verify_s = forward_cost(cfg.target, c.target_device, c.tp, c.tp_link,
                            {.rows = b * (k + 1), .seqs = b, .context = ctx})
                   .total_s +
               verify_host_seconds(c.target_device, b * (k + 1));
  const double ar_s = forward_cost(cfg.target, c.target_device, c.tp, c.tp_link,
                                   {.rows = b, .seqs = b, .context = ctx})
                          .total_s +
                      verify_host_seconds(c.target_device, b);
  e.ar_tokens_per_s = b / ar_s;
  // SSD's requests draft k + 1 and rank them; SD's, in any placement, exactly k (plain).
  auto draft = [&](const SimDrafter& d, double m, double kv_seqs = -1) {
    return draft_seconds(d, dd, m, lp, k, ctx, true, kv_seqs);
  };
  e.draft_s = draft_seconds(cfg.drafter, dd, b, lp, k, ctx, false);
  const double link = c.colocated ? 0 : c.drafter_link.latency_s;
  e.sd_tokens_per_s = b * lp / (e.verify_s + e.draft_s + 2 * link);
  const std::vector<int32_t> plan =
      geometric_fan_out(k, cfg.ssd.budget, cfg.primary.mean(k), cfg.primary.r);
  e.hit_rate = cfg.primary.hit_rate(plan);
  const double branches = std::ceil(b * cfg.ssd.budget / c.drafters);
  e.prespec_s = draft(cfg.drafter, branches, std::min(b, branches));
  double pre = e.prespec_s;
  if (cfg.ssd.chunk > 0)
    pre = std::min(pre, e.verify_s + link +
                            draft(cfg.drafter, std::min<double>(cfg.ssd.chunk, branches),
                                  std::min<double>({b, branches, double(cfg.ssd.chunk)})));
  SimConfig tmp = cfg;
  const MissPolicyOptions mo = miss_policy_options(cfg.ssd.miss, cfg.ssd.b_star);
  const int32_t bstar = mo.b_star >= 0 ? mo.b_star : derived_critical_batch(tmp);
  const bool primary = b <= bstar;
  const double h = e.hit_rate;
  e.fallback_s = primary ? draft(cfg.drafter, std::max(1.0, b * (1 - h)))
                         : draft(cfg.backup, std::max(1.0, b * (1 - h)));
  const double lf = primary ? lp : lb;
  const bool lookup_fallback = !primary || cfg.drafter.shape.style == DraftStyle::kLookup;
  if (cfg.ssd.miss_at_leader && cfg.ssd.push && lookup_fallback) {
    // --miss-at leader: the leader drafts every miss itself (a lookup on its own host) and takes
    // the hits from the push, so no round waits for an answer: a round is the verification and
    // the leader's lookups. The pre-speculation, begun at the outcome's arrival, must be pushed
    // back before the next verification ends; what comes later is no hit (the leader drafts
    // those too): in one call, none; in chunks, the share drafted in time.
    const SimDrafter& l = primary ? cfg.drafter : cfg.backup;
    e.fallback_s = draft_seconds(l, c.target_device, std::max(1.0, b * (1 - h)), lp, k, ctx, false);
    const double window = e.verify_s + e.fallback_s - 2 * link;
    const double in_time = e.prespec_s <= window ? 1.0
                           : cfg.ssd.chunk > 0   ? std::clamp(window / e.prespec_s, 0.0, 1.0)
                                                 : 0.0;
    const double hl = h * in_time;
    e.ssd_tokens_per_s = b * (hl * lp + (1 - hl) * lf) / (e.verify_s + e.fallback_s);
    return e;
  }
  const double round = std::max(e.verify_s + link, pre) + (1 - std::pow(h, b)) * e.fallback_s + link;
  e.ssd_tokens_per_s = b * (h * lp + (1 - h) * lf) / round;
  return e;
}

}  // namespace ssd::sim
