// Checkpoint and optimiser-state files (see train_checkpoint.h).
#include "runtime/train/train_checkpoint.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "kernels/cpu/rowops.h"
#include "runtime/core/error.h"
#include "runtime/drafters/domino/domino_checkpoint.h"
#include "runtime/io/safetensors_writer.h"

namespace ssd::train {
namespace {

constexpr char kMagic[8] = {'S', 'S', 'D', 'O', 'P', 'T', '0', '1'};

void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_floats(std::vector<uint8_t>& out, const std::vector<float>& v) {
  const size_t at = out.size();
  out.resize(at + v.size() * 4);
  std::memcpy(out.data() + at, v.data(), v.size() * 4);
}

}  // namespace

void save_checkpoint(const std::string& path, const DominoConfig& cfg, const ParamLayout& layout,
                     const float* params, DType type,
                     const std::map<std::string, std::string>& provenance) {
  SafetensorsWriter out;
  out.add_metadata("domino_config", cfg.to_json());
  for (const auto& [k, v] : provenance) out.add_metadata(k, v);
  for (const ParamTensor& t : layout.tensors())
    out.add_tensor(t.name, t.shape, std::span(params + t.offset, static_cast<size_t>(t.size)), type);
  out.write(path);
}

std::vector<float> load_checkpoint_params(const std::string& path, const DominoConfig& cfg,
                                          const ParamLayout& layout) {
  const DominoCheckpoint ck = DominoCheckpoint::open(path);  // checks names, shapes, dtypes
  SSD_CHECK(ck.config().to_json() == cfg.to_json(), "{}: its config {} differs from {}", path,
            ck.config().to_json(), cfg.to_json());
  std::vector<float> params(layout.total());
  for (const ParamTensor& t : layout.tensors()) {
    const TensorRef* ref = ck.find(t.name);
    SSD_CHECK(ref && static_cast<int64_t>(ref->elements()) == t.size,
              "{}: tensor {} missing or of the wrong size", path, t.name);
    kernels::dequantize_row(ref->type, ref->data, params.data() + t.offset, t.size);
  }
  return params;
}

void save_optim_state(const std::string& path, const OptimState& s) {
  SSD_ASSERT(s.m.size() == s.params.size() && s.v.size() == s.params.size());
  const std::string header = nlohmann::json{{"step", s.step},
                                            {"seed", s.seed},
                                            {"params", s.params.size()},
                                            {"wall_seconds", s.wall_seconds}}
                                 .dump();
  std::vector<uint8_t> out(kMagic, kMagic + 8);
  put_u64(out, header.size());
  out.insert(out.end(), header.begin(), header.end());
  put_floats(out, s.params);
  put_floats(out, s.m);
  put_floats(out, s.v);
  write_file_atomic(path, out);
}

OptimState load_optim_state(const std::string& path, int64_t n_params) {
  std::ifstream f(path, std::ios::binary);
  SSD_CHECK(f, "--resume: cannot open the optimiser state {} (written beside each checkpoint)",
            path);
  std::vector<uint8_t> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  SSD_CHECK(b.size() >= 16 && std::memcmp(b.data(), kMagic, 8) == 0,
            "{}: not a Domino optimiser state (bad magic)", path);
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= static_cast<uint64_t>(b[8 + i]) << (8 * i);
  SSD_CHECK(16 + hl <= b.size(), "{}: truncated header", path);
  const auto j = nlohmann::json::parse(b.begin() + 16, b.begin() + 16 + hl, nullptr, false);
  SSD_CHECK(!j.is_discarded() && j.contains("step") && j.contains("params"),
            "{}: malformed header", path);
  OptimState s;
  s.step = j["step"].get<int64_t>();
  s.seed = j.value("seed", uint64_t{0});
  s.wall_seconds = j.value("wall_seconds", 0.0);
  const int64_t n = j["params"].get<int64_t>();
  SSD_CHECK(n == n_params, "{}: holds {} parameters but the checkpoint's config has {}", path, n,
            n_params);
  SSD_CHECK(b.size() == 16 + hl + 3 * static_cast<uint64_t>(n) * 4,
            "{}: {} bytes, expected {} (truncated or not this run's state)", path, b.size(),
            16 + hl + 3 * n * 4);
  const uint8_t* p = b.data() + 16 + hl;
  for (std::vector<float>* v : {&s.params, &s.m, &s.v}) {
    v->resize(n);
    std::memcpy(v->data(), p, n * 4);
    p += n * 4;
  }
  return s;
}

}  // namespace ssd::train
