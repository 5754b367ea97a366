// Run-time dispatch of the row kernels. The instruction set is detected once (CPUID via
// __builtin_cpu_supports, which also checks that the OS saves the wider registers); the binary is
// built for baseline x86-64 and only the *_avx2.cpp / *_avx512.cpp files use wider instructions,
// reached through the tables chosen here. Tests lower the active ISA with force_isa to run every
// implementation this CPU can execute against the reference.
#include "kernels/cpu/rowops.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "kernels/cpu/rowops_table.h"
#include "runtime/core/error.h"

namespace ssd::kernels {
namespace {

// AMX-TILE and AMX-INT8 (CPUID leaf 7, EDX bits 24 and 25), and Linux's permission for this
// process to use the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA,
// refused by a kernel or hypervisor that does not save that state). It covers every thread.
bool amx_usable() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  if (!(d & (1u << 24)) || !(d & (1u << 25))) return false;
  constexpr long kReqXcompPerm = 0x1023, kXtiledata = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) == 0;
}

Isa detect() {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
  if (avx512 && amx_usable()) return Isa::Amx;
  return avx512 ? Isa::Avx512 : avx2 ? Isa::Avx2 : Isa::Scalar;
}

std::atomic<int> g_forced{-1};  // -1: not forced, else an Isa

void check_blocks(const char* what, DType t, int64_t n) {
  const auto& tr = dtype_traits(t);
  SSD_CHECK(n >= 0 && n % tr.block_elems == 0,
            "{}: {} values is not a whole number of {} blocks ({} values each)", what, n, tr.name,
            tr.block_elems);
}

}  // namespace

Isa detected_isa() {
  static const Isa isa = detect();
  return isa;
}

Isa active_isa() {
  const int f = g_forced.load(std::memory_order_relaxed);
  return f < 0 ? detected_isa() : static_cast<Isa>(f);
}

void force_isa(Isa isa) {
  SSD_CHECK(static_cast<int>(isa) <= static_cast<int>(detected_isa()),
            "force_isa: this CPU does not support {} (best is {})", isa_name(isa),
            isa_name(detected_isa()));
  g_forced.store(static_cast<int>(isa), std::memory_order_relaxed);
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx512:
      return "avx512";
    case Isa::Amx:
      return "amx";
  }
  return "?";
}

namespace detail {

const TypeKernels& active_kernels(DType t) {
  const TypeKernels* k = nullptr;
  switch (active_isa()) {
    case Isa::Amx:
    case Isa::Avx512:
      k = avx512_kernels(t);
      break;
    case Isa::Avx2:
      k = avx2_kernels(t);
      break;
    case Isa::Scalar:
      break;
  }
  if (!k) k = scalar_kernels(t);
  SSD_CHECK(k, "no CPU kernel for type {}", dtype_name(t));
  return *k;
}

PackedKernel active_packed_kernel(DType t) {
  switch (active_isa()) {
    case Isa::Amx:
      return amx_packed_kernel(t);
    case Isa::Avx512:
      return avx512_packed_kernel(t);
    case Isa::Avx2:
      return avx2_packed_kernel(t);
    case Isa::Scalar:
      break;
  }
  return scalar_packed_kernel(t);
}

}  // namespace detail

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  check_blocks("dequantize_row", t, n);
  detail::active_kernels(t).dequantize(static_cast<const uint8_t*>(src), dst, n);
}

float dot_row(DType t, const void* row, const float* x, int64_t n) {
  check_blocks("dot_row", t, n);
  float out = 0.0f;
  detail::active_kernels(t).dot(static_cast<const uint8_t*>(row), x, 0, 1, n, &out);
  return out;
}

}  // namespace ssd::kernels
