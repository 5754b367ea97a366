// The GPUs of this node and the links between them, through NVML when the driver's library is
// present. libnvidia-ml is dlopen'ed at the call, so the binary neither links nor needs it: on a
// machine without it (or without a GPU) the answer says why there is none.
#pragma once

#include <string>
#include <vector>

namespace ssd {

struct GpuInfo {
  int index = 0;
  std::string name;
  std::string bus_id;
  unsigned long long memory_bytes = 0;
};

struct GpuDiscovery {
  std::vector<GpuInfo> gpus;
  // [i][j] for i != j: "NVLink", "same board", "PCIe switch", "PCIe host bridge", "CPU socket
  // (SMP)", "system"; empty when unknown.
  std::vector<std::vector<std::string>> links;
  std::string note;  // why there is no GPU ("no GPU: libnvidia-ml.so.1 not found"), else ""
};

GpuDiscovery discover_gpus();

}  // namespace ssd
