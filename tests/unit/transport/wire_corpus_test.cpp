// The wire fuzz target's seed corpus (tests/fuzz/wire_corpus): one encoded frame per sample of
// message_samples.h, named for its kind. With SSD_WRITE_WIRE_CORPUS=1 this test (re)writes the
// files; otherwise it checks that every sample's kind has a file, and that the file is a whole
// frame of that kind that decodes (so a stale corpus after a protocol change is noticed).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "actors/transport/frame.h"
#include "tests/unit/transport/message_samples.h"

namespace ssd {
namespace {

std::filesystem::path corpus_file(MsgKind kind) {
  return std::filesystem::path(SSD_WIRE_CORPUS_DIR) / (kind_name(kind) + ".frame");
}

TEST(WireCorpus, EverySampleHasADecodableFrame) {
  const bool write = std::getenv("SSD_WRITE_WIRE_CORPUS") != nullptr;
  int n = 0;
  std::apply(
      [&](const auto&... msg) {
        auto one = [&](const auto& m) {
          using T = std::decay_t<decltype(m)>;
          const std::filesystem::path path = corpus_file(T::kKind);
          if (write) {
            const std::vector<std::byte> frame = encode_frame(m);
            std::ofstream out(path, std::ios::binary);
            out.write(reinterpret_cast<const char*>(frame.data()), std::streamsize(frame.size()));
          }
          std::ifstream in(path, std::ios::binary);
          ASSERT_TRUE(in) << "missing " << path << " (regenerate: SSD_WRITE_WIRE_CORPUS=1)";
          Envelope env;
          env.peer = 1;
          for (auto it = std::istreambuf_iterator<char>(in); it != std::istreambuf_iterator<char>();
               ++it)
            env.bytes.push_back(static_cast<std::byte>(*it));
          const WireHeader h = check_frame(env.bytes, 1);
          env.kind = static_cast<MsgKind>(h.kind);
          EXPECT_EQ(env.kind, T::kKind) << path;
          EXPECT_NO_THROW((void)decode<T>(env)) << path << " is stale: SSD_WRITE_WIRE_CORPUS=1";
          ++n;
        };
        (one(msg), ...);
      },
      transport_test::sample_messages());
  EXPECT_EQ(n, 26);  // every struct of protocol.h
}

}  // namespace
}  // namespace ssd
