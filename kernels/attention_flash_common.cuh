#pragma once
// Device primitives shared by the flash attention kernels (sm_80+ PTX: cp.async, ldmatrix,
// mma.sync m16n8k16 bf16 -> fp32; the 128B-swizzle tile copy of the wgmma kernels). Private to
// kernels/attention_flash_*.cu.
//
// Fragment layouts of mma.m16n8k16 (g = lane / 4, t = lane % 4):
//   A 16x16 row-major: a0 (g, 2t..2t+1) a1 (g+8, 2t..) a2 (g, 2t+8..) a3 (g+8, 2t+8..)
//   B 16x8 "col":      b0 (k 2t..2t+1, n g)  b1 (k 2t+8.., n g)
//   C 16x8:            c0,c1 (g, 2t..2t+1)   c2,c3 (g+8, 2t..2t+1)
// Two adjacent C tiles (n 0..7, 8..15) of one row block are exactly one A fragment
// (k 0..15), which is how P and dS go from accumulators to MMA operands without shared memory.
//
// Shared-memory tiles are row-major with COLS bf16 per row, stored in 16-byte chunks whose
// chunk index is XOR-swizzled with (row % 8): the 8 rows an ldmatrix reads, and the 8 rows a
// warp's C-fragment stores touch, fall in 8 different bank groups.
#include <cstdint>

#include <cuda_bf16.h>

namespace ulysses::kernels::flash {

template <int COLS>
__device__ __forceinline__ int swz(int row, int chunk) {
  static_assert(COLS % 64 == 0, "swizzle needs at least 8 chunks per row");
  return row * COLS + ((chunk ^ (row & 7)) << 3);
}

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// ldmatrix lane addresses into a swizzled tile. Lane reads row `row` (row % 8 fixed for the
// lane across the row offsets used: multiples of 8) and chunk 2*kc + bit for k-chunk-pair kc.
// Adding 8 chunks does not touch the 3 bits the swizzle XORs, so (2kc + bit) ^ (row % 8) for
// kc = 4i + j is 8i + ((2j + bit) ^ (row % 8)): four lane-dependent bases plus compile-time
// offsets cover every (kc, row offset), with no per-use address arithmetic.
template <int COLS>
struct LdsmAddr {
  std::uint32_t base[4];
  // kc0: chunk-pair offset (run time) added to every kc
  __device__ __forceinline__ LdsmAddr(const void* tile, int row, int bit, int kc0 = 0) {
    const std::uint32_t row_addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(tile)) + row * COLS * 2;
#pragma unroll
    for (int j = 0; j < 4; ++j) base[j] = row_addr + (((2 * (kc0 + j) + bit) ^ (row & 7)) << 4);
  }
  // kc: chunk pair (16 columns) index; row_off: rows added to the lane's row (multiple of 8)
  __device__ __forceinline__ std::uint32_t at(int kc, int row_off) const {
    return base[kc & 3] + ((kc >> 2) << 7) + row_off * COLS * 2;
  }
};

// 16-byte async copy; when !pred nothing is read and the 16 bytes are zero-filled.
__device__ __forceinline__ void cp_async16(std::uint32_t dst, const void* src, bool pred) {
  const int n = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldsm_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// stmatrix: the inverse of ldsm_x4 (four 8x8 bf16 matrices from C-fragment-shaped registers)
__device__ __forceinline__ void stsm_x4(std::uint32_t addr, std::uint32_t r0, std::uint32_t r1, std::uint32_t r2,
                                        std::uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3));
}

// c += a * b  (16x8x16, bf16 in, fp32 accumulate)
__device__ __forceinline__ void mma16816(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// (lo, hi) -> packed bf16x2, lo in the low half (the lower column index).
__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<std::uint32_t*>(&v);
}

// Copy a ROWS x COLS bf16 tile (global row stride ld elements) into swizzled shared memory;
// rows >= nvalid are zero-filled. All NT threads of the block take part. Thread tid copies
// chunk tid % CPR of rows tid / CPR + k * RSTEP: with RSTEP a multiple of 8 the swizzle is the
// same for all its rows, so one shared address plus immediate offsets covers them.
template <int ROWS, int COLS, int NT>
__device__ __forceinline__ void load_tile(__nv_bfloat16* smem, const __nv_bfloat16* gmem, std::int64_t ld,
                                          int nvalid, int tid) {
  constexpr int CPR = COLS / 8;  // 16-byte chunks per row
  constexpr int RSTEP = NT / CPR;
  static_assert(NT % CPR == 0 && RSTEP % 8 == 0 && ROWS % RSTEP == 0, "tile shape vs threads");
  const int r0 = tid / CPR, c = tid % CPR;
  const __nv_bfloat16* src = gmem + r0 * ld + c * 8;
  const std::uint32_t dst = smem_addr(smem + swz<COLS>(r0, c));
#pragma unroll
  for (int k = 0; k < ROWS / RSTEP; ++k) {
    const bool ok = r0 + k * RSTEP < nvalid;
    cp_async16(dst + k * RSTEP * COLS * 2, ok ? src + k * RSTEP * ld : gmem, ok);
  }
}

// Store a ROWS x COLS bf16 tile from swizzled shared memory to global (16-byte stores),
// rows >= nvalid skipped. Threads [0, NT) of the caller's group take part.
template <int ROWS, int COLS, int NT>
__device__ __forceinline__ void store_tile(__nv_bfloat16* gmem, std::int64_t ld, const __nv_bfloat16* smem,
                                           int nvalid, int tid) {
  constexpr int CPR = COLS / 8;
  constexpr int RSTEP = NT / CPR;
  static_assert(NT % CPR == 0 && ROWS % RSTEP == 0, "tile shape vs threads");
  const int r0 = tid / CPR, c = tid % CPR;
#pragma unroll
  for (int k = 0; k < ROWS / RSTEP; ++k) {
    const int row = r0 + k * RSTEP;
    if (row < nvalid) {
      *reinterpret_cast<uint4*>(gmem + row * ld + c * 8) =
          *reinterpret_cast<const uint4*>(smem + swz<COLS>(row, c));
    }
  }
}

// Copy ROWS x 128 bf16 (global row stride ld) into the two-half 128B-swizzled layout of
// kernels/wgmma.cuh at byte address dst (shared), with 256 threads; rows >= nvalid zero-filled. Thread: chunk c = tid % 16 of rows
// tid / 16 + 16 k (so row % 8, hence the swizzle, is the same for all its rows).
template <int ROWS>
__device__ __forceinline__ void load_tile_sw128(std::uint32_t dst, const __nv_bfloat16* g, std::int64_t ld,
                                                int nvalid, int tid) {
  const int c = tid & 15, r0 = tid >> 4;
  const std::uint32_t d0 = dst + (c >> 3) * ROWS * 128 + r0 * 128 + (((c & 7) ^ (r0 & 7)) << 4);
  const __nv_bfloat16* src = g + r0 * ld + c * 8;
#pragma unroll
  for (int k = 0; k < ROWS / 16; ++k) {
    const bool ok = r0 + 16 * k < nvalid;
    cp_async16(d0 + k * 16 * 128, ok ? src + 16 * k * ld : g, ok);
  }
}

// 2^x, one MUFU instruction (subnormal results flushed to 0; what --use_fast_math makes of exp2f)
__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

constexpr float kLog2e = 1.4426950408889634f;

}  // namespace ulysses::kernels::flash
