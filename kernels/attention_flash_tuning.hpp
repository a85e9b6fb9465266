#pragma once
// Tuning variants of the flash attention kernels, for side-by-side measurement in
// bench/attn/attn_check (--fwd-variant / --bwd-variant). Library users need not touch these;
// the defaults are the measured best (docs/ATTENTION.md).
//   forward  0: D=64 with 64-key tiles; 1 (default): D=64 with 128-key tiles (D=128: always 64)
//   backward: bits (attention_flash_bwd.cu, BwdCfg): 1 stmatrix for P^T/dS^T, 2 float4 dQ
//   atomics, 4 softmax inside the dP^T pass, 8 next-step copies after the S^T pass (no division,
//   no branch), 16 D=64 with 128-row q tiles, 32 FA2's dV / dQ / dK order, 64 own-query dV/dK
//   k-steps from registers before the barrier, 128 one __syncthreads per step (mbarrier
//   arrival), 256 q tiles last to first. Only the combinations in kBwdVariants are built.
//   Default 93 (1+4+8+16+64).
// Tried and dropped after measurement (docs/ATTENTION.md, commit 98953d6): dQ before dK/dV in
// the backward (-7%), one-register XOR ldmatrix addressing (fwd -6%, bwd -3..5%).
// H200, D=128 causal S=32K H=16, bwd TFLOP/s by variant 0..7: 289 293 288 290 271 270 271 272;
// fwd D=64 causal 32K: variant 0 291, variant 1 305.
namespace ulysses::kernels::flash_tuning {

inline constexpr int kBwdVariants[] = {0, 1, 2, 3, 5, 9, 13, 15, 29, 45, 61, 77, 93, 109, 125, 141, 157, 205, 221, 461, 477};

constexpr bool bwd_variant_exists(int v) {
  for (int x : kBwdVariants) {
    if (x == v) return true;
  }
  return false;
}

void set_fwd_variant(int v);  // 0..1
void set_bwd_variant(int v);  // one of kBwdVariants
int fwd_variant();
int bwd_variant();

}  // namespace ulysses::kernels::flash_tuning
