// The lab build of the wgmma backward's TMA form (sm_90a, D = 128; backward variants 8192: three stages,
// 12288: two, 40960: 8192 in FlashAttention-3's step order, 106496: 40960 with dQ by bulk reductions;
// kernels/attention_flash_bwd_sm90a_tma.cuh). Its own file: the forward's and the backward's
// sm_90a pieces both name their tile constants kD, kBM, kBN.
#include "bench/attn/attn_tuning.hpp"
#include "kernels/attention_flash_bwd_sm90a_tma.cuh"

namespace ulysses::bench::attn {

cudaError_t launch_bwd_main_sm90a_tma_variant(const kernels::flash::BwdArgs& a, int B, bool causal, int v,
                                              cudaStream_t stream) {
  namespace F = kernels::flash;
  if (v == F::kBwdVariantSm90aTma2)
    return causal ? F::launch_bwd_main_sm90a_tma<true, 2>(a, B, stream) : F::launch_bwd_main_sm90a_tma<false, 2>(a, B, stream);
  if (v == F::kBwdVariantSm90aTma3DqBulk)
    return causal ? F::launch_bwd_main_sm90a_tma<true, 3, true, true>(a, B, stream)
                  : F::launch_bwd_main_sm90a_tma<false, 3, true, true>(a, B, stream);
  if (v == F::kBwdVariantSm90aTma3DqUnderDk)
    return causal ? F::launch_bwd_main_sm90a_tma<true, 3, true>(a, B, stream)
                  : F::launch_bwd_main_sm90a_tma<false, 3, true>(a, B, stream);
  return causal ? F::launch_bwd_main_sm90a_tma<true, 3>(a, B, stream) : F::launch_bwd_main_sm90a_tma<false, 3>(a, B, stream);
}

}  // namespace ulysses::bench::attn
