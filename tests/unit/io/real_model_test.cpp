// The reader against the real default model (SmolLM2-135M-Instruct, Q4_1 GGUF): facts checked
// independently with the PyPI gguf package's reader. Needs SSD_MODEL=<path to the .gguf>; skips
// visibly without it.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>

#include "runtime/io/gguf_file.h"

namespace ssd {
namespace {

TEST(RealModel, SmolLM2HeaderAndTensorTable) {
  const char* path = std::getenv("SSD_MODEL");
  struct stat st {};
  if (path == nullptr || *path == '\0' || ::stat(path, &st) != 0)
    GTEST_SKIP() << "SSD_MODEL is unset or missing (set it to the SmolLM2-135M-Instruct GGUF)";

  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.tensors().size(), 272u);
  EXPECT_EQ(f.get_int("llama.block_count"), 30);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 576);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.has_value());
  EXPECT_EQ(tokens->size(), 49152u);

  const TensorRef* emb = f.find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, DType::Q8_0);
  EXPECT_EQ(emb->ne, (std::vector<uint64_t>{576, 49152}));
  EXPECT_EQ(emb->nbytes, 576u / 32 * 34 * 49152);
  const TensorRef* down = f.find_tensor("blk.0.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->type, DType::Q4_1);
  EXPECT_EQ(down->ne, (std::vector<uint64_t>{1536, 576}));
  uint64_t total = 0;
  for (const auto& t : f.tensors()) total += t.nbytes;
  EXPECT_LE(total, f.file_size() - f.data_offset());
}

}  // namespace
}  // namespace ssd
