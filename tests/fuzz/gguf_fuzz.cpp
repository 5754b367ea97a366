// libFuzzer target for the GGUF reader: any input must parse or throw ssd::Error; ASan/UBSan
// (compiled in) turn an out-of-bounds read, overflow or leak into a crash that libFuzzer saves.
//
// Built only with clang and -DSSD_FUZZ=ON. To run (one process; the machine is shared):
//   CC=clang CXX=clang++ cmake -S . -B /tmp/build-fuzz -G Ninja -DSSD_CUDA=OFF -DSSD_FUZZ=ON
//   cmake --build /tmp/build-fuzz --target ssd_fuzz_gguf
//   mkdir -p /tmp/gguf-corpus
//   /tmp/build-fuzz/bin/ssd_fuzz_gguf /tmp/gguf-corpus -max_len=4096 -max_total_time=300
// Seeding the corpus with small valid files (e.g. the ones GgufWriter makes in the io tests, or
// the PyPI-written tests/reference file) gets past the magic and version checks sooner. A crash is
// written to ./crash-<hash>; reproduce it with `ssd_fuzz_gguf crash-<hash>`.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/io/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const ssd::GgufFile f = ssd::GgufFile::parse(
        ssd::MappedFile::from_bytes("fuzz.gguf", std::vector<uint8_t>(data, data + size)));
    // Touch what a loader would: every tensor's first and last byte, every getter.
    volatile uint8_t sink = 0;
    for (const auto& t : f.tensors()) sink = sink ^ t.data[0] ^ t.data[t.nbytes - 1];
    for (const auto& [key, value] : f.metadata()) {
      try {
        (void)f.get_int(key);
      } catch (const ssd::Error&) {
      }
    }
  } catch (const ssd::Error&) {
  }
  return 0;
}
