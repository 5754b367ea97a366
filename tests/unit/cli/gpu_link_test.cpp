// --transport resolution (actors/roles/gpu_link.h) without a GPU: auto is MPI unless the binary
// has NCCL, the backend is CUDA and a GPU is visible; nccl without NCCL or without a GPU is an
// error naming why; mpi is always MPI. Also: this binary's answer to "built with NCCL?" agrees
// with the build (SSD_HAVE_NCCL); the job's backend is CUDA only when every rank resolved CUDA.
#include <gtest/gtest.h>

#include "actors/roles/gpu_link.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

TEST(GpuLink, AutoNeedsNcclCudaBackendAndAGpu) {
  EXPECT_EQ(resolve_transport("auto", true, true, 4), "nccl");
  EXPECT_EQ(resolve_transport("auto", true, false, 4), "mpi");
  EXPECT_EQ(resolve_transport("auto", false, true, 4), "mpi");
  EXPECT_EQ(resolve_transport("auto", true, true, 0), "mpi");
  EXPECT_EQ(resolve_transport("mpi", true, true, 8), "mpi");
  EXPECT_EQ(resolve_transport("nccl", true, false, 1), "nccl");
}

TEST(GpuLink, NcclWithoutItsPartsIsAClearError) {
  try {
    resolve_transport("nccl", false, true, 4);
    ADD_FAILURE() << "accepted nccl without NCCL";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("built without NCCL"), std::string::npos);
  }
  try {
    resolve_transport("nccl", true, true, 0);
    ADD_FAILURE() << "accepted nccl without a GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sees no GPU"), std::string::npos);
  }
  EXPECT_THROW(resolve_transport("tcp", true, true, 1), Error);
}

TEST(GpuLink, ASharedGpuMakesAutoChooseMpi) {
  const std::string shared = "ranks 0 (target), 4 (drafter) share GPU 0 on node-1";
  EXPECT_EQ(resolve_transport("auto", true, true, 1, shared), "mpi");
  EXPECT_EQ(resolve_transport("auto", true, true, 1, ""), "nccl");
  EXPECT_EQ(resolve_transport("mpi", true, true, 1, shared), "mpi");
}

TEST(GpuLink, NcclWithASharedGpuIsOneLineNamingRanksAndGpu) {
  const std::string shared = "ranks 0 (target), 4 (drafter) share GPU 0 on node-1";
  try {
    resolve_transport("nccl", true, true, 1, shared);
    ADD_FAILURE() << "accepted nccl with two ranks on one GPU";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--transport nccl: " + shared), std::string::npos) << msg;
    EXPECT_NE(msg.find("--transport mpi"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }
}

TEST(GpuLink, TheJobComputesOnCudaOnlyWhenEveryRankCan) {
  std::string note;
  EXPECT_TRUE(agree_cuda_backend({true, true, true}, &note));
  EXPECT_TRUE(note.empty());
  EXPECT_FALSE(agree_cuda_backend({false, false}, &note));
  EXPECT_TRUE(note.empty()) << "every rank chose the CPU itself: nothing to add";
  EXPECT_FALSE(agree_cuda_backend({true, false, true, false}, &note));
  EXPECT_EQ(note, "auto: rank(s) 1,3 found no CUDA device, so every rank runs on the CPU");
  EXPECT_FALSE(agree_cuda_backend({}, nullptr));
}

TEST(GpuLink, KnowsHowItWasBuilt) {
#if defined(SSD_HAVE_NCCL)
  EXPECT_TRUE(built_with_nccl());
#else
  EXPECT_FALSE(built_with_nccl());
#endif
}

}  // namespace
}  // namespace ssd
