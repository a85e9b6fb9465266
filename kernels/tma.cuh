#pragma once
// TMA, mbarrier and warp-specialization primitives of the Hopper attention kernels (sm_90a): setmaxnreg, shared-memory mbarriers
// (init, arrive, arrive with an expected transaction count, a parity wait that traps instead of
// hanging), tensor loads from a 3-D map, 1-D bulk loads and fp32 bulk reductions into global memory (with their
// bulk-group commit and waits), and the host-side encoding of a
// [B, S, heads, 128] bf16 tensor's map (through the runtime's driver entry point: no libcuda link).
// Private to kernels/*_sm90a* and the lab.
#include <cstdint>

#include <cuda.h>  // CUtensorMap and its enums
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace ulysses::kernels::tma {

// Warp specialization (FlashAttention-3's producer warpgroup): a warpgroup's register budget lowered to / raised to
// N per thread; every thread of the warpgroup runs it together (.sync.aligned). ptxas honors it only where the
// mbarrier waits around it are one asm block each (mbar_wait_asm below)
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

__device__ __forceinline__ void mbar_init(std::uint32_t bar, std::uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// after the mbarriers' init, before their first use: visible to the other threads (with a barrier after it)
// and to the async proxy (TMA's complete_tx), also for the initialising thread's own loads
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_expect_tx(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Wait until the phase of parity `parity` has completed; a wait that outlives ~2^26 polls (seconds)
// traps instead of hanging the device (a lost arrival is a bug, never a slow tile). mbar_wait_asm keeps the poll
// loop, its count and the trap inside one asm block (as CUTLASS's barrier wait has it): with mbar_wait's C++ loop
// around try_wait in a setmaxnreg consumer, ptxas 13.0 kept the consumers within the launch bound's registers
// (C7512: wgmmas serialized, spills; without the __trap, C7513), so the producer forms wait with it
// (kernels/attention_flash_fwd_sm90a_tma.cuh and attention_flash_bwd_sm90a_tma.cuh PRODUCER). A build with -DULYSSES_MBAR_WAIT_ASM=1 makes mbar_wait that
// form for every kernel, to A/B the two on the defaults (bench/runs/ab_check.sh; not measured yet: the defaults'
// registers move by 1-4 and ptxas gives no C75xx warning either way).
__device__ __forceinline__ void mbar_wait_asm(std::uint32_t bar, std::uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n .reg .u32 n;\n mov.u32 n, 0;\n"
      "WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @p bra DONE_%=;\n"
      " add.u32 n, n, 1;\n setp.gt.u32 p, n, 67108864;\n @p trap;\n bra WAIT_%=;\n"
      "DONE_%=:\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void mbar_wait(std::uint32_t bar, std::uint32_t parity) {
#if defined(ULYSSES_MBAR_WAIT_ASM) && ULYSSES_MBAR_WAIT_ASM
  mbar_wait_asm(bar, parity);
#else
  for (std::uint32_t polls = 0;; ++polls) {
    std::uint32_t done;
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    if (done) return;
    if (polls > (1u << 26)) __trap();
  }
#endif
}
// TMA: the box at (c0 = column, c1 = row, c2 = batch) of `map` into shared `dst`, completing on `bar`
__device__ __forceinline__ void tma_load_3d(std::uint32_t dst, const CUtensorMap* map, std::uint32_t bar, int c0, int c1,
                                            int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
// 1-D bulk copy of `bytes` (a multiple of 16, both addresses 16-byte aligned) into shared `dst`, completing on `bar`
__device__ __forceinline__ void bulk_load(std::uint32_t dst, const void* src, std::uint32_t bytes, std::uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// 1-D bulk reduction: `bytes` (a multiple of 16, both addresses 16-byte aligned) of fp32 in shared `src` added
// element by element into global `dst`, in this thread's current bulk group (bulk_commit closes it)
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, std::uint32_t src, std::uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst), "r"(src),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// wait until at most N of this thread's bulk groups still read their shared source (a no-op without groups)
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

// The 3-D TMA map of a [B, S, heads, head_dim] bf16 tensor (head_dim 64 or 128): dims (heads * head_dim columns,
// S rows, B), boxes of [box_rows][64 columns] with the 128-byte swizzle; rows past S read as zeros.
inline cudaError_t encode_bshd_map(CUtensorMap* map, const __nv_bfloat16* base, int B, int S, int heads, int box_rows,
                                   int head_dim) {
  using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                              const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static Encode encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      fn = nullptr;
      (void)cudaGetLastError();  // the failed lookup's error is reported as cudaErrorNotSupported below, not later
    }
    return reinterpret_cast<Encode>(fn);
  }();
  if (encode == nullptr) return cudaErrorNotSupported;
  if ((reinterpret_cast<std::uintptr_t>(base) & 15u) != 0) return cudaErrorInvalidValue;  // TMA needs 16-byte aligned bases
  if (head_dim != 64 && head_dim != 128) return cudaErrorInvalidValue;  // whole 64-column boxes
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(heads) * head_dim, static_cast<cuuint64_t>(S), static_cast<cuuint64_t>(B)};
  const cuuint64_t strides[2] = {dims[0] * 2, dims[0] * 2 * dims[1]};  // bytes, of dims 1 and 2
  const cuuint32_t box[3] = {64, static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<__nv_bfloat16*>(base), dims, strides, box,
                            elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

}  // namespace ulysses::kernels::tma
