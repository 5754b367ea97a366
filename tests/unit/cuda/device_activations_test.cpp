// Device-resident activations on the CUDA backend (Backend::allocate / upload / download / copy,
// and a whole forward whose activations never leave the device until the logits download). Each
// case needs a GPU and skips with a visible message without one; none has run yet.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <numeric>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/model/model_file.h"
#include "runtime/model/transformer.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"
#include "tests/unit/cuda/skip_without_gpu.h"

namespace ssd {
namespace {


TEST(CudaActivations, AllocateIsZeroedDeviceMemoryAndTransfersAreExact) {
  SSD_SKIP_WITHOUT_GPU("device-resident activations");
  auto be = make_cuda_backend(0);
  std::vector<float> host(1000);
  std::iota(host.begin(), host.end(), 0.5f);
  BackendBuffer a = be->allocate(host.size() * sizeof(float));
  BackendBuffer b = be->allocate(host.size() * sizeof(float));
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, a.data()), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
  std::vector<float> back(host.size(), 9.0f);
  be->download(back.data(), b.data(), back.size() * sizeof(float));
  for (float x : back) ASSERT_EQ(x, 0.0f);
  be->upload(a.data(), host.data(), host.size() * sizeof(float));
  be->copy(b.data(), a.data(), host.size() * sizeof(float));
  be->download(back.data(), b.data(), back.size() * sizeof(float));
  EXPECT_EQ(back, host);
}

// The forward enqueues everything and waits at the logits download only; waiting after every
// op instead (sync_each_op) must not change a bit: the ordering is the stream's, not the host's.
TEST(CudaActivations, ForwardWithoutPerOpWaitsMatchesPerOpWaitsBitForBit) {
  SSD_SKIP_WITHOUT_GPU("device-resident activations");
  test::TempDir tmp;
  const std::string path =
      test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::Q4_K), tmp.file("m.gguf"));
  const ModelFile file = ModelFile::open(path);
  auto async_be = make_cuda_backend(CudaBackendOptions{.device = 0});
  auto sync_be = make_cuda_backend(CudaBackendOptions{.device = 0, .sync_each_op = true});
  Transformer ma(file, *async_be), ms(file, *sync_be);
  KvCache ka(ma.kv_config(128)), ks(ms.kv_config(128));
  const SeqId sa = ka.create(), ss = ks.create();
  Batch prompt = Batch::sequence(sa, {1, 17, 200, 3, 99, 45}, 0, true);
  prompt.hidden_layers = {0};
  const ForwardResult ra = ma.forward(prompt, ka);
  for (SeqId& s : prompt.seqs) s = ss;
  const ForwardResult rs = ms.forward(prompt, ks);
  ASSERT_EQ(ra.logits.size(), rs.logits.size());
  for (size_t i = 0; i < ra.logits.size(); ++i) ASSERT_EQ(ra.logits[i], rs.logits[i]) << i;
  ASSERT_EQ(ra.hidden.size(), 1u);
  EXPECT_EQ(ra.hidden[0], rs.hidden[0]);
  const ForwardResult da = ma.forward(Batch::sequence(sa, {7}, 6), ka);
  const ForwardResult ds = ms.forward(Batch::sequence(ss, {7}, 6), ks);
  EXPECT_EQ(da.logits, ds.logits);
}

}  // namespace
}  // namespace ssd
