// The lab build of the wgmma backward at head dim 64 (sm_90a; backward variants 16384, 20480, its dQ split by keys,
// and 114688, its FlashAttention-3 step order and dQ path; TMA loads in three stages; 245760, 114688 with 128-row q
// tiles in two stages, kernels/' D = 64 default since 2026-12-06c;
// kernels/attention_flash_bwd_sm90a_d64.cuh). Its own file, so that the D = 128 lab kernels' translation unit
// (attn_flash_bwd_sm90a_lab.cu) and machine code stay as they were.
#include "bench/attn/attn_tuning.hpp"
#include "kernels/attention_flash_bwd_sm90a_d64_q128.cuh"

namespace ulysses::bench::attn {

cudaError_t launch_bwd_main_sm90a_d64_variant(const kernels::flash::BwdArgs& a, int B, bool causal, int v,
                                              cudaStream_t stream) {
  namespace F = kernels::flash;
  if (v == F::kBwdVariantSm90aD64Ksplit) {
    return causal ? F::launch_bwd_main_sm90a_d64_form<true, 3, true>(a, B, stream)
                  : F::launch_bwd_main_sm90a_d64_form<false, 3, true>(a, B, stream);
  }
  if (v == F::kBwdVariantSm90aD64DqBulk) {  // dq_accum in the fragment layout (the caller's run_bwd converts it so)
    return causal ? F::launch_bwd_main_sm90a_d64_form<true, 3, false, true>(a, B, stream)
                  : F::launch_bwd_main_sm90a_d64_form<false, 3, false, true>(a, B, stream);
  }
  if (v == F::kBwdVariantSm90aD64Q128) {  // 128-row q tiles, two stages; dq_accum in dq_frag_q128_block's layout
    return causal ? F::launch_bwd_main_sm90a_d64_q128_form<true, 2>(a, B, stream)
                  : F::launch_bwd_main_sm90a_d64_q128_form<false, 2>(a, B, stream);
  }
  if (v != F::kBwdVariantSm90aD64) return cudaErrorInvalidValue;
  return causal ? F::launch_bwd_main_sm90a_d64_form<true, 3, false>(a, B, stream)
                : F::launch_bwd_main_sm90a_d64_form<false, 3, false>(a, B, stream);
}

}  // namespace ulysses::bench::attn
