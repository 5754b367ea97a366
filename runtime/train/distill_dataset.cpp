// Reader and writer of the distillation dataset file (format in distill_dataset.h). The writer
// streams records as they come (a sequence's features are never held twice) and writes the
// index and the header last; the reader checks every index entry once at open so read(i) can
// trust offsets and lengths.
#include "runtime/train/distill_dataset.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "kernels/cpu/half.h"
#include "runtime/core/error.h"
#include "runtime/core/hash.h"

namespace ssd {
namespace {

constexpr std::array<char, 8> kMagic = {'S', 'S', 'D', 'D', 'I', 'S', 'T', '\0'};
constexpr std::array<char, 8> kTrailer = {'S', 'S', 'D', 'D', 'E', 'N', 'D', '\0'};
constexpr uint32_t kVersion = 1;
constexpr uint64_t kFixedHeader = 64;
constexpr uint64_t kRecordAlign = 64;
constexpr uint64_t kIndexEntry = 24;
constexpr uint32_t kMaxLayers = 4096;
constexpr uint32_t kMaxDigest = 4096;

uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

uint64_t header_bytes(size_t n_layers, size_t digest_len) {
  return round_up(kFixedHeader + 4 * n_layers + 4 + digest_len, kRecordAlign);
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
void store(std::vector<uint8_t>& out, size_t at, T v) {
  std::memcpy(out.data() + at, &v, sizeof v);
}

}  // namespace

std::string model_file_digest(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p(path);
  const bool dir = std::filesystem::is_directory(p, ec);
  std::string text = fmt::format("{}|", dir ? 0 : 1);
  const std::filesystem::path file = dir ? p / "config.json" : p;
  text += std::to_string(std::filesystem::file_size(file, ec));
  std::ifstream in(file, std::ios::binary);
  std::string head(64 * 1024, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return fmt::format("{:016x}", fnv1a(text + head));
}

// ---------------------------------------------------------------- reader

DistillDataset DistillDataset::open(const std::string& path) {
  DistillDataset d;
  d.file_ = MappedFile::open(path);
  const uint8_t* b = d.file_.data();
  const uint64_t size = d.file_.size();
  SSD_CHECK(size >= kFixedHeader + 8, "{}: not a distill dataset ({} bytes, shorter than the "
            "64-byte header)", path, size);
  SSD_CHECK(std::memcmp(b, kMagic.data(), 8) == 0,
            "{}: not a distill dataset (bad magic; expected \"SSDDIST\")", path);
  const uint32_t version = load<uint32_t>(b + 8);
  SSD_CHECK(version == kVersion, "{}: distill dataset version {} (this build reads version {})",
            path, version, kVersion);
  const uint32_t n_layers = load<uint32_t>(b + 12);
  d.dim_ = load<int64_t>(b + 16);
  d.vocab_ = load<int64_t>(b + 24);
  const uint64_t n_seq = load<uint64_t>(b + 32);
  const uint64_t index_offset = load<uint64_t>(b + 40);
  const uint64_t total = load<uint64_t>(b + 48);
  const uint64_t response = load<uint64_t>(b + 56);
  SSD_CHECK(n_layers >= 1 && n_layers <= kMaxLayers, "{}: bad layer count {}", path, n_layers);
  SSD_CHECK(d.dim_ >= 1 && d.dim_ <= (1 << 20), "{}: bad hidden size {}", path, d.dim_);
  SSD_CHECK(d.vocab_ >= 1 && d.vocab_ <= (1 << 24), "{}: bad vocabulary size {}", path, d.vocab_);
  SSD_CHECK(kFixedHeader + 4ull * n_layers + 4 <= size, "{}: truncated header", path);
  for (uint32_t l = 0; l < n_layers; ++l) {
    const int32_t layer = load<int32_t>(b + kFixedHeader + 4 * l);
    SSD_CHECK(layer >= 0, "{}: bad target layer {} at index {}", path, layer, l);
    d.layers_.push_back(layer);
  }
  const uint64_t digest_at = kFixedHeader + 4ull * n_layers;
  const uint32_t digest_len = load<uint32_t>(b + digest_at);
  SSD_CHECK(digest_len <= kMaxDigest && digest_at + 4 + digest_len <= size,
            "{}: truncated header (model digest of {} bytes)", path, digest_len);
  d.digest_.assign(reinterpret_cast<const char*>(b + digest_at + 4), digest_len);
  const uint64_t first_record = header_bytes(n_layers, digest_len);

  SSD_CHECK(n_seq <= size / kIndexEntry, "{}: bad sequence count {}", path, n_seq);
  SSD_CHECK(index_offset >= first_record && index_offset % 8 == 0 &&
                index_offset <= size && size - index_offset == n_seq * kIndexEntry + 8,
            "{}: truncated or malformed file: {} bytes, but the header places an index of {} "
            "entries at offset {} (was the file cut short?)",
            path, size, n_seq, index_offset);
  SSD_CHECK(std::memcmp(b + size - 8, kTrailer.data(), 8) == 0,
            "{}: bad trailer (file truncated or corrupted)", path);

  const uint64_t row_bytes = 4 + 2 * static_cast<uint64_t>(d.feature_dim());
  uint64_t next_free = first_record, sum_l = 0, sum_resp = 0;
  d.index_.resize(n_seq);
  for (uint64_t i = 0; i < n_seq; ++i) {
    const uint8_t* e = b + index_offset + i * kIndexEntry;
    Entry& en = d.index_[i];
    en.offset = load<uint64_t>(e);
    en.length = load<int32_t>(e + 8);
    en.prompt_len = load<int32_t>(e + 12);
    SSD_CHECK(en.length >= 1 && en.prompt_len >= 0 && en.prompt_len <= en.length,
              "{}: sequence {} has length {} and prompt length {}", path, i, en.length,
              en.prompt_len);
    SSD_CHECK(en.offset >= next_free && en.offset % kRecordAlign == 0 &&
                  en.offset <= index_offset &&
                  (index_offset - en.offset) / row_bytes >= static_cast<uint64_t>(en.length),
              "{}: sequence {} (offset {}, length {}) lies outside the records area", path, i,
              en.offset, en.length);
    next_free = en.offset + row_bytes * static_cast<uint64_t>(en.length);
    sum_l += static_cast<uint64_t>(en.length);
    sum_resp += static_cast<uint64_t>(en.length - en.prompt_len);
  }
  SSD_CHECK(sum_l == total && sum_resp == response,
            "{}: header counts {} tokens ({} response) but the index holds {} ({})", path, total,
            response, sum_l, sum_resp);
  d.total_tokens_ = static_cast<int64_t>(total);
  d.response_tokens_ = static_cast<int64_t>(response);
  return d;
}

const int32_t* DistillDataset::tokens_of(size_t i) const {
  SSD_CHECK(i < index_.size(), "{}: sequence {} out of range ({} sequences)", path(), i,
            index_.size());
  return reinterpret_cast<const int32_t*>(file_.data() + index_[i].offset);
}

int32_t DistillDataset::length(size_t i) const {
  SSD_CHECK(i < index_.size(), "{}: sequence {} out of range ({} sequences)", path(), i,
            index_.size());
  return index_[i].length;
}

int32_t DistillDataset::prompt_len(size_t i) const {
  SSD_CHECK(i < index_.size(), "{}: sequence {} out of range ({} sequences)", path(), i,
            index_.size());
  return index_[i].prompt_len;
}

void DistillDataset::check_target(int64_t target_dim, int64_t target_vocab) const {
  SSD_CHECK(dim_ == target_dim && vocab_ == target_vocab,
            "--data {}: made for a target of dim {} / vocab {}, but --model has {} / {}", path(),
            dim_, vocab_, target_dim, target_vocab);
}

void DistillDataset::check_layers(const std::vector<int32_t>& layers, const std::string& who) const {
  SSD_CHECK(layers == layers_, "{} reads target layers {} but --data holds layers {}", who,
            fmt::join(layers, ","), fmt::join(layers_, ","));
}

DistillSequence DistillDataset::read(size_t i) const {
  const int32_t* tok = tokens_of(i);
  const Entry& en = index_[i];
  DistillSequence s;
  s.prompt_len = en.prompt_len;
  s.tokens.assign(tok, tok + en.length);
  for (int32_t t : s.tokens)
    SSD_CHECK(t >= 0 && t < vocab_, "{}: sequence {} holds token id {} outside the vocabulary "
              "({})", path(), i, t, vocab_);
  const uint64_t n = static_cast<uint64_t>(en.length) * static_cast<uint64_t>(feature_dim());
  const uint8_t* f16 = file_.data() + en.offset + 4ull * static_cast<uint64_t>(en.length);
  s.features.resize(n);
  for (uint64_t k = 0; k < n; ++k)
    s.features[k] = kernels::fp16_to_fp32(load<uint16_t>(f16 + 2 * k));
  return s;
}

std::vector<int64_t> DistillDataset::response_token_counts() const {
  std::vector<int64_t> counts(static_cast<size_t>(vocab_), 0);
  for (size_t i = 0; i < index_.size(); ++i) {
    const int32_t* tok = tokens_of(i);
    for (int32_t t = index_[i].prompt_len; t < index_[i].length; ++t) {
      SSD_CHECK(tok[t] >= 0 && tok[t] < vocab_, "{}: sequence {} holds token id {} outside the "
                "vocabulary ({})", path(), i, tok[t], vocab_);
      ++counts[static_cast<size_t>(tok[t])];
    }
  }
  return counts;
}

// ---------------------------------------------------------------- writer

DistillWriter::DistillWriter(const std::string& path, std::vector<int32_t> layers, int64_t dim,
                             int64_t vocab, std::string model_digest)
    : path_(path), partial_(path + ".partial"), layers_(std::move(layers)), dim_(dim),
      vocab_(vocab), digest_(std::move(model_digest)) {
  SSD_CHECK(!layers_.empty() && layers_.size() <= kMaxLayers, "distill writer: {} layers",
            layers_.size());
  for (int32_t l : layers_) SSD_CHECK(l >= 0, "distill writer: bad layer {}", l);
  SSD_CHECK(dim_ >= 1 && vocab_ >= 1, "distill writer: bad dim {} or vocab {}", dim_, vocab_);
  SSD_CHECK(digest_.size() <= kMaxDigest, "distill writer: model digest too long");
  f_ = std::fopen(partial_.c_str(), "wb");
  SSD_CHECK(f_ != nullptr, "cannot write {}: {}", partial_, std::strerror(errno));
  // Placeholder header (rewritten by finish()) so records start at their final offsets.
  std::vector<uint8_t> zeros(header_bytes(layers_.size(), digest_.size()), 0);
  write_bytes(zeros.data(), zeros.size());
}

DistillWriter::~DistillWriter() {
  if (f_ != nullptr) std::fclose(f_);
  if (!finished_) {
    std::error_code ec;
    std::filesystem::remove(partial_, ec);
  }
}

void DistillWriter::write_bytes(const void* p, size_t n) {
  SSD_CHECK(std::fwrite(p, 1, n, f_) == n, "cannot write {}: {}", partial_,
            std::strerror(errno));
  pos_ += n;
}

void DistillWriter::pad_to(uint64_t align) {
  static const std::array<uint8_t, kRecordAlign> zeros{};
  const uint64_t pad = round_up(pos_, align) - pos_;
  if (pad > 0) write_bytes(zeros.data(), pad);
}

void DistillWriter::add(std::span<const int32_t> tokens, int32_t prompt_len,
                        std::span<const float> features) {
  SSD_CHECK(!finished_, "distill writer: add after finish");
  const int64_t len = static_cast<int64_t>(tokens.size());
  const int64_t f = dim_ * static_cast<int64_t>(layers_.size());
  SSD_CHECK(len >= 1 && len <= INT32_MAX, "distill writer: sequence of {} tokens", len);
  SSD_CHECK(prompt_len >= 0 && prompt_len <= len, "distill writer: prompt length {} of a {}-token "
            "sequence", prompt_len, len);
  SSD_CHECK(static_cast<int64_t>(features.size()) == len * f,
            "distill writer: {} feature values for {} tokens x {} features", features.size(), len,
            f);
  for (int32_t t : tokens)
    SSD_CHECK(t >= 0 && t < vocab_, "distill writer: token id {} outside the vocabulary ({})", t,
              vocab_);
  std::vector<uint16_t> half(features.size());  // [L, F]
  for (size_t k = 0; k < features.size(); ++k) {
    half[k] = kernels::fp32_to_fp16(features[k]);
    // Hidden states are finite; one past f16's range (65504) would silently become infinity.
    SSD_CHECK(std::isfinite(features[k]) && (half[k] & 0x7c00u) != 0x7c00u,
              "distill writer: feature value {} (position {}, column {}) is not finite or "
              "outside the f16 range", features[k], k / static_cast<size_t>(f),
              k % static_cast<size_t>(f));
  }
  pad_to(kRecordAlign);
  offsets_.push_back(pos_);
  write_bytes(tokens.data(), tokens.size() * sizeof(int32_t));
  write_bytes(half.data(), half.size() * sizeof(uint16_t));
  index_.emplace_back(static_cast<int32_t>(len), prompt_len);
  total_tokens_ += static_cast<uint64_t>(len);
  response_tokens_ += static_cast<uint64_t>(len - prompt_len);
}

void DistillWriter::finish() {
  SSD_CHECK(!finished_, "distill writer: finish called twice");
  pad_to(8);
  const uint64_t index_offset = pos_;
  std::vector<uint8_t> idx(index_.size() * kIndexEntry, 0);
  for (size_t i = 0; i < index_.size(); ++i) {
    store<uint64_t>(idx, i * kIndexEntry, offsets_[i]);
    store<int32_t>(idx, i * kIndexEntry + 8, index_[i].first);
    store<int32_t>(idx, i * kIndexEntry + 12, index_[i].second);
  }
  write_bytes(idx.data(), idx.size());
  write_bytes(kTrailer.data(), kTrailer.size());

  std::vector<uint8_t> h(header_bytes(layers_.size(), digest_.size()), 0);
  std::memcpy(h.data(), kMagic.data(), 8);
  store<uint32_t>(h, 8, kVersion);
  store<uint32_t>(h, 12, static_cast<uint32_t>(layers_.size()));
  store<int64_t>(h, 16, dim_);
  store<int64_t>(h, 24, vocab_);
  store<uint64_t>(h, 32, index_.size());
  store<uint64_t>(h, 40, index_offset);
  store<uint64_t>(h, 48, total_tokens_);
  store<uint64_t>(h, 56, response_tokens_);
  for (size_t l = 0; l < layers_.size(); ++l) store<int32_t>(h, kFixedHeader + 4 * l, layers_[l]);
  const size_t digest_at = kFixedHeader + 4 * layers_.size();
  store<uint32_t>(h, digest_at, static_cast<uint32_t>(digest_.size()));
  std::memcpy(h.data() + digest_at + 4, digest_.data(), digest_.size());
  SSD_CHECK(std::fseek(f_, 0, SEEK_SET) == 0 && std::fwrite(h.data(), 1, h.size(), f_) == h.size(),
            "cannot write {}: {}", partial_, std::strerror(errno));
  const int rc = std::fclose(f_);
  f_ = nullptr;
  SSD_CHECK(rc == 0, "cannot write {}: {}", partial_, std::strerror(errno));
  std::error_code ec;
  std::filesystem::rename(partial_, path_, ec);
  SSD_CHECK(!ec, "cannot rename {} to {}: {}", partial_, path_, ec.message());
  finished_ = true;
}

}  // namespace ssd
