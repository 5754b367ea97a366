// Safetensors parsing. The JSON header is untrusted: its length is bounded by the file, the JSON
// parser's errors become ssd::Error naming the file, duplicate keys (which a plain JSON parse would
// silently collapse) are rejected, and each tensor's dtype, shape and data_offsets are checked
// against each other and against the data section (in range, begin <= end, exact byte count, no two
// tensors overlapping) before a TensorRef points into the mapping.
#include "runtime/io/safetensors_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "runtime/core/error.h"
#include "runtime/io/byte_cursor.h"

namespace ssd {
namespace {

namespace fs = std::filesystem;
using io::add_ok;
using io::mul_ok;
using io::printable;
using nlohmann::json;

constexpr size_t kMaxDims = 4;
constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

// Parses JSON text, rejecting duplicate object keys at any depth; errors name `path`.
json parse_json_strict(std::string_view text, const std::string& path, std::string_view what) {
  std::vector<std::set<std::string>> open_objects;  // keys seen in each enclosing object
  auto cb = [&](int /*depth*/, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (ev == json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (ev == json::parse_event_t::key && !open_objects.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      SSD_CHECK(open_objects.back().insert(key).second, "{}: {}: duplicate JSON key '{}'", path,
                what, printable(key));
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), cb);
  } catch (const json::exception& e) {
    fail(fmt::format("{}: {} is not valid JSON: {}", path, what, e.what()));
  }
}

struct StDType {
  const char* name;
  DType type;
  uint64_t size;
};
constexpr StDType kDTypes[] = {{"F32", DType::F32, 4}, {"F16", DType::F16, 2}, {"BF16", DType::BF16, 2}};

struct Shard {
  std::vector<TensorRef> tensors;  // in file order
  std::map<std::string, std::string> metadata;
};

uint64_t unsigned_field(const json& v, const std::string& path, const std::string& tensor,
                        std::string_view field) {
  SSD_CHECK(v.is_number_unsigned(), "{}: tensor '{}': {} entry {} is not a non-negative integer",
            path, tensor, field, printable(v.dump()));
  return v.get<uint64_t>();
}

TensorRef parse_tensor(const std::string& name, const json& e, const MappedFile& f,
                       uint64_t data_start, uint64_t* begin_out) {
  const std::string& path = f.path();
  const std::string pname = printable(name);
  SSD_CHECK(e.is_object(), "{}: tensor '{}': entry is not a JSON object", path, pname);
  for (const char* field : {"dtype", "shape", "data_offsets"})
    SSD_CHECK(e.contains(field), "{}: tensor '{}': missing field '{}'", path, pname, field);

  const json& jd = e["dtype"];
  SSD_CHECK(jd.is_string(), "{}: tensor '{}': dtype is not a string", path, pname);
  const auto& dname = jd.get_ref<const std::string&>();
  const StDType* dt = nullptr;
  for (const auto& d : kDTypes)
    if (dname == d.name) dt = &d;
  SSD_CHECK(dt != nullptr, "{}: tensor '{}': dtype '{}' is not supported (supported: F32, F16, BF16)",
            path, pname, printable(dname));

  TensorRef t;
  t.name = name;
  t.type = dt->type;
  t.file = path;
  const json& js = e["shape"];
  SSD_CHECK(js.is_array(), "{}: tensor '{}': shape is not an array", path, pname);
  SSD_CHECK(js.size() <= kMaxDims, "{}: tensor '{}': shape has {} dimensions, at most {} supported",
            path, pname, js.size(), kMaxDims);
  uint64_t elems = 1;
  for (auto it = js.rbegin(); it != js.rend(); ++it) {  // reversed: innermost first
    const uint64_t n = unsigned_field(*it, path, pname, "shape");
    SSD_CHECK(n > 0, "{}: tensor '{}': shape {} has a zero dimension (empty tensors are not supported)",
              path, pname, js.dump());
    SSD_CHECK(mul_ok(elems, n, &elems), "{}: tensor '{}': shape {} overflows 64 bits", path, pname,
              js.dump());
    t.ne.push_back(n);
  }
  if (t.ne.empty()) t.ne.push_back(1);  // a scalar
  SSD_CHECK(mul_ok(elems, dt->size, &t.nbytes), "{}: tensor '{}': byte size of shape {} overflows",
            path, pname, js.dump());

  const json& jo = e["data_offsets"];
  SSD_CHECK(jo.is_array() && jo.size() == 2, "{}: tensor '{}': data_offsets is not a [begin, end] pair",
            path, pname);
  const uint64_t b = unsigned_field(jo[0], path, pname, "data_offsets");
  const uint64_t en = unsigned_field(jo[1], path, pname, "data_offsets");
  const uint64_t data_size = f.size() - data_start;
  SSD_CHECK(b <= en, "{}: tensor '{}': data_offsets [{}, {}] has begin > end", path, pname, b, en);
  SSD_CHECK(en <= data_size,
            "{}: tensor '{}': data_offsets [{}, {}] exceed the data section of {} bytes", path,
            pname, b, en, data_size);
  SSD_CHECK(en - b == t.nbytes,
            "{}: tensor '{}': data_offsets [{}, {}] hold {} bytes, but shape {} of {} needs {}", path,
            pname, b, en, en - b, js.dump(), dt->name, t.nbytes);
  t.data = f.data() + data_start + b;
  *begin_out = b;
  return t;
}

Shard parse_shard(const MappedFile& f) {
  const std::string& path = f.path();
  SSD_CHECK(f.size() > 0, "{}: file is empty", path);
  io::ByteCursor c(f.data(), f.size());
  SSD_CHECK(f.size() >= 8, "{}: file is {} bytes, too small for the 8-byte header length", path,
            f.size());
  const uint64_t n = c.u64("header length");
  SSD_CHECK(n <= c.remaining(), "{}: header length {} exceeds the {} bytes after the length field",
            path, n, c.remaining());
  const json header = parse_json_strict(c.bytes(n, "header"), path, "header");
  SSD_CHECK(header.is_object(), "{}: header is not a JSON object", path);
  const uint64_t data_start = 8 + n;

  Shard s;
  std::vector<std::pair<uint64_t, size_t>> order;  // (begin, index in s.tensors)
  for (const auto& [key, val] : header.items()) {
    if (key == "__metadata__") {
      SSD_CHECK(val.is_object(), "{}: __metadata__ is not a JSON object", path);
      for (const auto& [mk, mv] : val.items()) {
        SSD_CHECK(mv.is_string(), "{}: __metadata__ value of '{}' is not a string", path,
                  printable(mk));
        s.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    uint64_t begin = 0;
    s.tensors.push_back(parse_tensor(key, val, f, data_start, &begin));
    order.emplace_back(begin, s.tensors.size() - 1);
  }

  // File order, and no two byte ranges overlapping.
  std::sort(order.begin(), order.end());
  std::vector<TensorRef> sorted;
  sorted.reserve(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    TensorRef& t = s.tensors[order[i].second];
    if (i > 0) {
      const TensorRef& prev = sorted.back();
      const uint64_t prev_end = order[i - 1].first + prev.nbytes;
      SSD_CHECK(prev_end <= order[i].first,
                "{}: tensor '{}': data_offsets begin {} overlaps tensor '{}' (bytes [{}, {}))",
                path, printable(t.name), order[i].first, printable(prev.name), order[i - 1].first,
                prev_end);
    }
    sorted.push_back(std::move(t));
  }
  s.tensors = std::move(sorted);
  return s;
}

bool is_directory(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

std::string parent_dir(const std::string& p) {
  const fs::path parent = fs::path(p).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// weight_map of an index file: tensor name -> shard file name (relative to the index's folder).
std::map<std::string, std::string> read_weight_map(const std::string& index_path) {
  const MappedFile f = MappedFile::open(index_path);
  SSD_CHECK(f.size() > 0, "{}: file is empty", index_path);
  const std::string_view text(reinterpret_cast<const char*>(f.data()), f.size());
  const json j = parse_json_strict(text, index_path, "index");
  SSD_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(),
            "{}: no \"weight_map\" object", index_path);
  std::map<std::string, std::string> out;
  for (const auto& [name, shard] : j["weight_map"].items()) {
    SSD_CHECK(shard.is_string(), "{}: weight_map entry '{}' is not a file name", index_path,
              printable(name));
    const auto& file = shard.get_ref<const std::string&>();
    const fs::path sp(file);
    bool escapes = sp.is_absolute() || file.empty();
    for (const auto& part : sp) escapes = escapes || part == "..";
    SSD_CHECK(!escapes, "{}: weight_map entry '{}': shard '{}' must be a relative path inside the "
              "checkpoint folder", index_path, printable(name), printable(file));
    out.emplace(name, file);
  }
  SSD_CHECK(!out.empty(), "{}: weight_map is empty", index_path);
  return out;
}

}  // namespace

SafetensorsModel SafetensorsModel::parse(MappedFile file) {
  SafetensorsModel m;
  m.dir_ = parent_dir(file.path());
  Shard s = parse_shard(file);
  m.files_.push_back(std::move(file));  // moving keeps the mapping (and the data pointers) in place
  m.tensors_ = std::move(s.tensors);
  m.metadata_ = std::move(s.metadata);
  for (size_t i = 0; i < m.tensors_.size(); ++i) m.tensor_index_.emplace(m.tensors_[i].name, i);
  return m;
}

SafetensorsModel SafetensorsModel::open(const std::string& path) {
  std::string target = path;
  if (is_directory(path)) {
    const std::string index = (fs::path(path) / kIndexName).string();
    const std::string single = (fs::path(path) / kSingleName).string();
    SSD_CHECK(exists(index) || exists(single), "{}: directory has neither {} nor {}", path,
              kIndexName, kSingleName);
    target = exists(index) ? index : single;
  }
  if (fs::path(target).extension() != ".json") {
    SafetensorsModel m = parse(MappedFile::open(target));
    if (is_directory(path)) m.dir_ = path;
    return m;
  }

  // Sharded: open each shard once; the weight_map decides which shard a tensor is read from.
  const std::map<std::string, std::string> weight_map = read_weight_map(target);
  std::map<std::string, std::vector<std::string>> by_shard;  // shard -> tensor names
  for (const auto& [name, shard] : weight_map) by_shard[shard].push_back(name);

  SafetensorsModel m;
  m.dir_ = is_directory(path) ? path : parent_dir(target);
  for (const auto& [shard, names] : by_shard) {
    MappedFile f = MappedFile::open((fs::path(m.dir_) / shard).string());
    Shard s = parse_shard(f);
    std::map<std::string_view, size_t> in_file;
    for (size_t i = 0; i < s.tensors.size(); ++i) in_file.emplace(s.tensors[i].name, i);
    for (const auto& name : names)
      SSD_CHECK(in_file.count(name) > 0, "{}: tensor '{}' is mapped to shard '{}', which does not "
                "contain it", target, printable(name), shard);
    for (auto& t : s.tensors) {
      auto it = weight_map.find(t.name);
      if (it == weight_map.end() || it->second != shard) continue;  // listed under another shard
      m.tensor_index_.emplace(t.name, m.tensors_.size());
      m.tensors_.push_back(std::move(t));
    }
    for (auto& [k, v] : s.metadata) m.metadata_.emplace(k, v);  // first shard wins on conflicts
    m.files_.push_back(std::move(f));
  }
  return m;
}

const TensorRef* SafetensorsModel::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace ssd
