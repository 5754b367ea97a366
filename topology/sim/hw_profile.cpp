#include "topology/sim/hw_profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>

#include "runtime/core/error.h"

namespace ssd::sim {
namespace {

double num(const nlohmann::json& j, const char* key, const std::string& where, double dflt,
           bool required) {
  auto it = j.find(key);
  if (it == j.end()) {
    SSD_CHECK(!required, "{}: missing field '{}'", where, key);
    return dflt;
  }
  SSD_CHECK(it->is_number(), "{}: field '{}' must be a number, got {}", where, key, it->dump());
  return it->get<double>();
}

// A profile's numeric fields, each named once: the table drives both writing and reading (a
// missing required field, or a field that is not a number, is an error naming it).
template <class T>
struct NumField {
  const char* key;
  double T::*member;
  double dflt;
  bool required;
};

template <class T, size_t N>
void write_fields(nlohmann::json& j, const NumField<T> (&fields)[N], const T& from) {
  for (const NumField<T>& f : fields) j[f.key] = from.*f.member;
}

template <class T, size_t N>
void read_fields(const nlohmann::json& j, const NumField<T> (&fields)[N], T& to,
                 const std::string& where) {
  for (const NumField<T>& f : fields) to.*f.member = num(j, f.key, where, f.dflt, f.required);
}

constexpr NumField<DrafterFit> kFitFields[] = {
    {"mem_efficiency", &DrafterFit::mem_efficiency, 1, false},
    {"peak_flops", &DrafterFit::peak_flops, 0, false},
    {"forward_s", &DrafterFit::forward_s, 0, false},
    {"call_s", &DrafterFit::call_s, 0, false},
    {"lookup_s", &DrafterFit::lookup_s, 0, false},
    {"rank_row_s", &DrafterFit::rank_row_s, 0, false},
    {"target_switch_s", &DrafterFit::target_switch_s, 0, false},
    {"target_seq_s", &DrafterFit::target_seq_s, 0, false},
    {"median_rel_err", &DrafterFit::median_rel_err, 0, false},
    {"max_rel_err", &DrafterFit::max_rel_err, 0, false},
};

constexpr NumField<DeviceProfile> kDeviceFields[] = {
    {"mem_bw_Bps", &DeviceProfile::mem_bw_Bps, 0, true},
    {"overhead_s", &DeviceProfile::overhead_s, 0, true},
    {"layer_overhead_s", &DeviceProfile::layer_overhead_s, 0, false},
    {"seq_layer_overhead_s", &DeviceProfile::seq_layer_overhead_s, 0, false},
    {"kv_seq_pos_layer_s", &DeviceProfile::kv_seq_pos_layer_s, 0, false},
    {"kv_row_pos_layer_s", &DeviceProfile::kv_row_pos_layer_s, 0, false},
    {"roofline_p", &DeviceProfile::roofline_p, 0, false},
    {"mem_bytes", &DeviceProfile::mem_bytes, 0, false},
    {"mem_efficiency", &DeviceProfile::mem_efficiency, 1, false},
    {"flop_efficiency", &DeviceProfile::flop_efficiency, 1, false},
    {"verify_host_s", &DeviceProfile::verify_host_s, 0, false},
    {"verify_host_row_s", &DeviceProfile::verify_host_row_s, 0, false},
};

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  SSD_CHECK(in.good(), "cannot open '{}'", path);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(fmt::format("{}: not valid JSON ({})", path, e.what()));
  }
}

constexpr double kGB = 1e9, kTF = 1e12, kUs = 1e-6;

DeviceProfile gpu(std::string name, double bw_GBps, double bf16_TF, double fp8_TF, double fp32_TF,
                  double mem_GB) {
  DeviceProfile d;
  d.name = std::move(name);
  d.mem_bw_Bps = bw_GBps * kGB;
  d.peak_flops = {{"bf16", bf16_TF * kTF}, {"fp16", bf16_TF * kTF}, {"fp32", fp32_TF * kTF},
                  {"fp8", fp8_TF * kTF}, {"int8", fp8_TF * kTF}};
  d.overhead_s = 100 * kUs;      // one forward: sync + sampling's host share
  d.layer_overhead_s = 5 * kUs;  // ~10 kernels per layer at ~0.5 us each inside a CUDA graph
  d.mem_bytes = mem_GB * kGB;
  d.mem_efficiency = 0.8;
  d.flop_efficiency = 0.6;
  d.source = "preset";
  return d;
}

}  // namespace

nlohmann::json DrafterFit::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  write_fields(j, kFitFields, *this);
  return j;
}

DrafterFit DrafterFit::from_json(const nlohmann::json& j, const std::string& where) {
  SSD_CHECK(j.is_object(), "{}: a drafter fit must be a JSON object", where);
  DrafterFit f;
  read_fields(j, kFitFields, f, where);
  SSD_CHECK(f.mem_efficiency > 0 && f.mem_efficiency <= 1, "{}: mem_efficiency must be in (0, 1] "
            "(got {})", where, f.mem_efficiency);
  SSD_CHECK(f.peak_flops >= 0 && f.forward_s >= 0 && f.call_s >= 0 && f.lookup_s >= 0 &&
                f.rank_row_s >= 0 && f.target_switch_s >= 0 && f.target_seq_s >= 0,
            "{}: peak_flops, forward_s, call_s, lookup_s, rank_row_s, target_switch_s and "
            "target_seq_s must be >= 0",
            where);
  return f;
}

const DrafterFit* DeviceProfile::drafter_fit(const std::string& drafter) const {
  auto it = drafter_fits.find(drafter);
  return it == drafter_fits.end() ? nullptr : &it->second;
}

DeviceProfile DeviceProfile::for_drafter(const std::string& drafter) const {
  const DrafterFit* f = drafter_fit(drafter);
  if (!f) return *this;
  DeviceProfile d;
  d.name = name + "/" + drafter;
  d.mem_bw_Bps = mem_bw_Bps;
  d.mem_bytes = mem_bytes;
  d.mem_efficiency = f->mem_efficiency;
  d.roofline_p = roofline_p;
  d.flop_efficiency = 1;
  d.peak_flops = {{"bf16", f->peak_flops > 0 ? f->peak_flops : peak("bf16")}};
  d.overhead_s = f->forward_s;
  d.layer_overhead_s = 0;
  d.source = source;
  return d;
}

double DeviceProfile::peak(const std::string& dtype) const {
  auto it = peak_flops.find(dtype);
  if (it == peak_flops.end()) it = peak_flops.find("bf16");
  SSD_CHECK(it != peak_flops.end(), "device '{}' has no peak FLOP/s for '{}' nor for bf16", name,
            dtype);
  return it->second * flop_efficiency;
}

void DeviceProfile::validate() const {
  SSD_CHECK(mem_bw_Bps > 0, "device '{}': memory bandwidth must be > 0 (got {})", name, mem_bw_Bps);
  SSD_CHECK(!peak_flops.empty(), "device '{}': no peak FLOP/s given", name);
  for (const auto& [dt, v] : peak_flops)
    SSD_CHECK(v > 0, "device '{}': peak FLOP/s for {} must be > 0 (got {})", name, dt, v);
  SSD_CHECK(overhead_s >= 0 && layer_overhead_s >= 0 && seq_layer_overhead_s >= 0,
            "device '{}': per-forward, per-layer and per-sequence overheads must be >= 0 (got {}, "
            "{} and {})",
            name, overhead_s, layer_overhead_s, seq_layer_overhead_s);
  SSD_CHECK(kv_seq_pos_layer_s >= 0 && kv_row_pos_layer_s >= 0,
            "device '{}': attention costs per cached position must be >= 0 (got {} per sequence, "
            "{} per row)",
            name, kv_seq_pos_layer_s, kv_row_pos_layer_s);
  SSD_CHECK(roofline_p == 0 || roofline_p >= 1,
            "device '{}': roofline_p must be 0 (max) or >= 1 (got {})", name, roofline_p);
  SSD_CHECK(mem_efficiency > 0 && mem_efficiency <= 1 && flop_efficiency > 0 &&
                flop_efficiency <= 1,
            "device '{}': efficiencies must be in (0, 1] (got {} and {})", name, mem_efficiency,
            flop_efficiency);
}

nlohmann::json DeviceProfile::to_json() const {
  nlohmann::json j = {{"kind", "device"}, {"name", name}, {"peak_flops", peak_flops},
                      {"source", source}};
  write_fields(j, kDeviceFields, *this);
  if (!drafter_fits.empty()) {
    nlohmann::json fits = nlohmann::json::object();
    for (const auto& [n, f] : drafter_fits) fits[n] = f.to_json();
    j["drafter_fits"] = fits;
  }
  return j;
}

DeviceProfile DeviceProfile::from_json(const nlohmann::json& j, const std::string& where) {
  SSD_CHECK(j.is_object(), "{}: a device profile must be a JSON object", where);
  DeviceProfile d;
  d.name = j.value("name", where);
  read_fields(j, kDeviceFields, d, where);
  d.source = j.value("source", where);
  SSD_CHECK(d.verify_host_s >= 0 && d.verify_host_row_s >= 0,
            "{}: verify_host_s and verify_host_row_s must be >= 0", where);
  if (auto fits = j.find("drafter_fits"); fits != j.end()) {
    SSD_CHECK(fits->is_object(), "{}: drafter_fits must be an object keyed by drafter", where);
    for (const auto& [n, f] : fits->items())
      d.drafter_fits[n] = DrafterFit::from_json(f, where + ": drafter_fits." + n);
  }
  auto pf = j.find("peak_flops");
  SSD_CHECK(pf != j.end() && pf->is_object(), "{}: missing object 'peak_flops'", where);
  for (const auto& [dt, v] : pf->items()) {
    SSD_CHECK(v.is_number(), "{}: peak_flops.{} must be a number", where, dt);
    d.peak_flops[dt] = v.get<double>();
  }
  d.validate();
  return d;
}

void LinkProfile::validate() const {
  SSD_CHECK(bw_Bps > 0, "link '{}': bandwidth must be > 0 (got {})", name, bw_Bps);
  SSD_CHECK(latency_s >= 0, "link '{}': latency must be >= 0 (got {})", name, latency_s);
}

nlohmann::json LinkProfile::to_json() const {
  return {{"kind", "link"}, {"name", name}, {"latency_s", latency_s}, {"bw_Bps", bw_Bps}};
}

LinkProfile LinkProfile::from_json(const nlohmann::json& j, const std::string& where) {
  SSD_CHECK(j.is_object(), "{}: a link profile must be a JSON object", where);
  LinkProfile l;
  l.name = j.value("name", where);
  l.latency_s = num(j, "latency_s", where, 0, true);
  l.bw_Bps = num(j, "bw_Bps", where, 0, true);
  l.validate();
  return l;
}

double ring_all_reduce_s(const LinkProfile& link, int32_t ranks, double bytes) {
  SSD_CHECK(ranks >= 1, "a collective needs at least one rank (got {})", ranks);
  if (ranks == 1) return 0;
  const double steps = 2.0 * (ranks - 1);
  return steps / ranks * bytes / link.bw_Bps + steps * link.latency_s;
}

double ring_all_gather_s(const LinkProfile& link, int32_t ranks, double bytes) {
  SSD_CHECK(ranks >= 1, "a collective needs at least one rank (got {})", ranks);
  if (ranks == 1) return 0;
  const double steps = ranks - 1.0;
  return steps / ranks * bytes / link.bw_Bps + steps * link.latency_s;
}

std::vector<std::string> device_preset_names() {
  return {"h100-sxm", "a100-sxm-80gb", "l40s", "cpu"};
}

DeviceProfile device_preset(const std::string& name) {
  // Dense (no sparsity) vendor peaks: H100 SXM5 HBM3 3.35 TB/s, BF16 989 TFLOP/s, FP8 1979;
  // A100 SXM4 80 GB HBM2e 2.039 TB/s, BF16 312, INT8 624; L40S GDDR6 864 GB/s, BF16 362, FP8 733.
  if (name == "h100-sxm") return gpu(name, 3350, 989, 1979, 67, 80);
  if (name == "a100-sxm-80gb") return gpu(name, 2039, 312, 624, 19.5, 80);
  if (name == "l40s") return gpu(name, 864, 362, 733, 91.6, 48);
  if (name == "cpu") {
    // A small x86 VM: two cores of AVX-512; calibrate (--calibrate) for real figures.
    DeviceProfile d;
    d.name = name;
    d.mem_bw_Bps = 10 * kGB;
    d.peak_flops = {{"bf16", 100e9}, {"fp32", 100e9}, {"int8", 200e9}};
    d.overhead_s = 200 * kUs;
    d.source = "preset";
    return d;
  }
  fail(fmt::format("unknown device preset '{}' (known: {}; or a JSON profile path)", name,
                   fmt::join(device_preset_names(), ", ")));
}

std::vector<std::string> link_preset_names() {
  return {"shm", "pcie4", "pcie5", "nvlink3", "nvlink4", "ib400", "eth25"};
}

LinkProfile link_preset(const std::string& name) {
  // One direction's bandwidth. NVLink 4 is 900 GB/s bidirectional per H100 (450 each way),
  // NVLink 3 600 (300); PCIe 4 x16 ~25 GB/s and PCIe 5 ~50 achieved; InfiniBand NDR 400 Gb/s =
  // 50 GB/s; 25 GbE = 3.125 GB/s. Latencies are per message including the software stack.
  if (name == "shm") return {name, 2 * kUs, 10 * kGB};
  if (name == "pcie4") return {name, 5 * kUs, 25 * kGB};
  if (name == "pcie5") return {name, 5 * kUs, 50 * kGB};
  if (name == "nvlink3") return {name, 3 * kUs, 300 * kGB};
  if (name == "nvlink4") return {name, 3 * kUs, 450 * kGB};
  if (name == "ib400") return {name, 5 * kUs, 50 * kGB};
  if (name == "eth25") return {name, 30 * kUs, 3.125 * kGB};
  fail(fmt::format("unknown link preset '{}' (known: {}; or a JSON profile path)", name,
                   fmt::join(link_preset_names(), ", ")));
}

DeviceProfile load_device(const std::string& name_or_path) {
  if (name_or_path.ends_with(".json") || std::filesystem::exists(name_or_path))
    return DeviceProfile::from_json(read_json(name_or_path), name_or_path);
  return device_preset(name_or_path);
}

LinkProfile load_link(const std::string& name_or_path) {
  if (name_or_path.ends_with(".json") || std::filesystem::exists(name_or_path))
    return LinkProfile::from_json(read_json(name_or_path), name_or_path);
  return link_preset(name_or_path);
}

}  // namespace ssd::sim
