// The lab build of the wgmma backward with FlashAttention-3's producer warpgroup (sm_90a, D = 128; backward variant
// 368640 = 106496 + the producer: kernels/attention_flash_bwd_sm90a_tma.cuh bwd_kernel_sm90a_tma<CAUSAL, 3, true, true,
// PRODUCER = true>; the lab only). Its own file, so that the other lab kernels' translation units and machine code stay
// as they were.
#include "bench/attn/attn_tuning.hpp"
#include "kernels/attention_flash_bwd_sm90a_tma.cuh"

namespace ulysses::bench::attn {

cudaError_t launch_bwd_main_sm90a_producer(const kernels::flash::BwdArgs& a, int B, bool causal, cudaStream_t stream) {
  namespace F = kernels::flash;
  return causal ? F::launch_bwd_main_sm90a_tma<true, 3, true, true, true>(a, B, stream)
                : F::launch_bwd_main_sm90a_tma<false, 3, true, true, true>(a, B, stream);
}

}  // namespace ulysses::bench::attn
