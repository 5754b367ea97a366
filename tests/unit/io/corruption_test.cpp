// Randomized corruption: thousands of mutants of a small valid GGUF and safetensors file (byte
// flips, truncations, length/count fields inflated to huge values, splices) must each either
// parse or throw ssd::Error - never crash, hang, read out of bounds or allocate hugely. This file
// also builds into ssd_test_io_asan (with AddressSanitizer/UBSan), where an out-of-bounds read
// aborts the run instead of passing silently.
//
// "Allocate hugely" is measured: global operator new is replaced to record the largest single
// request made while a mutant is parsed, which must stay below 64 x the file size + 64 KiB (the
// parsers widen array elements to at most 16 bytes per on-disk byte; the margin is for tensor
// tables and std::string buffers). The seeds are fixed so a failure reproduces.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <random>

#include "runtime/core/error.h"
#include "runtime/io/gguf_file.h"
#include "runtime/io/safetensors_file.h"
#include "runtime/io/safetensors_writer.h"
#include "tests/support/gguf_writer.h"

namespace {
std::atomic<bool> g_tracking{false};
std::atomic<size_t> g_largest{0};

void note(size_t n) {
  if (!g_tracking.load(std::memory_order_relaxed)) return;
  size_t cur = g_largest.load(std::memory_order_relaxed);
  while (n > cur && !g_largest.compare_exchange_weak(cur, n)) {
  }
}
}  // namespace

// Kept out of line: when GCC inlines a replacement operator delete next to a `new`, it warns
// (-Wmismatched-new-delete) about free() on memory from operator new, which is exactly the pairing
// intended here.
[[gnu::noinline]] void* operator new(size_t n) {
  note(n);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void* operator new[](size_t n) { return operator new(n); }
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace ssd {
namespace {

constexpr int kMutantsPerFormat = 3000;

std::vector<uint8_t> valid_gguf(test::GgufLayout* layout) {
  test::GgufWriter w;
  w.set_alignment(16)
      .add_string("general.architecture", "llama")
      .add_u32("llama.block_count", 2)
      .add_f32("llama.rope.freq_base", 10000.0f)
      .add_bool("x.flag", true)
      .add_string_array("tokenizer.ggml.tokens", {"<s>", "a", "bc", "def"})
      .add_int_array("tokenizer.ggml.token_type", {3, 1, 1, 1})
      .add_float_array("tokenizer.ggml.scores", {0, -1, -2, -3});
  w.add_raw_tensor("token_embd.weight", DType::Q8_0, {32, 4}, std::vector<uint8_t>(4 * 34, 3));
  w.add_raw_tensor("blk.0.attn_norm.weight", DType::F32, {32}, std::vector<uint8_t>(128, 0));
  w.add_raw_tensor("blk.0.ffn_up.weight", DType::F16, {8, 2, 2}, std::vector<uint8_t>(64, 0));
  return w.bytes(layout);
}

std::vector<uint8_t> valid_safetensors(std::vector<uint64_t>* length_fields) {
  SafetensorsWriter w;
  w.add_raw_tensor("model.embed_tokens.weight", "F32", {4, 8}, std::vector<uint8_t>(128, 1));
  w.add_raw_tensor("model.norm.weight", "BF16", {8}, std::vector<uint8_t>(16, 2));
  w.add_raw_tensor("lm_head.weight", "F16", {2, 2, 2}, std::vector<uint8_t>(16, 3));
  w.add_metadata("format", "pt");
  *length_fields = {0};  // the header length
  return w.bytes();
}

// Applies 1-3 random mutations. `fields` are offsets of u64 length/count fields worth inflating.
std::vector<uint8_t> mutate(std::vector<uint8_t> b, const std::vector<uint64_t>& fields,
                            std::mt19937_64& rng) {
  auto pick = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  const int n_mut = 1 + static_cast<int>(pick(3));
  for (int m = 0; m < n_mut && !b.empty(); ++m) {
    switch (pick(6)) {
      case 0:  // flip random bits in a few bytes
        for (int k = 0, n = 1 + static_cast<int>(pick(4)); k < n; ++k)
          b[pick(b.size())] ^= static_cast<uint8_t>(1u << pick(8));
        break;
      case 1:  // random byte
        b[pick(b.size())] = static_cast<uint8_t>(rng());
        break;
      case 2:  // truncate
        b.resize(pick(b.size()));
        break;
      case 3: {  // inflate a known length/count field to a huge or off-by-a-little value
        if (fields.empty()) break;
        const uint64_t at = fields[pick(fields.size())];
        if (at + 8 > b.size()) break;
        static constexpr uint64_t kValues[] = {~0ull, 1ull << 63, 1ull << 60, 1ull << 32,
                                               0xffffffffull, 0, 1};
        uint64_t v = pick(2) ? kValues[pick(std::size(kValues))] : 0;
        if (v == 0) {
          uint64_t old = 0;
          for (int i = 0; i < 8; ++i) old |= static_cast<uint64_t>(b[at + i]) << (8 * i);
          v = old + pick(64) - 32;
        }
        test::patch_u64(b, at, v);
        break;
      }
      case 4: {  // overwrite 8 bytes anywhere with a huge little-endian value
        if (b.size() < 8) break;
        test::patch_u64(b, pick(b.size() - 7), rng() >> pick(64));
        break;
      }
      case 5: {  // duplicate a slice (repeats a record, shifts everything after it)
        const uint64_t from = pick(b.size()), len = 1 + pick(24);
        if (from + len > b.size()) break;
        std::vector<uint8_t> slice(b.begin() + from, b.begin() + from + len);
        b.insert(b.begin() + pick(b.size()), slice.begin(), slice.end());
        break;
      }
    }
  }
  return b;
}

struct Outcome {
  int parsed = 0, rejected = 0;
};

template <class Parse>
Outcome run_mutants(const std::vector<uint8_t>& base, const std::vector<uint64_t>& fields,
                    uint64_t seed, Parse parse) {
  std::mt19937_64 rng(seed);
  Outcome out;
  for (int i = 0; i < kMutantsPerFormat; ++i) {
    std::vector<uint8_t> m = mutate(base, fields, rng);
    const size_t limit = 64 * m.size() + 64 * 1024;
    g_largest = 0;
    g_tracking = true;
    try {
      parse(std::move(m));
      ++out.parsed;
    } catch (const Error&) {
      ++out.rejected;
    } catch (const std::exception& e) {
      g_tracking = false;
      ADD_FAILURE() << "mutant " << i << " threw a non-ssd::Error: " << e.what();
    }
    g_tracking = false;
    EXPECT_LE(g_largest.load(), limit) << "mutant " << i << " of seed " << seed;
  }
  return out;
}

TEST(IoCorruption, AllocationTrackerSeesLargeRequests) {
  // The bound below is only meaningful if the replaced operator new is the one in use.
  g_largest = 0;
  g_tracking = true;
  auto big = std::make_unique<std::vector<uint8_t>>(1 << 20);
  g_tracking = false;
  EXPECT_GE(g_largest.load(), size_t{1} << 20);
}

TEST(IoCorruption, GgufMutantsParseOrThrowSsdError) {
  test::GgufLayout lay;
  const auto base = valid_gguf(&lay);
  std::vector<uint64_t> fields = {lay.tensor_count_at, lay.kv_count_at};
  for (const auto& kv : lay.kvs) {
    fields.push_back(kv.key_len_at);
    fields.push_back(kv.value_at);      // a string length, or an array's type+count
    fields.push_back(kv.value_at + 4);  // an array's count
  }
  for (const auto& t : lay.tensors) {
    fields.push_back(t.name_len_at);
    fields.push_back(t.dims_at);
    fields.push_back(t.offset_at);
  }
  const Outcome o = run_mutants(base, fields, 0x9e11, [](std::vector<uint8_t> b) {
    GgufFile::parse(MappedFile::from_bytes("mutant.gguf", std::move(b)));
  });
  // Sanity that the mutations are neither all fatal nor all harmless (so both paths ran).
  EXPECT_GT(o.rejected, kMutantsPerFormat / 2);
  EXPECT_GT(o.parsed, 10);
  std::printf("gguf mutants: %d parsed, %d rejected\n", o.parsed, o.rejected);
}

TEST(IoCorruption, SafetensorsMutantsParseOrThrowSsdError) {
  std::vector<uint64_t> fields;
  const auto base = valid_safetensors(&fields);
  const Outcome o = run_mutants(base, fields, 0x5afe, [](std::vector<uint8_t> b) {
    SafetensorsModel::parse(MappedFile::from_bytes("mutant.safetensors", std::move(b)));
  });
  EXPECT_GT(o.rejected, kMutantsPerFormat / 2);
  EXPECT_GT(o.parsed, 10);
  std::printf("safetensors mutants: %d parsed, %d rejected\n", o.parsed, o.rejected);
}

}  // namespace
}  // namespace ssd
