// The self-distillation dataset a Domino drafter trains on: sequences of prompt + the target's own
// greedy response, each with the target's hidden states at the drafter's layers for every
// position. Written once by `ssd distill` (DistillWriter), read many times by the trainer
// (DistillDataset, memory-mapped: reading sequence i touches only its bytes).
//
// On-disk format (little-endian throughout; every offset below is from the start of the file):
//
//   header, 64 bytes
//     0  char[8]  magic "SSDDIST\0"
//     8  u32      version (1)
//    12  u32      n_layers              number of captured target layers
//    16  i64      dim                   hidden size of the target
//    24  i64      vocab                 target vocabulary size (every token id is < vocab)
//    32  u64      n_sequences
//    40  u64      index_offset          where the index starts (8-aligned)
//    48  u64      total_tokens          sum of L over sequences
//    56  u64      response_tokens       sum of (L - prompt_len) over sequences
//   i32[n_layers] layers                target layer ids, in feature order
//   u32           digest_len, then digest_len bytes: the target's model digest (text)
//   (zero padding to a multiple of 64)
//   records, one per sequence, each starting 64-aligned:
//     i32[L]      tokens                prompt then response
//     f16[L, F]   features              row-major; row t = hidden states of position t at every
//                                       layer side by side, F = n_layers * dim (IEEE binary16)
//   index at index_offset, n_sequences entries of 24 bytes:
//     u64 offset  (of the record)   u32 length L   i32 prompt_len   u64 reserved (0)
//   u64 trailer magic "SSDDEND\0" as 8 bytes after the index
//
// Size: bytes = sum over sequences of (L * 4 + L * F * 2, rounded up to 64) + header (64 +
// 4 * n_layers + 4 + digest, rounded to 64) + 24 * n_sequences + 8. Features dominate: for
// SmolLM2-135M (dim 576) with 3 layers, F = 1728 and each position costs 3460 bytes.
//
// A file is checked whole at open (magic, version, sizes, every index entry inside the file and
// non-overlapping with the header, prompt_len <= L, the trailer); read(i) checks token ids.
// The writer writes to `path + ".partial"` and renames on finish(), so a reader never sees a
// half-written file under the final name.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "runtime/io/mapped_file.h"

namespace ssd {

struct DistillSequence {
  std::vector<int32_t> tokens;    // [L] prompt then response
  int32_t prompt_len = 0;
  std::vector<float> features;    // [L, F] decoded from f16, F = layers * dim
};

class DistillDataset {
 public:
  // Maps the file and checks it whole; throws ssd::Error naming the path and what is wrong.
  static DistillDataset open(const std::string& path);
  DistillDataset(DistillDataset&&) noexcept = default;
  DistillDataset& operator=(DistillDataset&&) noexcept = default;

  size_t size() const { return index_.size(); }
  const std::vector<int32_t>& target_layers() const { return layers_; }
  int64_t feature_dim() const { return dim_ * static_cast<int64_t>(layers_.size()); }
  int64_t dim() const { return dim_; }
  int64_t vocab() const { return vocab_; }
  // Digest of the target that produced the file (model_file_digest of its path).
  std::string model_digest() const { return digest_; }
  const std::string& path() const { return file_.path(); }
  // Throws ssd::Error ("--data PATH: made for a target of ...") unless the dataset was made for a
  // target of this width and vocabulary.
  void check_target(int64_t target_dim, int64_t target_vocab) const;
  // Throws ssd::Error ("WHO reads target layers ... but --data holds layers ...") unless
  // `layers`, the ones `who` (e.g. "--drafter") conditions on, are the dataset's.
  void check_layers(const std::vector<int32_t>& layers, const std::string& who) const;

  DistillSequence read(size_t i) const;
  int32_t length(size_t i) const;       // L of sequence i, without decoding it
  int32_t prompt_len(size_t i) const;
  std::vector<int64_t> response_token_counts() const;  // [vocab]: counts over response tokens
  int64_t total_tokens() const { return total_tokens_; }
  int64_t response_tokens() const { return response_tokens_; }

 private:
  struct Entry {
    uint64_t offset = 0;
    int32_t length = 0;
    int32_t prompt_len = 0;
  };
  DistillDataset() = default;
  const int32_t* tokens_of(size_t i) const;

  MappedFile file_;
  std::vector<int32_t> layers_;
  int64_t dim_ = 0, vocab_ = 0;
  std::string digest_;
  std::vector<Entry> index_;
  int64_t total_tokens_ = 0, response_tokens_ = 0;
};

class DistillWriter {
 public:
  // Opens `path + ".partial"` for writing (throws when it cannot). Does not check whether `path`
  // exists: refusing to overwrite is the caller's decision.
  DistillWriter(const std::string& path, std::vector<int32_t> layers, int64_t dim, int64_t vocab,
                std::string model_digest);
  ~DistillWriter();  // without finish(): removes the partial file
  DistillWriter(const DistillWriter&) = delete;
  DistillWriter& operator=(const DistillWriter&) = delete;

  // tokens [L], features [L, layers * dim] (rounded to f16). prompt_len in [0, L].
  void add(std::span<const int32_t> tokens, int32_t prompt_len, std::span<const float> features);
  // Writes the index and the header, then renames the partial file to `path`.
  void finish();

  size_t size() const { return index_.size(); }
  uint64_t bytes_written() const { return pos_; }

 private:
  void write_bytes(const void* p, size_t n);
  void pad_to(uint64_t align);

  std::string path_, partial_;
  std::vector<int32_t> layers_;
  int64_t dim_ = 0, vocab_ = 0;
  std::string digest_;
  std::FILE* f_ = nullptr;
  uint64_t pos_ = 0;
  std::vector<uint64_t> offsets_;
  std::vector<std::pair<int32_t, int32_t>> index_;  // (L, prompt_len)
  uint64_t total_tokens_ = 0, response_tokens_ = 0;
  bool finished_ = false;
};

// The digest the handshake uses for a model path (64-bit FNV-1a of "is-file|size" and the first
// 64 KiB of the file, or of config.json for a checkpoint directory), as 16 hex digits.
std::string model_file_digest(const std::string& path);

}  // namespace ssd
