#pragma once
// Hopper warpgroup MMA (wgmma.mma_async, sm_90a only) and its shared-memory descriptors.
// Private to kernels/*_sm90a.cu (compiled with -gencode arch=compute_90a,code=sm_90a).
//
// A warpgroup is 4 consecutive warps (128 threads). wgmma.m64nNk16 computes a 64 x N tile:
//   D (fp32, registers): warp w of the group owns rows 16w..16w+15; thread (g = lane/4,
//     t = lane%4) holds, for each n8 column tile j = 0..N/8-1,
//       d[4j+0], d[4j+1] = (row 16w+g,   cols 8j+2t, 8j+2t+1)
//       d[4j+2], d[4j+3] = (row 16w+g+8, cols 8j+2t, 8j+2t+1)
//     (the mma.m16n8k16 C fragment repeated over j)
//   A from registers (bf16, k16): the mma.m16n8k16 A fragment of the warp's 16 rows:
//       a0 (g, 2t..2t+1)  a1 (g+8, 2t..)  a2 (g, 2t+8..)  a3 (g+8, 2t+8..)
//     so the accumulators of n8 tiles 2kk and 2kk+1, packed in pairs, are the A fragment of
//     k-step kk: a = {pack(d[8kk], d[8kk+1]), pack(d[8kk+2], ..+3), pack(d[8kk+4], ..), pack(d[8kk+6], ..)}.
//   A, B from shared memory: a 64-bit descriptor of a canonical layout (below).
//
// Canonical 128-byte-swizzle layouts used here (PTX ISA "Shared Memory Matrix Layout";
// CUTLASS cute::GMMA::Layout_{K,MN}_SW128_Atom): a tile of R rows x 64 bf16 (128 bytes per
// row), 1024-byte aligned, 16-byte chunk c of row r stored at chunk c ^ (r % 8):
//   byte(r, col) = r*128 + (((col/8) ^ (r%8)) * 16) + (col%8)*2
// Wider tiles (D = 128) are two such 64-column halves one after the other.
//   K-major operand (the k index runs along the 128-byte row; rows are m or n):
//     SBO = 1024 (8 rows), LBO unused (16); k-step kk of a 64-wide half: start + kk*32 bytes.
//   MN-major operand (m or n runs along the row; rows are k): LBO = byte distance between
//     64-wide m/n blocks (the half stride), SBO = 1024 (8 k rows); k-step kk: start + kk*2048.
// The hardware applies the XOR to the address bits [4,7) from bits [7,10), which is why the
// tiles must be 1024-byte aligned and why adding kk*32 inside a row is legal.
// By the same rule an N = 32 MN-major operand may start 64 bytes into the rows (columns 32..63
// of a 64-wide tile: the D = 64 backward's dQ, kernels/attention_flash_bwd_sm90a_d64.cuh; not
// yet run on a GPU, nor is m64n32k16_ss below).
#include <cstdint>

// Defined in device code compiled for sm_90a (where wgmma exists); kernels using wgmma compile
// their bodies only under it and trap otherwise (the host never launches them there).
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ULYSSES_SM90A_DEVICE 1
#endif

namespace ulysses::kernels::wgmma {

__device__ __forceinline__ std::uint64_t desc(std::uint32_t smem_byte_addr, std::uint32_t lbo_bytes,
                                              std::uint32_t sbo_bytes) {
  return static_cast<std::uint64_t>((smem_byte_addr & 0x3FFFFu) >> 4) |
         (static_cast<std::uint64_t>((lbo_bytes & 0x3FFFFu) >> 4) << 16) |
         (static_cast<std::uint64_t>((sbo_bytes & 0x3FFFFu) >> 4) << 32) | (1ull << 62);  // 128B swizzle
}

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// generic-proxy shared-memory writes (st.shared, stmatrix, cp.async) -> visible to wgmma's reads
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// keep the compiler from moving register reads/writes across a wait (CUTLASS warpgroup_fence_operand)
__device__ __forceinline__ void fence_reg(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void fence_reg(std::uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }

#define ULY_F8(d, i)                                                                                      \
  "+f"(d[i + 0]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])

// d[32] (+)= A[64x16] * B[16x64]; A and B from shared memory.
// TA: A is M-major (1) or K-major (0); TB: B is N-major (1) or K-major (0). acc = 0: d = A*B.
template <int TA, int TB>
__device__ __forceinline__ void m64n64k16_ss(float (&d)[32], std::uint64_t da, std::uint64_t db, int acc) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, %35, %36;\n}\n"
      : ULY_F8(d, 0), ULY_F8(d, 8), ULY_F8(d, 16), ULY_F8(d, 24)
      : "l"(da), "l"(db), "r"(acc), "n"(TA), "n"(TB));
}

// d[64] (+)= A[64x16] * B[16x128]; A and B from shared memory (TA, TB, acc as m64n64k16_ss).
template <int TA, int TB>
__device__ __forceinline__ void m64n128k16_ss(float (&d)[64], std::uint64_t da, std::uint64_t db, int acc) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, %67, %68;\n}\n"
      : ULY_F8(d, 0), ULY_F8(d, 8), ULY_F8(d, 16), ULY_F8(d, 24), ULY_F8(d, 32), ULY_F8(d, 40), ULY_F8(d, 48),
        ULY_F8(d, 56)
      : "l"(da), "l"(db), "r"(acc), "n"(TA), "n"(TB));
}

// d[88] (+)= A[64x16] * B[16x176]; A and B from shared memory (TA, TB, acc as m64n64k16_ss). N = 176 is legal
// for bf16 (any multiple of 8 up to 256): the forward's 176-key tiles for the full mask at D = 128 (S = Q K^T;
// forward bit 1024 with the producer warpgroup's bit 256, the default form since 2026-12-06c).
template <int TA, int TB>
__device__ __forceinline__ void m64n176k16_ss(float (&d)[88], std::uint64_t da, std::uint64_t db, int acc) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %90, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n176k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87}, "
      "%88, %89, p, 1, 1, %91, %92;\n}\n"
      : ULY_F8(d, 0), ULY_F8(d, 8), ULY_F8(d, 16), ULY_F8(d, 24), ULY_F8(d, 32), ULY_F8(d, 40), ULY_F8(d, 48),
        ULY_F8(d, 56), ULY_F8(d, 64), ULY_F8(d, 72), ULY_F8(d, 80)
      : "l"(da), "l"(db), "r"(acc), "n"(TA), "n"(TB));
}

// d[64] += A[64x16] * B[16x128]; A from registers (4 x bf16x2), B from shared memory.
template <int TB>
__device__ __forceinline__ void m64n128k16_rs(float (&d)[64], const std::uint32_t* a, std::uint64_t db) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
      : ULY_F8(d, 0), ULY_F8(d, 8), ULY_F8(d, 16), ULY_F8(d, 24), ULY_F8(d, 32), ULY_F8(d, 40), ULY_F8(d, 48),
        ULY_F8(d, 56)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1), "n"(TB));
}

// d[16] (+)= A[64x16] * B[16x32]; A and B from shared memory (TA, TB, acc as m64n64k16_ss). D = 64 backward's dQ.
template <int TA, int TB>
__device__ __forceinline__ void m64n32k16_ss(float (&d)[16], std::uint64_t da, std::uint64_t db, int acc) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
      "%16, %17, p, 1, 1, %19, %20;\n}\n"
      : ULY_F8(d, 0), ULY_F8(d, 8)
      : "l"(da), "l"(db), "r"(acc), "n"(TA), "n"(TB));
}

// d[32] += A[64x16] * B[16x64]; A from registers (4 x bf16x2), B from shared memory. D = 64: the forward's
// P V, the backward's dV, dK.
template <int TB>
__device__ __forceinline__ void m64n64k16_rs(float (&d)[32], const std::uint32_t* a, std::uint64_t db) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
      : ULY_F8(d, 0), ULY_F8(d, 8), ULY_F8(d, 16), ULY_F8(d, 24)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1), "n"(TB));
}

#undef ULY_F8

}  // namespace ulysses::kernels::wgmma
