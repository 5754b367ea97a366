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

struct DeviceProfile {
  std::string name;
  double mem_bw_Bps = 0;
  std::map<std::string, double> peak_flops;  // dtype -> FLOP/s
  double overhead_s = 0;
  double layer_overhead_s = 0;  // more fixed cost per layer (CPU: the pool's hand-offs per op)
  double mem_bytes = 0;
  // Fractions of the peaks that real kernels reach (a preset's assumption; 1 for a calibrated
  // profile, whose figures are already what this machine's kernels achieved).
  double mem_efficiency = 1, flop_efficiency = 1;
  std::string source;  // "preset" or where it was measured

  double peak(const std::string& dtype) const;  // falls back to bf16; Error when neither
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
