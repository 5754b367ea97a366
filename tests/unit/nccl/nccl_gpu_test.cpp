// NCCL on a real GPU, in one process (MPI's singleton start: a group of one): the collective
// bootstraps its communicator and its operations are the identity on host and device buffers
// (host data longer than the staging too, moved in chunks),
// and the transport forms with no lanes; a tensor-parallel Transformer over it (a group of one,
// exchanges on the CUDA backend's stream, inside its graphs) gives the logits of the same model
// without TP, bit for bit, while its forwards are measured, captured and replayed. Each case
// skips with a visible message where no GPU exists (this machine); the multi-rank paths run
// under mpirun in perf/gpu_smoke.sh.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "actors/transport/mpi_world.h"
#include "actors/transport/nccl/nccl_collective.h"
#include "actors/transport/nccl/nccl_comm.h"
#include "actors/transport/nccl/nccl_transport.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/model/transformer.h"
#include "runtime/parallel/tp_context.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"

namespace ssd {
namespace {

class NcclGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0)
      GTEST_SKIP() << "no CUDA device visible (cudaGetDeviceCount): NCCL GPU case not run";
    static MpiSession session(nullptr, nullptr);  // once per process, finalized at exit
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    world_ = std::make_unique<MpiComm>(MpiComm::dup(MPI_COMM_WORLD));
  }
  std::unique_ptr<MpiComm> world_;
};

TEST_F(NcclGpu, CollectiveOfOneIsTheIdentity) {
  NcclCollective c(*world_, {.timeout = std::chrono::milliseconds(30000)});
  ASSERT_EQ(c.size(), 1);
  std::vector<float> x = {1.5f, -2.f, 3.25f};
  c.allreduce_sum(x.data(), 3);
  EXPECT_EQ(x, (std::vector<float>{1.5f, -2.f, 3.25f}));
  const int64_t counts[] = {3};
  std::vector<float> out(3);
  c.allgatherv(x.data(), counts, out.data());
  EXPECT_EQ(out, x);
  float* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 3 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dev, x.data(), 12, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_TRUE(is_device_pointer(dev));
  c.allreduce_sum(dev, 3);
  std::vector<float> back(3);
  ASSERT_EQ(cudaMemcpy(back.data(), dev, 12, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, x);
  cudaFree(dev);
}

// Host data longer than the staging (allocated at construction) moves in chunks: with 16 bytes
// of staging, 37 floats take 10 rounds and still come back whole, in every reduce order, for
// host and device buffers, and a 50-byte broadcast takes 4.
TEST_F(NcclGpu, HostDataLongerThanTheStagingMovesInChunks) {
  for (const ReduceOrder order : {ReduceOrder::kRankOrder, ReduceOrder::kNccl}) {
    NcclCollective c(*world_, {.order = order,
                               .timeout = std::chrono::milliseconds(30000),
                               .staging_bytes = 16});
    std::vector<float> x(37);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i) - 3.0f;
    std::vector<float> y = x;
    c.allreduce_sum(y.data(), static_cast<int64_t>(y.size()));
    EXPECT_EQ(y, x);
    const int64_t counts[] = {37};
    std::vector<float> out(37, 0.0f);
    c.allgatherv(x.data(), counts, out.data());
    EXPECT_EQ(out, x);
    float* dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, x.size() * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dev, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    c.allreduce_sum(dev, static_cast<int64_t>(x.size()));  // device data, staged gather
    std::fill(out.begin(), out.end(), 0.0f);
    c.allgatherv(dev, counts, out.data());  // device in, host out
    EXPECT_EQ(out, x);
    cudaFree(dev);
    std::vector<char> bytes(50);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
    const std::vector<char> want = bytes;
    c.broadcast(bytes.data(), static_cast<int64_t>(bytes.size()), 0);
    EXPECT_EQ(bytes, want);
  }
}

TEST_F(NcclGpu, TpForwardWithDeviceExchangesReplaysAsTheEagerForward) {
  NcclCollective c(*world_, {.timeout = std::chrono::milliseconds(30000)});
  test::TempDir tmp;
  const ModelFile file = ModelFile::open(
      test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::Q8_0), tmp.file("m.gguf")));
  auto tp_be = make_cuda_backend(CudaBackendOptions{.device = 0, .graphs = true});
  auto plain_be = make_cuda_backend(CudaBackendOptions{.device = 0, .graphs = false});
  ASSERT_TRUE(tp_be->exchanges_replayable(c));
  Transformer tp(file, *tp_be, make_tp_context(file, c));
  Transformer plain(file, *plain_be);
  KvCache tp_kv(tp.kv_config(256)), plain_kv(plain.kv_config(256));
  const SeqId ts = tp_kv.create(), ps = plain_kv.create();
  auto both = [&](const std::vector<int32_t>& tokens, int32_t start, const std::string& what) {
    const ForwardResult a = tp.forward(Batch::sequence(ts, tokens, start), tp_kv);
    const ForwardResult b = plain.forward(Batch::sequence(ps, tokens, start), plain_kv);
    ASSERT_EQ(a.logits, b.logits) << what;
  };
  both({1, 17, 200, 3, 99, 45}, 0, "prompt");
  for (int32_t step = 0; step < 6; ++step)  // measured, captured, then replayed
    both({static_cast<int32_t>(step * 31 % 200)}, 6 + step, "decode " + std::to_string(step));
  EXPECT_GE(cuda_graphs_ready(*tp_be), 1);
}

TEST_F(NcclGpu, TransportOfOneForms) {
  NcclTransport t(*world_);
  EXPECT_EQ(t.size(), 1);
  EXPECT_FALSE(t.try_recv().has_value());
}

}  // namespace
}  // namespace ssd
