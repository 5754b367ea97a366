// Hardware the round simulator reasons about: a device (what one forward costs on it) and a link
// (what a message or a collective costs between two devices). Numbers are vendor peak figures for
// the GPU presets (dense, no sparsity) and measured figures for a calibrated CPU profile
// (`ssd simulate --calibrate`, cpu_calibration.h); both read and write as JSON, so a profile
// measured on one machine can be handed to --device-profile on another.
//
//   device  mem_bw_Bps        sustained memory read bandwidth, bytes/s
//           peak_flops[dtype] dense matmul peak, FLOP/s, per compute dtype (bf16, fp16, fp8, int8,
//                             fp32; a dtype absent from the map falls back to bf16's)
//           overhead_s        fixed cost of one forward (synchronisation, the host's share)
//           layer_overhead_s  fixed cost per layer (kernel launches; on a CPU the thread pool's
//                             hand-offs): a forward of L layers costs overhead_s + L x this
//                             beyond its roofline
//           mem_bytes         device memory (0 = unknown; used to refuse models that cannot fit)
//           *_efficiency      the achieved fraction of each peak (GPU presets: 0.8 of HBM bandwidth,
//                             0.6 of the matmul peak, typical of decode/verify kernels at these sizes)
//   link    latency_s         one-way latency of a message (alpha)
//           bw_Bps            bytes/s of one direction (beta = 1 / bw)
//
// A ring all-reduce of S bytes over T devices moves 2 (T - 1) / T x S bytes through each link in
// 2 (T - 1) steps (reduce-scatter, then all-gather), so it costs 2 (T - 1) / T x S / bw +
// 2 (T - 1) x latency; a ring all-gather of S bytes (the gathered size) half of that. T = 1 costs 0.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ssd::sim {

// One drafter's own costs on a device (`ssd simulate --calibrate --calibrate-drafters`): its
// rounds timed in the runtime's SD loop and fitted to draft_seconds() (round_sim.h). A drafter's
// kernels need not run like the target's: Domino's BF16 matmuls and GRU head, or a host lookup,
// achieve other fractions of the peaks than the Q4_1 target the device was fitted on, and every
// draft call carries host work (sampling, commit, the features) no roofline sees. A draft call of
// f forwards costs
//   sum of the forwards' rooflines at (mem_efficiency, peak_flops) + f x forward_s + call_s
//   (+ rank_row_s per drafted row when the call ranks alternatives, as SSD's requests do)
// and a lookup drafter's call of n sequences call_s + n x lookup_s.
struct DrafterFit {
  double mem_efficiency = 1;
  double peak_flops = 0;  // FLOP/s its matmuls achieve (every dtype); 0 for a lookup drafter
  double forward_s = 0;   // fixed cost per drafter forward
  double call_s = 0;      // fixed cost per draft call (per SD round: the commit and bookkeeping)
  double lookup_s = 0;    // lookup drafters: per sequence
  // Host cost per drafted row of a call that ranks alternatives (SSD asks each position's
  // likeliest tokens, DraftRequest::predict_top: a top-F pass over the vocabulary per row).
  double rank_row_s = 0;
  // Seconds added to a target forward when this drafter drafted since the previous one. A CPU
  // profile times the target's forwards back to back; inside an SD loop a verification follows
  // the drafter's work and the host's (the caches hold the drafter's data, the thread pool has
  // gone idle), and costs more. Measured by --calibrate-drafters: the SD rounds' verification
  // forwards minus the profile's forward of the same rows (on this VM 1.5-2.7 ms at 1 thread,
  // 2.3-5.3 ms at 2, even after an n-gram lookup, so mostly not the drafter's weights).
  double target_switch_s = 0;
  // Seconds per sequence beyond the first added to every verification in this drafter's SD and
  // SSD rounds: a verification of B sequences' K + 1 rows each costs more than the profile's
  // one-sequence forward of as many rows, by more than the decode batches' per-sequence cost
  // (one row per sequence) says; measured with target_switch_s from the calibration's SD runs at
  // batch 1 and 4 (0.4-0.8 ms per extra sequence at 1 thread on this VM).
  double target_seq_s = 0;
  double median_rel_err = 0, max_rel_err = 0;  // of the fit, over its samples

  nlohmann::json to_json() const;
  static DrafterFit from_json(const nlohmann::json& j, const std::string& where);
};

struct DeviceProfile {
  std::string name;
  double mem_bw_Bps = 0;
  std::map<std::string, double> peak_flops;  // dtype -> FLOP/s
  double overhead_s = 0;
  double layer_overhead_s = 0;  // more fixed cost per layer (CPU: the pool's hand-offs per op)
  // Fixed cost per sequence beyond the first, per layer (a CPU backend's attention runs sequence
  // by sequence over each sequence's own cache: a batch of B one-row sequences costs more than a
  // block of B rows of one). Fitted from decode batches by --calibrate. 0 on the presets.
  double seq_layer_overhead_s = 0;
  // Attention over the cache, per layer and cached position (a CPU backend's attention: every
  // row's dot products and softmax over its sequence's cached keys and values, and each
  // sequence's own pass over its cache): context x (seqs x kv_seq_pos_layer_s + rows x
  // kv_row_pos_layer_s) x layers. On this VM it is ~5x what reading the KV bytes at the achieved
  // bandwidth costs (a 4-sequence decode batch takes 3.4 ms at 32 cached tokens, 7.2 ms at 256).
  // Fitted by --calibrate from forwards of the same shape at two contexts; 0 on the presets and
  // in a profile measured at one context (the other terms then absorb it at that context).
  double kv_seq_pos_layer_s = 0, kv_row_pos_layer_s = 0;
  // How a forward's memory and compute times combine: 0 = max(memory, compute) (they overlap,
  // as on a GPU), else the p-norm (memory^p + compute^p)^(1/p) (p = 1: the sum). A CPU streams
  // the weights and multiplies them on the same cores, which overlap only in part; --calibrate
  // fits p. 0 on the presets.
  double roofline_p = 0;
  double mem_bytes = 0;
  // Fractions of the peaks that real kernels reach (a preset's assumption; 1 for a calibrated
  // profile, whose figures are already what this machine's kernels achieved).
  double mem_efficiency = 1, flop_efficiency = 1;
  std::string source;  // "preset" or where it was measured
  // The verifier's host work per target forward beyond the forward itself (sampling or argmax of
  // every row, accept/reject, the emitted tokens' bookkeeping): verify_host_s + rows x
  // verify_host_row_s. Measured by --calibrate-drafters (SD's verify time minus its forwards);
  // 0 for the presets (on a GPU it is inside the graph-launched step).
  double verify_host_s = 0, verify_host_row_s = 0;
  // Per drafter (keyed by the simulator's drafter name: a preset such as smollm2-domino, the
  // path a model was given as, ngram, suffix): costs measured for it on this device.
  std::map<std::string, DrafterFit> drafter_fits;

  double peak(const std::string& dtype) const;  // falls back to bf16; Error when neither
  // Null when the profile has no fit for that drafter.
  const DrafterFit* drafter_fit(const std::string& drafter) const;
  // This device as that drafter's forwards see it: the fit's efficiency, peak (every dtype) and
  // per-forward overhead; the device itself when there is no fit.
  DeviceProfile for_drafter(const std::string& drafter) const;
  // Throws ssd::Error naming the field: zero/negative bandwidth or peak, negative overhead.
  void validate() const;
  nlohmann::json to_json() const;
  static DeviceProfile from_json(const nlohmann::json& j, const std::string& where);
};

struct LinkProfile {
  std::string name;
  double latency_s = 0;
  double bw_Bps = 0;

  void validate() const;  // zero or negative bandwidth, negative latency
  double message_s(double bytes) const { return latency_s + bytes / bw_Bps; }
  nlohmann::json to_json() const;
  static LinkProfile from_json(const nlohmann::json& j, const std::string& where);
};

// Ring collectives over `ranks` devices joined by `link` (see the top of the file).
double ring_all_reduce_s(const LinkProfile& link, int32_t ranks, double bytes);
double ring_all_gather_s(const LinkProfile& link, int32_t ranks, double bytes);

// Presets. device: h100-sxm, a100-sxm-80gb, l40s, cpu (a generic 2-core VM; calibrate instead).
// link: shm, pcie4, pcie5, nvlink4, nvlink3, ib400, eth25. Unknown names throw ssd::Error listing
// the known ones.
DeviceProfile device_preset(const std::string& name);
LinkProfile link_preset(const std::string& name);
std::vector<std::string> device_preset_names();
std::vector<std::string> link_preset_names();

// A device: a preset name, or a path to a JSON profile (written by --calibrate).
DeviceProfile load_device(const std::string& name_or_path);
LinkProfile load_link(const std::string& name_or_path);

}  // namespace ssd::sim
