// The wgmma backward main kernel at head dim 64 as the product runs it (sm_90a; variant 16384: dQ split by
// columns between the warpgroups, three TMA stages; attention_flash_bwd_sm90a_d64.cuh), its form in
// FlashAttention-3's step order with dQ by bulk reductions (variant 114688), and that with FlashAttention-3's 128-row
// q tiles in two stages (variant 245760, the default since 2026-12-06c; attention_flash_bwd_sm90a_d64_q128.cuh). The
// lab runs these and builds the key-split form 20480 (bench/attn/attn_flash_bwd_sm90a_d64_lab.cu).
#include "kernels/attention_flash_bwd_sm90a_d64_q128.cuh"

namespace ulysses::kernels::flash {

cudaError_t launch_bwd_main_sm90a_d64(const BwdArgs& a, int B, bool causal, cudaStream_t stream) {
  return causal ? launch_bwd_main_sm90a_d64_form<true, 3, false>(a, B, stream)
                : launch_bwd_main_sm90a_d64_form<false, 3, false>(a, B, stream);
}

cudaError_t launch_bwd_main_sm90a_d64_dq_bulk(const BwdArgs& a, int B, bool causal, cudaStream_t stream) {
  return causal ? launch_bwd_main_sm90a_d64_form<true, 3, false, true>(a, B, stream)
                : launch_bwd_main_sm90a_d64_form<false, 3, false, true>(a, B, stream);
}

cudaError_t launch_bwd_main_sm90a_d64_q128(const BwdArgs& a, int B, bool causal, cudaStream_t stream) {
  return causal ? launch_bwd_main_sm90a_d64_q128_form<true, 2>(a, B, stream)
                : launch_bwd_main_sm90a_d64_q128_form<false, 2>(a, B, stream);
}

}  // namespace ulysses::kernels::flash
