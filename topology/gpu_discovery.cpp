#include "topology/gpu_discovery.h"

#include <dlfcn.h>
#include <fmt/format.h>

namespace ssd {
namespace {

// The few NVML entry points used, by their C signatures (nvml.h is not needed to build).
using Device = void*;
using InitFn = int (*)();
using CountFn = int (*)(unsigned*);
using HandleFn = int (*)(unsigned, Device*);
using NameFn = int (*)(Device, char*, unsigned);
struct Memory {
  unsigned long long total, free, used;
};
using MemoryFn = int (*)(Device, Memory*);
struct PciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
using PciFn = int (*)(Device, PciInfo*);
using TopoFn = int (*)(Device, Device, int*);

std::string level_name(int level) {
  switch (level) {
    case 0: return "same board";
    case 10: return "same board (multi-GPU)";
    case 20: return "PCIe switch";
    case 30: return "PCIe switches";
    case 40: return "PCIe host bridge";
    case 50: return "CPU socket (SMP)";
    default: return "system";
  }
}

}  // namespace

GpuDiscovery discover_gpus() {
  GpuDiscovery d;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    d.note = "no GPU: libnvidia-ml.so.1 (the NVIDIA driver's NVML) not found";
    return d;
  }
  auto sym = [&](const char* name) { return dlsym(lib, name); };
  auto init = reinterpret_cast<InitFn>(sym("nvmlInit_v2"));
  auto count = reinterpret_cast<CountFn>(sym("nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<HandleFn>(sym("nvmlDeviceGetHandleByIndex_v2"));
  auto name = reinterpret_cast<NameFn>(sym("nvmlDeviceGetName"));
  auto memory = reinterpret_cast<MemoryFn>(sym("nvmlDeviceGetMemoryInfo"));
  auto pci = reinterpret_cast<PciFn>(sym("nvmlDeviceGetPciInfo_v3"));
  auto topo = reinterpret_cast<TopoFn>(sym("nvmlDeviceGetTopologyCommonAncestor"));
  unsigned n = 0;
  if (!init || !count || !handle || init() != 0 || count(&n) != 0) {
    d.note = "no GPU: NVML did not initialise (no driver loaded?)";
    return d;
  }
  if (n == 0) d.note = "no GPU: NVML sees no device";
  std::vector<Device> devs(n, nullptr);
  for (unsigned i = 0; i < n; ++i) {
    GpuInfo g;
    g.index = static_cast<int>(i);
    if (handle(i, &devs[i]) != 0) continue;
    char buf[96] = {};
    if (name && name(devs[i], buf, sizeof buf) == 0) g.name = buf;
    Memory m{};
    if (memory && memory(devs[i], &m) == 0) g.memory_bytes = m.total;
    PciInfo p{};
    if (pci && pci(devs[i], &p) == 0) g.bus_id = p.bus_id;
    d.gpus.push_back(g);
  }
  d.links.assign(n, std::vector<std::string>(n));
  for (unsigned i = 0; i < n; ++i)
    for (unsigned j = 0; j < n; ++j) {
      int level = 0;
      if (i != j && topo && devs[i] && devs[j] && topo(devs[i], devs[j], &level) == 0)
        d.links[i][j] = level_name(level);
    }
  return d;  // the library stays loaded (NVML has no safe unload while handles live)
}

}  // namespace ssd
