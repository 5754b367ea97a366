// A standalone driver for a libFuzzer entry point, for builds without libFuzzer (gcc, the normal
// CI build): replays every file of the corpus directories, then mutates corpus inputs at random
// (byte flips, inserted bytes, truncations, size fields overwritten with edge values) with a fixed
// seed until --seconds or --runs is reached, and prints how many inputs ran.
//   ssd_fuzz_wire_replay [--seconds N] [--runs N] [--seed S] DIR...
// A finding is whatever LLVMFuzzerTestOneInput lets escape: a sanitizer report (the harness is
// built with -fsanitize=address,undefined) or an exception. The input that caused it is written
// to ./wire-finding.bin before the process exits non-zero.
#include <sanitizer/common_interface_defs.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Bytes = std::vector<uint8_t>;

Bytes g_current;  // the input being run, saved by save_current() when it is a finding

void save_current() {
  std::ofstream out("wire-finding.bin", std::ios::binary);
  out.write(reinterpret_cast<const char*>(g_current.data()),
            static_cast<std::streamsize>(g_current.size()));
  std::fprintf(stderr, "replay: finding input (%zu bytes) written to wire-finding.bin\n",
               g_current.size());
}

void run_one(const Bytes& input) {
  g_current = input;
  try {
    LLVMFuzzerTestOneInput(g_current.data(), g_current.size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "replay: FINDING: exception escaped the target: %s\n", e.what());
    save_current();
    std::exit(1);
  }
}

// Little-endian store of the low `width` bytes of v at `at` (clipped to the input).
void put(Bytes& b, size_t at, uint64_t v, size_t width) {
  for (size_t i = 0; i < width && at + i < b.size(); ++i) b[at + i] = uint8_t(v >> (8 * i));
}

// One random edit of `in`.
Bytes mutate(Bytes in, std::mt19937_64& rng) {
  auto pick = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  static const uint64_t kEdges[] = {0, 1, 2, 7, 8, 0x7f, 0x80, 0xff, 0xffff, 0x7fffffff,
                                    0x80000000, 0xffffffff, 0x100000000, ~uint64_t{0} >> 1,
                                    ~uint64_t{0}};
  const int edits = 1 + int(pick(4));
  for (int e = 0; e < edits; ++e) {
    switch (pick(6)) {
      case 0:  // flip one bit
        if (!in.empty()) in[pick(in.size())] ^= uint8_t(1u << pick(8));
        break;
      case 1:  // a random byte
        if (!in.empty()) in[pick(in.size())] = uint8_t(rng());
        break;
      case 2: {  // insert 1..8 random bytes
        const size_t at = pick(in.size() + 1), n = 1 + pick(8);
        Bytes add(n);
        for (auto& x : add) x = uint8_t(rng());
        in.insert(in.begin() + long(at), add.begin(), add.end());
        break;
      }
      case 3:  // truncate (or drop a middle slice)
        if (!in.empty()) {
          const size_t at = pick(in.size()), n = 1 + pick(in.size() - at);
          in.erase(in.begin() + long(at), in.begin() + long(at + n));
        }
        break;
      case 4:  // a size prefix (Cereal writes them as 8 bytes) or a header length: an edge value
        put(in, pick(in.size() + 1), kEdges[pick(std::size(kEdges))], pick(2) ? 8 : 4);
        break;
      case 5:  // a header field: head_bytes (offset 12) or payload_bytes (16)
        if (pick(2)) put(in, 12, kEdges[pick(std::size(kEdges))] & 0xffffffff, 4);
        else put(in, 16, kEdges[pick(std::size(kEdges))], 8);
        break;
    }
  }
  // Usually keep payload_bytes consistent with the size, so the edit reaches the decoders.
  if (in.size() >= 32 && pick(4) != 0) put(in, 16, in.size() - 32, 8);
  return in;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0;
  uint64_t runs = 0, seed = 20261125;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--seconds" || a == "--runs" || a == "--seed") && i + 1 < argc) {
      const std::string v = argv[++i];
      if (a == "--seconds") seconds = std::stod(v);
      else if (a == "--runs") runs = std::stoull(v);
      else seed = std::stoull(v);
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "usage: %s [--seconds N] [--runs N] [--seed S] DIR...\n", argv[0]);
      return 2;
    } else {
      dirs.push_back(a);
    }
  }
  __sanitizer_set_death_callback(save_current);
  std::vector<Bytes> corpus;
  for (const std::string& d : dirs) {
    if (!std::filesystem::is_directory(d)) {
      std::fprintf(stderr, "replay: corpus directory %s does not exist\n", d.c_str());
      return 2;
    }
    std::vector<std::filesystem::path> files;
    for (const auto& f : std::filesystem::directory_iterator(d))
      if (f.is_regular_file()) files.push_back(f.path());
    std::sort(files.begin(), files.end());  // a fixed order: the run is reproducible
    for (const auto& p : files) {
      std::ifstream in(p, std::ios::binary);
      corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "replay: no corpus files in the given directories\n");
    return 2;
  }
  for (const Bytes& b : corpus) run_one(b);
  std::printf("replay: %zu corpus inputs ran clean\n", corpus.size());

  std::mt19937_64 rng(seed);
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  uint64_t done = 0;
  while ((runs == 0 || done < runs) && (seconds <= 0 || elapsed() < seconds) &&
         (runs != 0 || seconds > 0)) {
    run_one(mutate(corpus[rng() % corpus.size()], rng));
    ++done;
  }
  std::printf("replay: %llu mutated inputs in %.1f s (seed %llu), no findings\n",
              static_cast<unsigned long long>(done), elapsed(),
              static_cast<unsigned long long>(seed));
  return 0;
}
